"""Published NCCL all-reduce measurements that astra's NCCL model is checked against.

Each :class:`Series` is one published measurement: the machine (an
``examples/validation`` preset, with how many GPUs), the NCCL settings it ran
with, its source, and ``(size in bytes, time in µs)`` points as published
(nccl-tests ``all_reduce_perf`` out-of-place times unless the note says
otherwise). Statements give a published bus bandwidth without a table.
Nothing here is used to set a model constant; the model is calibrated from
NCCL's own cost model and hardware facts only (see
``astra_core/system/collectives/nccl``).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Series:
    """One published curve (see the module docstring)."""

    name: str
    preset: str
    gpus: int
    source: str
    note: str
    points: tuple[tuple[int, float], ...] = ()
    nccl_algo: str | None = None
    busbw_points: tuple[tuple[int, float], ...] = field(default=())  # (bytes, GB/s)


ASTRA_SIM_DOCS = ("ASTRA-sim documentation, 'Validation on GPU Systems - NCCL over HGX-H100 "
                  "Systems' (astra-sim/astra-sim-docs, validation/hardware/gpu-validation-hgx-h100.md), "
                  "hardware curve of figures 2gpus.png / 4gpus.png / 8gpus.png")
ASTRA_SIM_NOTE = ("NCCL_ALGO=Ring. Read off the published figure's hardware line (linear axis): "
                  "only sizes >= 64 MiB, where one pixel is under 4 % of the value; smaller sizes "
                  "are hidden under the axis")

SERIES: tuple[Series, ...] = (
    Series("HGX H100, 2 GPUs, Ring (ASTRA-sim validation)", "hgx_h100", 2, ASTRA_SIM_DOCS,
           ASTRA_SIM_NOTE,
           ((67108864, 224), (134217728, 399), (268435456, 777), (536870912, 1526),
            (1073741824, 2996), (2147483648, 5846)), nccl_algo="Ring"),
    Series("HGX H100, 4 GPUs, Ring (ASTRA-sim validation)", "hgx_h100", 4, ASTRA_SIM_DOCS,
           ASTRA_SIM_NOTE,
           ((67108864, 334), (134217728, 601), (268435456, 1116), (536870912, 2214),
            (1073741824, 4418), (2147483648, 8616)), nccl_algo="Ring"),
    Series("HGX H100, 8 GPUs, Ring (ASTRA-sim validation)", "hgx_h100", 8, ASTRA_SIM_DOCS,
           ASTRA_SIM_NOTE,
           ((67108864, 381), (134217728, 689), (268435456, 1316), (536870912, 2596),
            (1073741824, 5081), (2147483648, 10027)), nccl_algo="Ring"),
    Series("HGX H100, 8 GPUs, NCCL defaults (NVLS), NVIDIA statement", "hgx_h100", 8,
           "S. Jeaugey (NVIDIA), NVIDIA/nccl-tests issue #212, 2024-05-06: 'On 8 GPUs, you "
           "should reach a peak busBw of ~480GB/s (algbw ~275GB/s)' with NVLink SHARP; "
           "'~370GB/s ... with NCCL_ALGO=RING'",
           "peak bus bandwidth at large sizes, no table; compared at 8 GiB",
           busbw_points=((8589934592, 480.0),)),
    Series("HGX H100, 8 GPUs, Ring, NVIDIA statement", "hgx_h100", 8,
           "S. Jeaugey (NVIDIA), NVIDIA/nccl-tests issue #212, 2024-05-06",
           "'NCCL can get an effective NVLink bandwidth of 370GB/s ... when running with "
           "NCCL_ALGO=RING'; compared at 8 GiB", nccl_algo="Ring",
           busbw_points=((8589934592, 370.0),)),
)
