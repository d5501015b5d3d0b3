"""The least time a generated step's collective can take on the NCCL model: what
:func:`~astra_core.plan.point.compute_bound_ns` counts for a collective that blocks a
stage's compute chain.

A rank's part of an NCCL collective does not end before NCCL's predicted time for it
has passed since it started (:mod:`astra_core.system.collectives.nccl.phase`: the
kernel registers that floor when the phase starts), and it starts no earlier than the
node it follows ends. So a collective the compute chain waits on adds at least its
floor to the chain. This holds where the system runs the collective's type on the
``nccl`` implementation alone and unsplit (``preferred-dataset-splits`` 1: a split
collective's chunks each have the floor of their own size); elsewhere the floor is 0.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from astra_core.config.collective_impl import NCCL
from astra_core.config.network import NetworkConfig, load_network
from astra_core.config.system import SystemConfig, load_system
from astra_core.errors import ConfigError
from astra_core.system.collectives.nccl.model import NcclModel
from astra_core.system.collectives.uneven import Uneven
from astra_core.system.comm_types import CONFIGURABLE, CommType
from astra_core.workload.generators.layout import Layout

__all__ = ["CollectiveFloors"]


def _loaded(value: Any, kind, load) -> Any:
    if isinstance(value, Mapping):
        return kind.from_dict(dict(value))
    if isinstance(value, (str, os.PathLike)):
        return load(value)
    return value if isinstance(value, kind) else None


class CollectiveFloors:
    """NCCL's floor [ns] of each blocking collective of one layout's stages (module
    docstring). ``system`` and ``network``: as ``astra.simulate`` takes them (a path, a
    config object or a dict; anything else, or a system without unsplit ``nccl``
    collectives, gives floors of 0); ``cfg``: the layout's
    :class:`~astra_core.workload.generators.llm.LLMConfig`."""

    def __init__(self, system: Any, network: Any, cfg: Any):
        sys_cfg = _loaded(system, SystemConfig, load_system)
        net = _loaded(network, NetworkConfig, load_network)
        self.model: NcclModel | None = None
        self.types: frozenset[CommType] = frozenset()
        if sys_cfg is None or net is None or sys_cfg.preferred_dataset_splits != 1 or sys_cfg.nccl is None:
            return
        self.types = frozenset(
            t for t in CONFIGURABLE if tuple(map(str, sys_cfg.algorithms(t.label))) == (NCCL,)
        )
        if self.types:
            self.model = NcclModel(sys_cfg.nccl, net, sys_cfg.source)
        dims = list(cfg.dims) if cfg.dims else None
        self.layout = Layout(cfg.dp, cfg.tp, cfg.pp, cfg.ep, dims, cfg.cp, cfg.etp)
        self._memo: dict[tuple, int] = {}

    def floor_ns(self, node: Any, stage: int) -> int:
        """The least time [ns] of collective ``node`` (a
        :class:`~astra_core.workload.generators.llm_stage.StageNode`) on any rank of
        pipeline stage ``stage``: NCCL's time over the rank's group, the least over
        expert-parallel indices where an all-to-all's bytes differ by index; 0 where
        the system does not run it on NCCL alone."""
        comm_type = CommType(node.comm_type)
        if self.model is None or comm_type not in self.types:
            return 0
        key = (comm_type, node.role, node.size, node.by_ep, stage)
        found = self._memo.get(key)
        if found is None:
            members = self.layout.members(node.role, self.layout.rank(0, 0, stage))
            if node.by_ep is None:
                found = self._time_ns(comm_type, members, node.size, None)
            else:  # member q of the ascending group has expert-parallel index q
                ranks = sorted(members)
                found = min(
                    self._time_ns(comm_type, members, sum(send), Uneven(ranks[q], tuple(send), tuple(recv)))
                    for q, (send, recv) in enumerate(node.by_ep)
                )
            self._memo[key] = found
        return found

    def _time_ns(
        self, comm_type: CommType, members: tuple[int, ...], size: int, uneven: Uneven | None
    ) -> int:
        assert self.model is not None
        try:
            time_us = self.model.choose(comm_type, members, size, uneven)[3]
        except ConfigError:  # a group NCCL cannot place: the run will say so
            return 0
        return int(round(time_us * 1000))
