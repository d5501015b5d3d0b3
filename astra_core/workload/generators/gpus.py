"""GPU presets and the roofline compute model of the LLM generator.

An operator of ``flops`` floating-point operations that moves ``bytes`` to or
from device memory takes (Williams, Waterman, Patterson, "Roofline", CACM 2009)::

    time = max(flops / (peak_tflops * 1e12 * compute_efficiency),
               bytes / (memory_gbps * 1e9 * memory_efficiency))

Presets are NVIDIA's published dense (non-sparse) BF16 tensor-core peaks and
HBM bandwidths of the SXM parts; the efficiencies default to 1 (the pure
roofline); a user file (JSON or YAML, the same keys) can lower them to match
measured MFU.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from astra_core.errors import ConfigError
from astra_core.workload.generators.specs import read_spec

__all__ = ["GPUS", "GPUSpec", "load_gpu"]


@dataclass(frozen=True)
class GPUSpec:
    """One accelerator: ``peak_tflops`` dense BF16 [TFLOP/s], ``memory_gbps`` HBM [GB/s, 1e9 B/s],
    ``memory_gb`` capacity [GB]; efficiencies are fractions of peak reached (0 < e <= 1)."""

    name: str
    peak_tflops: float
    memory_gbps: float
    memory_gb: float = 80.0
    compute_efficiency: float = 1.0
    memory_efficiency: float = 1.0
    source: str = ""

    def op_time_ns(self, flops: float, nbytes: float) -> float:
        """Roofline time of one operator [ns]."""
        compute = flops / (self.peak_tflops * 1e3 * self.compute_efficiency)  # TFLOP/s = 1e3 FLOP/ns
        memory = nbytes / (self.memory_gbps * self.memory_efficiency)  # GB/s = 1 B/ns
        return max(compute, memory)


GPUS: dict[str, GPUSpec] = {
    g.name.lower(): g
    for g in (
        GPUSpec("A100", 312.0, 2039.0, 80.0,
                source="NVIDIA A100 Tensor Core GPU datasheet (SXM 80GB): BF16 312 TFLOPS dense, HBM2e 2,039 GB/s"),
        GPUSpec("H100", 989.0, 3350.0, 80.0,
                source="NVIDIA H100 Tensor Core GPU datasheet (SXM): BF16 1,979 TFLOPS with sparsity "
                       "(989 dense), HBM3 3.35 TB/s"),
        GPUSpec("H200", 989.0, 4800.0, 141.0,
                source="NVIDIA H200 Tensor Core GPU datasheet (SXM): BF16 1,979 TFLOPS with sparsity "
                       "(989 dense), HBM3e 4.8 TB/s, 141 GB"),
        GPUSpec("B200", 2250.0, 8000.0, 180.0,
                source="NVIDIA DGX B200 / HGX B200 datasheet: 72 PFLOPS FP8 training per 8 GPUs; "
                       "BF16 4.5 PFLOPS with sparsity per GPU (2.25 dense), HBM3e 8 TB/s"),
    )
}


def load_gpu(spec: str | os.PathLike) -> GPUSpec:
    """A preset by name (A100, H100, H200, B200; any case) or a JSON/YAML file of GPUSpec keys.

    Raises ConfigError for an unknown name, an unreadable file, unknown keys
    or non-positive numbers.
    """
    data, path = read_spec(spec, GPUS, "--gpu", "GPU", GPUSpec,
                           ", ".join(g.name for g in GPUS.values()))
    if path is None:
        return data
    for key in ("peak_tflops", "memory_gbps"):
        if key not in data:
            raise ConfigError(f"{path}: missing key {key}")
    for key in ("peak_tflops", "memory_gbps", "memory_gb", "compute_efficiency", "memory_efficiency"):
        value = data.get(key, 1.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ConfigError(f"{path}: {key}: must be a positive number, got {value!r}")
    for key in ("compute_efficiency", "memory_efficiency"):
        if data.get(key, 1.0) > 1:
            raise ConfigError(f"{path}: {key}: a fraction of peak must be <= 1, got {data[key]}")
    return GPUSpec(**data)
