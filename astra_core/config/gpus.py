"""GPU and NIC facts the NCCL model needs, with their sources.

NCCL does not see line rates: its topology search works with the bandwidth
it measured a single NVLink to sustain under its own protocols (``topo.h``:
``SM80_NVLINK_BW`` 20.0, ``SM90_NVLINK_BW`` 20.6, ``SM100_NVLINK_BW`` 40.1
GB/s per link and direction) and with a NIC's port speed (``topo.cc``:
``net.bw = speed_Mbps / 8000`` GB/s). astra takes the line rates from
network.yml, so a user who changes the fabric changes what NCCL finds; the
ratio between NCCL's per-link figure and the link's line rate (the share of
the wire NCCL's copy loops and flags leave for data) is a property of the GPU
generation and comes from here.

Units: GB/s with 1 GB = 1e9 bytes (NCCL's and the vendors' unit).
"""

from __future__ import annotations

from dataclasses import dataclass

from astra_core.errors import ConfigError


@dataclass(frozen=True)
class GpuModel:
    """One GPU model as NCCL sees it.

    ``compcap``: compute capability x10 (NCCL's ``compCap``); ``nvlinks``:
    NVLink links per GPU; ``nvlink_line_gbps``: one link's line rate per
    direction; ``nccl_nvlink_gbps``: what NCCL's topology assumes one link
    sustains (``SM*_NVLINK_BW``); ``nvls``: the NVSwitch generation of its
    HGX/DGX baseboard reduces and multicasts (NVLink SHARP), which NCCL uses
    from SM 90 on (``NCCL_NVLS_ENABLE``); ``source``: where the numbers are
    from.
    """

    name: str
    compcap: int
    nvlinks: int
    nvlink_line_gbps: float
    nccl_nvlink_gbps: float
    nvls: bool
    source: str

    @property
    def nvlink_efficiency(self) -> float:
        """NCCL's sustained share of the NVLink line rate (e.g. 20.6 / 25 on H100)."""
        return self.nccl_nvlink_gbps / self.nvlink_line_gbps

    @property
    def nvlink_gbps(self) -> float:
        """Line rate of all NVLinks of one GPU, one direction (H100: 450 GB/s)."""
        return self.nvlinks * self.nvlink_line_gbps


#: NVLink 3 and 4 run 25 GB/s per link and direction (50 GB/s bidirectional);
#: NVLink 5 runs 50 GB/s per link and direction (NVIDIA NVLink page: A100 600
#: GB/s total over 12 links, H100 900 GB/s over 18, B200 1.8 TB/s over 18).
GPUS: dict[str, GpuModel] = {
    model.name: model
    for model in (
        GpuModel(
            "A100",
            80,
            12,
            25.0,
            20.0,
            False,
            "NVIDIA A100 datasheet (NVLink 3: 12 links, 600 GB/s); NCCL topo.h SM80_NVLINK_BW",
        ),
        GpuModel(
            "H100",
            90,
            18,
            25.0,
            20.6,
            True,
            "NVIDIA H100 datasheet (NVLink 4: 18 links, 900 GB/s); NCCL topo.h SM90_NVLINK_BW",
        ),
        GpuModel(
            "H200",
            90,
            18,
            25.0,
            20.6,
            True,
            "NVIDIA H200 datasheet (NVLink 4: 18 links, 900 GB/s); NCCL topo.h SM90_NVLINK_BW",
        ),
        GpuModel(
            "B200",
            100,
            18,
            50.0,
            40.1,
            True,
            "NVIDIA B200 / HGX B200 datasheet (NVLink 5: 18 links, 1.8 TB/s); NCCL topo.h SM100_NVLINK_BW",
        ),
        GpuModel(
            "GB200",
            100,
            18,
            50.0,
            40.1,
            True,
            "NVIDIA GB200 NVL72 specification (NVLink 5: 1.8 TB/s per GPU, 72 GPUs on NVLink "
            "switch trays); NCCL topo.h SM100_NVLINK_BW",
        ),
        GpuModel(
            "GB300",
            103,
            18,
            50.0,
            40.1,
            True,
            "NVIDIA GB300 NVL72 specification (NVLink 5: 1.8 TB/s per GPU, 72 GPUs on NVLink "
            "switch trays); NCCL topo.h SM100_NVLINK_BW",
        ),
    )
}


def gpu_model(name: str, source: str = "system.json") -> GpuModel:
    """The :class:`GpuModel` called ``name`` (case-insensitive); ConfigError naming
    ``source`` and the known names otherwise."""
    for key, model in GPUS.items():
        if key.lower() == str(name).lower():
            return model
    raise ConfigError(f"{source}: nccl.gpu: unknown GPU {name!r}; known: {', '.join(GPUS)}")


def nic_gbps(port_gbit: float) -> float:
    """NCCL's bandwidth of a NIC port of ``port_gbit`` Gb/s, in GB/s (``speed / 8000``
    with the speed in Mb/s, topo.cc): 400 Gb/s NDR -> 50 GB/s."""
    return port_gbit / 8.0
