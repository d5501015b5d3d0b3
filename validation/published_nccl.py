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
    collective: str = "all-reduce"  # sizes as nccl-tests prints them: the whole buffer


ASTRA_SIM_DOCS = (
    "ASTRA-sim documentation, 'Validation on GPU Systems - NCCL over HGX-H100 "
    "Systems' (astra-sim/astra-sim-docs, validation/hardware/gpu-validation-hgx-h100.md), "
    "hardware curve of figures 2gpus.png / 4gpus.png / 8gpus.png"
)
ASTRA_SIM_NOTE = (
    "NCCL_ALGO=Ring. Read off the published figure's hardware line (linear axis): "
    "only sizes >= 64 MiB, where one pixel is under 4 % of the value; smaller sizes "
    "are hidden under the axis"
)

SERIES: tuple[Series, ...] = (
    Series(
        "HGX H100, 2 GPUs, Ring (ASTRA-sim validation)",
        "hgx_h100",
        2,
        ASTRA_SIM_DOCS,
        ASTRA_SIM_NOTE,
        (
            (67108864, 224),
            (134217728, 399),
            (268435456, 777),
            (536870912, 1526),
            (1073741824, 2996),
            (2147483648, 5846),
        ),
        nccl_algo="Ring",
    ),
    Series(
        "HGX H100, 4 GPUs, Ring (ASTRA-sim validation)",
        "hgx_h100",
        4,
        ASTRA_SIM_DOCS,
        ASTRA_SIM_NOTE,
        (
            (67108864, 334),
            (134217728, 601),
            (268435456, 1116),
            (536870912, 2214),
            (1073741824, 4418),
            (2147483648, 8616),
        ),
        nccl_algo="Ring",
    ),
    Series(
        "HGX H100, 8 GPUs, Ring (ASTRA-sim validation)",
        "hgx_h100",
        8,
        ASTRA_SIM_DOCS,
        ASTRA_SIM_NOTE,
        (
            (67108864, 381),
            (134217728, 689),
            (268435456, 1316),
            (536870912, 2596),
            (1073741824, 5081),
            (2147483648, 10027),
        ),
        nccl_algo="Ring",
    ),
    Series(
        "HGX H100, 8 GPUs, NCCL defaults (NVLS), NVIDIA statement",
        "hgx_h100",
        8,
        "S. Jeaugey (NVIDIA), NVIDIA/nccl-tests issue #212, 2024-05-06: 'On 8 GPUs, you "
        "should reach a peak busBw of ~480GB/s (algbw ~275GB/s)' with NVLink SHARP",
        "peak bus bandwidth at large sizes, no table; compared at 8 GiB",
        busbw_points=((8589934592, 480.0),),
    ),
    Series(
        "HGX H100, 8 GPUs, NCCL defaults, single-node run",
        "hgx_h100",
        8,
        "NVIDIA/nccl-tests issue #290 (2025-03): all_reduce_perf -b 128M -e 4G -g 8 on one "
        "8x H100 node; A. Laddy (NVIDIA): '476GB/s looks to be in the expected range for H100'",
        "the run's peak bus bandwidth; compared at 4 GiB, the run's largest size",
        busbw_points=((4294967296, 476.0),),
    ),
    *(
        Series(
            f"HGX H100, 8 GPUs, {coll}, NCCL defaults, NVIDIA statement",
            "hgx_h100",
            8,
            "S. Jeaugey (NVIDIA), NVIDIA/nccl-tests issue #212, 2024-05-06: 'NCCL can get an "
            "effective NVLink bandwidth of 370GB/s, which you can observe as BusBw when running "
            "non-allreduce operations'",
            "compared at 8 GiB (the whole buffer)",
            busbw_points=((8589934592, 370.0),),
            collective=coll,
        )
        for coll in ("all-gather", "reduce-scatter", "all-to-all")
    ),
    Series(
        "HGX H100, 8 GPUs, Ring, NVIDIA statement",
        "hgx_h100",
        8,
        "S. Jeaugey (NVIDIA), NVIDIA/nccl-tests issue #212, 2024-05-06, and "
        "NVIDIA/nccl issue #1442, 2025-01-06 ('The app-level bandwidth is 370GB/s in each direction')",
        "'NCCL can get an effective NVLink bandwidth of 370GB/s ... when running with "
        "NCCL_ALGO=RING'; compared at 8 GiB",
        nccl_algo="Ring",
        busbw_points=((8589934592, 370.0),),
    ),
    *(
        Series(
            f"HGX H100, {n} GPUs, NVLS forced, user report",
            "hgx_h100",
            n,
            "NVIDIA/nccl issue #1455: NCCL_ALGO=NVLS all_reduce_perf -b 2G -e 4G on 8x H100 SXM: "
            "'busbw ... increase from 370 to 420, 440, 460, and 480 GBps when gpus increase from "
            "4 to 5, 6, 7, and 8'",
            "peak bus bandwidth of a 2-4 GiB run; compared at 4 GiB",
            nccl_algo="NVLS",
            busbw_points=((4294967296, bw),),
        )
        for n, bw in ((4, 370.0), (5, 420.0), (6, 440.0), (7, 460.0), (8, 480.0))
    ),
    Series(
        "HGX H100, 4 GPUs, NCCL defaults, blog measurement",
        "hgx_h100",
        4,
        "'Where tensor-parallel inference hits the NVLink wall' (waynehacking8.github.io, "
        "2026-05-31): nccl-tests all_reduce_perf 8 B .. 8 GB on 4x H100 NVSwitch: 'All-reduce "
        "bus bandwidth ~ 366 GB/s'",
        "the sweep's peak bus bandwidth; compared at 8 GiB",
        busbw_points=((8589934592, 366.0),),
    ),
    Series(
        "H100 (2 GPUs), NVLS forced, small sizes with CUDA graphs, user report",
        "hgx_h100",
        2,
        "NVIDIA/nccl issue #1259: NCCL_ALGO=NVLS all_reduce_perf -g 2 -b 128 -e 65536 -G 10 "
        "--iters 100 on 2x H100 80GB HBM3",
        "out-of-place times; CUDA graphs (-G) take most launch overhead out",
        ((128, 5.56), (256, 5.99), (512, 5.97)),
        nccl_algo="NVLS",
    ),
    Series(
        "HGX H20 (Hopper, NVLink4 + NVSwitch), 8 GPUs, NCCL defaults, small sizes",
        "hgx_h100",
        8,
        "deepseek-ai/DeepEP issue #303: all_reduce_perf on one 8x H20 node",
        "an H20 has an H100's NVLink4 and NVSwitch but fewer SMs; at these sizes the time is "
        "NCCL's latency, the same on both. Out-of-place times",
        (
            (8, 12.49),
            (16, 12.52),
            (64, 14.50),
            (128, 15.50),
            (256, 15.70),
            (512, 16.26),
            (1024, 16.38),
            (2048, 16.49),
            (4096, 16.69),
        ),
    ),
    Series(
        "4 x HGX H100 (32 GPUs), 8 x 400G per node, NCCL defaults, user report (VMs)",
        "hgx_h100_4nodes",
        32,
        "NVIDIA/nccl-tests issue #309 (2025-05): all_reduce_perf_mpi -b 8 -e 16g on 4 HGX H100 "
        "VMs, 8 NICs each: '4 nodes on 32 GPU-NIC pairs ... max busbw can get 365.84 GB/s'",
        "the run's peak bus bandwidth (up to 16 GiB); compared at 8 GiB",
        busbw_points=((8589934592, 365.84),),
    ),
    Series(
        "4 x H100 nodes (32 GPUs), 8 x 400G RoCE, NCCL 2.19.3, user report",
        "hgx_h100_4nodes",
        32,
        "NVIDIA/nccl issue #1221: -b 4G -e 8G on 8x H100 nodes with 8x 400G RoCE: '>2 nodes ... "
        "same busbw 320GB'",
        "RoCE rather than the preset's InfiniBand; compared at 8 GiB",
        busbw_points=((8589934592, 320.0),),
    ),
    Series(
        "DGX A100, 8 GPUs, NCCL defaults, user report",
        "dgx_a100",
        8,
        "NVIDIA/nccl-tests issue #175: single node, all_reduce_perf -b 8 -e 4G -f 2 -g 8 on 8x A100: "
        "'result: 232.54GB/s'",
        "the run's peak bus bandwidth; compared at 4 GiB, its largest size",
        busbw_points=((4294967296, 232.54),),
    ),
    Series(
        "8 x A100 SXM4, NCCL defaults, NVIDIA statement",
        "dgx_a100",
        8,
        "S. Jeaugey (NVIDIA), NVIDIA/nccl-tests issue #149, 2023-07-05: '~20GB/s effective "
        "bandwidth ... should therefore be 240GB/s on A100, but some other bottlenecks on the "
        "GPUs limits it to ~230GB/s ... with 8G'",
        "compared at 8 GiB",
        busbw_points=((8589934592, 230.0),),
    ),
)
