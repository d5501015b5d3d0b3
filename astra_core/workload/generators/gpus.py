"""GPU presets and files for the compute model: :func:`load_gpu`.

The presets and every constant's source are in :mod:`astra_core.config.gpus`
(:data:`~astra_core.config.gpus.GPUS`), one catalog for the compute model and the
NCCL model alike; this module reads a preset by name or a user's file of
:class:`~astra_core.config.gpus.GPUSpec` keys.
"""

from __future__ import annotations

import math
import os

from astra_core.config.gpus import GPUS, GPUSpec
from astra_core.errors import ConfigError
from astra_core.workload.generators.gemm_table import load_gemm_table
from astra_core.workload.generators.specs import read_spec

__all__ = ["GPUS", "GPUSpec", "load_gpu"]


_FRACTIONS = (
    "gemm_efficiency",
    "fp8_efficiency",
    "memory_efficiency",
    "elementwise_efficiency",
    "sustained_compute",
)
#: A preset's NVLink facts: the NCCL model takes its GPU by name (system.json's
#: ``nccl.gpu``) from the presets, so a file does not give them.
_NVLINK_KEYS = (
    "compcap",
    "nvlinks",
    "nvlink_line_gbps",
    "nccl_nvlink_gbps",
    "nvls",
    "nvlink_source",
    "nccl_compute_slowdown",
)


def load_gpu(spec: str | os.PathLike) -> GPUSpec:
    """A preset by name (see :data:`GPUS`; any case) or a JSON/YAML file of GPUSpec keys.

    A file's ``gemm_table`` path is relative to the file's folder. Raises
    ConfigError for an unknown name, an unreadable file or table, unknown keys or
    NVLink keys (the NCCL model's GPUs are the presets), non-positive numbers or
    efficiencies above 1.
    """
    data, path = read_spec(spec, GPUS, "--gpu", "GPU", GPUSpec, ", ".join(g.name for g in GPUS.values()))
    if path is None:
        return data
    given = [key for key in _NVLINK_KEYS if key in data]
    if given:
        raise ConfigError(
            f"{path}: {given[0]}: a GPU file holds the compute model's keys; the NCCL model takes "
            "its GPU by name from the presets (system.json nccl.gpu)"
        )
    for key in ("peak_tflops", "memory_gbps"):
        if key not in data:
            raise ConfigError(f"{path}: missing key {key}")
    for key in ("peak_tflops", "memory_gbps", "memory_gb", *_FRACTIONS):
        _number(path, key, data.get(key, 1.0), positive=True)
    for key in ("sms", "fp8_tflops", "grouped_fp8_tflops", "launch_us"):
        _number(path, key, data.get(key, 0), positive=False)
    if not isinstance(data.get("mx_block_scaling", False), bool):
        raise ConfigError(
            f"{path}: mx_block_scaling: must be true or false, got {data['mx_block_scaling']!r}"
        )
    if not isinstance(data.get("sms", 0), int):
        raise ConfigError(f"{path}: sms: must be an integer, got {data['sms']!r}")
    for key in _FRACTIONS:
        if data.get(key, 1.0) > 1:
            raise ConfigError(f"{path}: {key}: a fraction, must be <= 1, got {data[key]}")
    rates = data.get("layernorm_gbps", ())
    if (
        not isinstance(rates, (list, tuple))
        or len(rates) not in (0, 2)
        or not all(
            not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and v > 0
            for v in rates
        )
    ):
        raise ConfigError(
            f"{path}: layernorm_gbps: expected [forward, backward] GB/s, two positive numbers, got {rates!r}"
        )
    for key in ("attention_tflops", "attention_fwd_tflops", "fp8_attention_tflops"):
        _rows(path, key, data.get(key, ()), "causal (true/false), head_dim, seq_len, TFLOP/s", flag=True)
    _rows(
        path,
        "window_attention_tflops",
        data.get("window_attention_tflops", ()),
        "window, head_dim, seq_len, forward TFLOP/s, backward TFLOP/s",
    )
    table = data.get("gemm_table")
    if table is not None:
        if not isinstance(table, str):
            raise ConfigError(f"{path}: gemm_table: must be the path of a CSV file, got {table!r}")
        data["gemm_table"] = str(path.parent / table)
        load_gemm_table(data["gemm_table"])  # report a bad table now, naming its file
    return GPUSpec(**data)


def _rows(path, key: str, rows, columns: str, flag: bool = False) -> None:
    """ConfigError unless ``rows`` are rows of ``columns`` (comma-separated names): positive
    numbers, the first a true/false flag where ``flag``."""
    width = columns.count(",") + 1
    if not isinstance(rows, (list, tuple)) or not all(
        isinstance(r, (list, tuple))
        and len(r) == width
        and (isinstance(r[0], bool) or not flag)
        and all(
            not isinstance(v, bool) and isinstance(v, (int, float)) and v > 0 for v in r[1 if flag else 0 :]
        )
        for r in rows
    ):
        raise ConfigError(f"{path}: {key}: expected rows [{columns}] of positive numbers")


def _number(path, key: str, value, positive: bool) -> None:
    bad = isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
    if bad or value < 0 or (positive and value == 0):
        raise ConfigError(
            f"{path}: {key}: must be a {'positive' if positive else 'non-negative'} number, got {value!r}"
        )
