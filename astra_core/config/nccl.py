"""system.json's ``nccl`` section: the machine and settings of the NCCL model.

Read when an ``*-implementation`` list is ``["nccl"]`` (astra's extension;
upstream has no NCCL model). Keys:

=================  ========  ===============================================
key                default   meaning
=================  ========  ===============================================
gpu                required  GPU model: A100, H100, H200, B200, GB200,
                             GB300 (its compute capability and NVLink
                             generation; see ``astra_core.config.gpus``)
gpus-per-node      dim 0     GPUs of one node (one NVSwitch domain): network
                             dimension 0, which it must equal when the
                             network has a dimension 1 (the rails). A
                             multi-node NVLink domain (GB200 NVL72) is one
                             node: NCCL fuses its trays' topologies into
                             one (MNNVL, ``graph/topo.cc``)
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
profile            (none)    a calibrated profile (``astra calibrate nccl``;
                             :mod:`astra_core.config.nccl_profile`): path
                             looked up from the working directory, then from
                             the system.json's folder
version            2.30.7    the NCCL release whose cost model chooses the
                             algorithm and protocol and prices them:
                             "2.24.3" or "2.24" (:data:`NCCL_RELEASES`; see
                             :func:`nccl_release`)
=================  ========  ===============================================

A section that no ``*-implementation`` list names is a warning (it changes
nothing); facts that contradict the network (``gpus-per-node``, a dimension
0 faster than ``gpu``'s NVLinks, a dimension beyond the rails) are checked
when the run builds the model
(:class:`~astra_core.system.collectives.nccl.model.NcclModel`).

Problems are reported as ``system.json: nccl.<key>: ...`` lines (unknown
keys as ``nccl: unknown key ...``); NCCL_ALGO and NCCL_PROTO are parsed as
NCCL parses the environment variables, so a misspelt algorithm or protocol
fails when the file is read, not when the first collective runs.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import ConfigDict, Field

from astra_core.config.gpus import NCCL_GPU_NAMES
from astra_core.config.issues import as_choice, as_int, as_str
from astra_core.config.limits import MAX_NPUS
from astra_core.config.model import ConfigModel, Flag, checked
from astra_core.config.nccl_env import ALGO_NAMES, FUNC_NAMES, PROTO_NAMES, parse_env_list
from astra_core.errors import ConfigError

CPU_VENDORS = ("intel", "amd", "other")

#: The NCCL releases whose cost model astra transcribes, oldest first
#: (``astra_core.system.collectives.nccl.tuning.NCCL_VERSIONS`` holds their
#: constants). The last, the default, is NCCL commit 5067397c (master after
#: v2.30.7-1, June 2026), whose ``src/graph/tuning.cc`` is v2.30.7-1's.
NCCL_RELEASES = (
    "2.19.3",
    "2.20.5",
    "2.21.5",
    "2.22.3",
    "2.23.4",
    "2.24.3",
    "2.25.1",
    "2.26.2",
    "2.27.3",
    "2.28.3",
    "2.28.7",
    "2.28.9",
    "2.29.2",
    "2.29.7",
    "2.30.7",
)
_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:-\d+)?")


def _parts(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


def nccl_release(value: Any) -> tuple[str | None, str | None]:
    """The modelled release (one of :data:`NCCL_RELEASES`) an NCCL version names:
    ``"2.24.3"``, ``"2.24"`` (the newest modelled 2.24 release) or NCCL's tag
    ``"v2.24.3-1"``. A patch release not in the list takes the modelled release
    of its minor at or before it (``2.28.8`` is ``2.28.7``; tuning.cc changes
    with patch releases, never back), or its minor's first when it is older
    than all of them (``2.19.1`` is ``2.19.3``). Else ``(None, error)``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (
            None,
            f'expected a string such as "2.24" or "2.24.3", got the number {value!r}: write it in quotes',
        )
    text, error = as_str(value)
    if text is None:
        return None, error
    match = _VERSION.fullmatch(text.strip())
    same_minor = []
    if match:
        major, minor, patch = match.groups()
        same_minor = [r for r in NCCL_RELEASES if _parts(r)[:2] == (int(major), int(minor))]
    if not same_minor:
        return None, f"unknown or unmodelled NCCL version {text!r}; modelled: {', '.join(NCCL_RELEASES)}"
    if patch is None:
        return same_minor[-1], None
    earlier = [r for r in same_minor if _parts(r)[2] <= int(patch)]
    return (earlier[-1] if earlier else same_minor[0]), None


def as_gpu(value: Any) -> tuple[str | None, str | None]:
    """A GPU the NCCL model knows (``astra_core.config.gpus.NCCL_GPU_NAMES``)."""
    return as_choice(value, list(NCCL_GPU_NAMES))


def _as_env(variable: str) -> Any:
    """The check of ``NCCL_ALGO`` / ``NCCL_PROTO``: a string NCCL would accept."""

    def check(value: Any) -> tuple[str | None, str | None]:
        text, error = as_str(value)
        if text is None:
            return None, error
        try:
            parse_env_list(text, FUNC_NAMES, ALGO_NAMES if variable == "NCCL_ALGO" else PROTO_NAMES, variable)
        except ConfigError as exc:
            return None, str(exc)
        return text, None

    return checked(check)


def _as_version(value: Any) -> tuple[str | None, str | None]:
    """An NCCL version :func:`nccl_release` knows, kept as written."""
    release, error = nccl_release(value)
    return (value if release is not None else None), error


def _as_count(value: Any) -> tuple[int | None, str | None]:
    return as_int(value, minimum=1, maximum=MAX_NPUS)


class NcclConfig(ConfigModel):
    """The ``nccl`` section of system.json (see the module docstring); None
    fields take their defaults from the network. Built by
    :class:`~astra_core.config.system.SystemConfig` from the section's keys
    (``gpus-per-node``, ``NCCL_ALGO``, ...); from Python,
    ``NcclConfig.model_validate({"gpu": "H100", "gpus-per-node": 8})``.
    Invalid values are pydantic errors, reported by the loaders as one
    ``nccl.<key>: ...`` line each."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)  # STRICT, frozen

    gpu: Annotated[str, checked(as_gpu)]
    gpus_per_node: Annotated[int | None, checked(_as_count)] = Field(None, alias="gpus-per-node")
    nics_per_node: Annotated[int | None, checked(_as_count)] = Field(None, alias="nics-per-node")
    nvls: Flag = True
    cpu: Annotated[str, checked(lambda value: as_choice(value, CPU_VENDORS))] = "intel"
    p2p: Flag = True
    collnet: Flag = False
    nccl_algo: Annotated[str | None, _as_env("NCCL_ALGO")] = Field(None, alias="NCCL_ALGO")
    nccl_proto: Annotated[str | None, _as_env("NCCL_PROTO")] = Field(None, alias="NCCL_PROTO")
    profile: Annotated[str | None, checked(as_str)] = None
    version: Annotated[str | None, checked(_as_version)] = None

    def to_dict(self) -> dict[str, Any]:
        """The section as system.json writes it: ``gpu`` plus every non-default
        value, switches as 0/1."""
        values = self.model_dump(by_alias=True, exclude_defaults=True)
        return {key: int(value) if isinstance(value, bool) else value for key, value in values.items()}
