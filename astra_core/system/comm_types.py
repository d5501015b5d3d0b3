"""Collective types as the system layer names them, and their Chakra codes."""

from __future__ import annotations

from enum import Enum

from astra_core.workload.chakra_types import COLLECTIVE_NAMES, CollectiveType


class CommType(Enum):
    """A collective the system layer can run (value = Chakra CollectiveCommType)."""

    ALL_REDUCE = CollectiveType.ALL_REDUCE.value
    ALL_GATHER = CollectiveType.ALL_GATHER.value
    ALL_TO_ALL = CollectiveType.ALL_TO_ALL.value
    REDUCE_SCATTER = CollectiveType.REDUCE_SCATTER.value
    #: Rooted collectives: only the NCCL model runs them (upstream has no
    #: implementation key for them; without NCCL a broadcast replays its duration).
    BROADCAST = CollectiveType.BROADCAST.value
    REDUCE = CollectiveType.REDUCE.value

    #: Members are singletons: hashed by identity in C (Enum's own hashes the name in
    #: Python, a tenth of rank symmetry's time on sets of collectives).
    __hash__ = object.__hash__

    @property
    def label(self) -> str:
        """``all-reduce``, ``reduce-scatter``, ...: one string per type, shared by every
        phase record that names it (a string per phase was 30 bytes an ET node)."""
        return _LABELS[self]


_LABELS = {t: t.name.lower().replace("_", "-") for t in CommType}


#: The collectives system.json configures (``<label>-implementation``).
CONFIGURABLE = (CommType.ALL_REDUCE, CommType.ALL_GATHER, CommType.REDUCE_SCATTER, CommType.ALL_TO_ALL)
#: Rooted at position 0 of their communicator (Chakra carries no root).
ROOTED = (CommType.BROADCAST, CommType.REDUCE)


#: Chakra CollectiveCommType numbers -> names, for messages.
CHAKRA_COLLECTIVE_NAMES = COLLECTIVE_NAMES
