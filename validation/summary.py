"""What the validation scripts share: the error summary, the report output, and the GPU
servers and NCCL system their runs simulate."""

from __future__ import annotations

import math
from pathlib import Path

import astra
from astra_core.config.network import NetworkConfig
from astra_core.config.system import SystemConfig
from astra_core.config.system import nccl_system as nccl_system_dict
from astra_core.results import RunResult
from astra_core.workload.generators.llm import LLMConfig, generate_llm
from astra_core.workload.generators.llm_traces import llm_traces

GIB = 1 << 30


def geomean_abs(errors: list[float]) -> float:
    """Geometric mean of the absolute relative errors |predicted / published - 1|
    (each at least 0.01 %, so that an exact point does not zero the mean)."""
    return math.exp(sum(math.log(max(abs(e), 1e-4)) for e in errors) / len(errors))


def parse_rows(text: str, rows: tuple):
    """The rows ``--rows`` names (``1-4``, ``1,3,5``; 1-based) of ``rows``, in order."""
    chosen: set[int] = set()
    for part in text.split(","):
        a, _, b = part.partition("-")
        chosen.update(range(int(a), int(b or a) + 1))
    return [rows[i - 1] for i in sorted(chosen) if 1 <= i <= len(rows)]


def emit(text: str, markdown: str | None) -> int:
    """Print a report and, with ``markdown``, write it there too; exit status 0."""
    print(text)
    if markdown:
        Path(markdown).write_text(text + "\n")
    return 0


def gpu_servers(nodes: int, nvlink_gbps: float, nic_gbps: float, per_node: int = 8) -> NetworkConfig:
    """Servers (NVLink domains) of ``per_node`` GPUs: dimension 0 their NVSwitch
    (``nvlink_gbps`` GB/s per GPU and direction), dimension 1 one NIC of ``nic_gbps``
    GB/s per GPU across ``nodes`` domains (network.yml counts GB as 2^30 bytes);
    latencies 300 and 1350 ns per link, half of NCCL's smallest per-step latency (LL)
    on NVLink (0.6 us) and the network (2.7 us), as examples/validation/dgx_a100 and
    hgx_h100_4nodes. One domain: dimension 0 only."""
    dims = [("Switch", per_node, nvlink_gbps, 300)]
    if nodes > 1:
        dims.append(("Switch", nodes, nic_gbps, 1350))
    return NetworkConfig.from_dict(
        {
            "topology": [d[0] for d in dims],
            "npus_count": [d[1] for d in dims],
            "bandwidth": [d[2] * 1e9 / GIB for d in dims],
            "latency": [d[3] for d in dims],
        }
    )


def nccl_system(gpu: str, release: str | None = None) -> SystemConfig:
    """Every collective on the NCCL model of ``gpu`` (system.json's ``nccl.gpu``), LIFO;
    ``release``: NCCL's (``nccl.version``; None: the newest modelled)."""
    system = nccl_system_dict(gpu)
    if release is not None:
        system["nccl"]["version"] = release
    return SystemConfig.from_dict(system)


def simulate_plan(plan: LLMConfig, system: SystemConfig, network: NetworkConfig) -> RunResult:
    """Generate ``plan``'s step and simulate it from memory: the rank traces are what
    ``astra gen llm`` would write node for node (:func:`llm_traces`), without the files."""
    traces, groups = llm_traces(generate_llm(plan))
    return astra.simulate(traces, system, network, comm_groups=groups or None)
