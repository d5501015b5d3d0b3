"""Collective types as the system layer names them, and their Chakra codes."""

from __future__ import annotations

from enum import Enum


class CommType(Enum):
    """A collective the system layer can run (value = Chakra CollectiveCommType)."""

    ALL_REDUCE = 0
    ALL_GATHER = 2
    ALL_TO_ALL = 6
    REDUCE_SCATTER = 7
    #: Rooted collectives: only the NCCL model runs them (upstream has no
    #: implementation key for them; without NCCL a broadcast replays its duration).
    BROADCAST = 5
    REDUCE = 1

    @property
    def label(self) -> str:
        return self.name.lower().replace("_", "-")


#: The collectives system.json configures (``<label>-implementation``).
CONFIGURABLE = (CommType.ALL_REDUCE, CommType.ALL_GATHER, CommType.REDUCE_SCATTER,
                CommType.ALL_TO_ALL)
#: Rooted at position 0 of their communicator (Chakra carries no root).
ROOTED = (CommType.BROADCAST, CommType.REDUCE)


# Chakra et_def.proto CollectiveCommType numbers -> names, for messages.
CHAKRA_COLLECTIVE_NAMES = {
    0: "ALL_REDUCE", 1: "REDUCE", 2: "ALL_GATHER", 3: "GATHER", 4: "SCATTER",
    5: "BROADCAST", 6: "ALL_TO_ALL", 7: "REDUCE_SCATTER", 8: "REDUCE_SCATTER_BLOCK",
    9: "BARRIER",
}
