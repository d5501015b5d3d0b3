"""system.json's ``nccl`` section: the machine and settings of the NCCL model.

Read when an ``*-implementation`` list is ``["nccl"]`` (astra's extension;
upstream has no NCCL model). Keys:

=================  ========  ===============================================
key                default   meaning
=================  ========  ===============================================
gpu                required  GPU model: A100, H100, H200, B200 (its compute
                             capability and NVLink generation; see
                             ``astra_core.system.collectives.nccl.hardware``)
gpus-per-node      dim 0     GPUs of one node (one NVSwitch domain); by
                             default network dimension 0
nics-per-node      gpus      NICs (rails) per node, each at the bandwidth of
                             network dimension 1
nvls               1         NVLink SHARP (NCCL_NVLS_ENABLE), where the GPU
                             has it (SM 90 and later)
cpu                intel     host CPU vendor: intel, amd, other (NCCL's
                             network overheads and LL bandwidth caps)
p2p                1         the trace's COMM_SEND / COMM_RECV nodes take
                             NCCL's send/receive cost as well as the network's
collnet            0         the network's switches reduce (InfiniBand SHARP;
                             NCCL_COLLNET_ENABLE): CollNet algorithms
NCCL_ALGO          (all)     as the environment variable: e.g. "Ring",
                             "^NVLS", "allreduce:tree;allgather:ring"
NCCL_PROTO         (all)     likewise: LL, LL128, Simple
=================  ========  ===============================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from astra_core.config.issues import Problems, as_choice, as_flag, as_int, as_str, show
from astra_core.config.limits import MAX_NPUS

CPU_VENDORS = ("intel", "amd", "other")
KEYS = ("gpu", "gpus-per-node", "nics-per-node", "nvls", "cpu", "p2p", "collnet", "NCCL_ALGO", "NCCL_PROTO")


@dataclass(frozen=True)
class NcclConfig:
    """The parsed ``nccl`` section (see the module docstring); None fields take
    their defaults from the network."""

    gpu: str
    gpus_per_node: int | None = None
    nics_per_node: int | None = None
    nvls: bool = True
    cpu: str = "intel"
    p2p: bool = True
    collnet: bool = False
    nccl_algo: str | None = None
    nccl_proto: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"gpu": self.gpu}
        for key, value in (
            ("gpus-per-node", self.gpus_per_node),
            ("nics-per-node", self.nics_per_node),
            ("NCCL_ALGO", self.nccl_algo),
            ("NCCL_PROTO", self.nccl_proto),
        ):
            if value is not None:
                out[key] = value
        if not self.nvls:
            out["nvls"] = 0
        if not self.p2p:
            out["p2p"] = 0
        if self.collnet:
            out["collnet"] = 1
        if self.cpu != "intel":
            out["cpu"] = self.cpu
        return out


def parse_nccl(key: str, raw: Any, problems: Problems) -> NcclConfig | None:
    """Parse the section; note every problem under ``key.<name>``; None if any."""
    from astra_core.errors import ConfigError
    from astra_core.system.collectives.nccl.hardware import GPUS
    from astra_core.system.collectives.nccl.tuning import ALGO_NAMES, FUNC_NAMES, PROTO_NAMES, parse_env_list

    if isinstance(raw, NcclConfig):
        return raw
    if not isinstance(raw, dict):
        problems.add(key, f"expected a mapping of NCCL settings, got {show(raw)}")
        return None
    before = len(problems.items)
    values: dict[str, Any] = {}
    for name, value in raw.items():
        where = f"{key}.{name}"
        if name not in KEYS:
            problems.add(key, f"unknown key {name!r}; known: {', '.join(KEYS)}")
        elif name == "gpu":
            text, err = as_choice(value, list(GPUS))
            values["gpu"] = text
            if err:
                problems.add(where, err)
        elif name in ("gpus-per-node", "nics-per-node"):
            number, err = as_int(value, minimum=1, maximum=MAX_NPUS)
            values[name.replace("-", "_")] = number
            if err:
                problems.add(where, err)
        elif name in ("nvls", "p2p", "collnet"):
            flag, err = as_flag(value)
            values[name] = flag
            if err:
                problems.add(where, err)
        elif name == "cpu":
            text, err = as_choice(value, CPU_VENDORS)
            values["cpu"] = text
            if err:
                problems.add(where, err)
        else:
            text, err = as_str(value)
            if err:
                problems.add(where, err)
                continue
            names = ALGO_NAMES if name == "NCCL_ALGO" else PROTO_NAMES
            try:
                parse_env_list(cast(str, text), FUNC_NAMES, names, name)  # no err: a string
            except ConfigError as exc:
                problems.add(where, str(exc))
            values[name.lower()] = text
    if "gpu" not in raw:
        problems.add(key, f"missing required key 'gpu' (one of {', '.join(GPUS)})")
    if len(problems.items) > before:
        return None
    return NcclConfig(**values)
