"""Configuration files with upstream ASTRA-sim 2.0's keys and units.

``load_network`` (network.yml), ``load_system`` (system.json), ``load_memory``
(remote-memory JSON) and ``load_comm_groups`` (comm-group JSON) each validate
the whole file and raise one :class:`~astra_core.errors.ConfigError` with one
line per problem, every line starting with the file name.  The config classes
can also be built in Python (``from_dict`` or their constructors), with the
same checks.
"""

from astra_core.config.collective_impl import AlgorithmKind, CollectiveAlgorithm
from astra_core.config.comm_groups import group_members, load_comm_groups, parse_comm_groups
from astra_core.config.memory import MemoryConfig, MemoryType, load_memory
from astra_core.config.network import Dimension, NetworkConfig, TopologyKind, load_network
from astra_core.config.system import (
    CollectiveOptimization,
    SchedulingPolicy,
    SystemConfig,
    load_system,
)

__all__ = [
    "AlgorithmKind",
    "CollectiveAlgorithm",
    "CollectiveOptimization",
    "Dimension",
    "MemoryConfig",
    "MemoryType",
    "NetworkConfig",
    "SchedulingPolicy",
    "SystemConfig",
    "TopologyKind",
    "group_members",
    "load_comm_groups",
    "load_memory",
    "load_network",
    "load_system",
    "parse_comm_groups",
]
