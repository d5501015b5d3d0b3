"""Collective types as the system layer names them, and their Chakra codes."""

from __future__ import annotations

from enum import Enum


class CommType(Enum):
    """A collective the system layer can run (value = Chakra CollectiveCommType)."""

    ALL_REDUCE = 0
    ALL_GATHER = 2
    ALL_TO_ALL = 6
    REDUCE_SCATTER = 7

    @property
    def label(self) -> str:
        return self.name.lower().replace("_", "-")


# Chakra et_def.proto CollectiveCommType numbers -> names, for messages.
CHAKRA_COLLECTIVE_NAMES = {
    0: "ALL_REDUCE", 1: "REDUCE", 2: "ALL_GATHER", 3: "GATHER", 4: "SCATTER",
    5: "BROADCAST", 6: "ALL_TO_ALL", 7: "REDUCE_SCATTER", 8: "REDUCE_SCATTER_BLOCK",
    9: "BARRIER",
}
