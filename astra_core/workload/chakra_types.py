"""Chakra's enums, taken from the generated protobuf module (``et_def.proto``).

The one place astra names them: ``NodeType`` (``COMP_NODE`` = 4,
``COMM_COLL_NODE`` = 7, ...) and ``CollectiveType`` (Chakra's
``CollectiveCommType``: ``ALL_REDUCE`` = 0, ``ALL_TO_ALL`` = 6, ...), as
``IntEnum`` so that they compare equal to the integers in a trace.
"""

from __future__ import annotations

from enum import IntEnum

from astra_core.workload import et_def_pb2 as _pb

NodeType = IntEnum("NodeType", dict(_pb.NodeType.items()), module=__name__)
CollectiveType = IntEnum("CollectiveType", dict(_pb.CollectiveCommType.items()), module=__name__)

#: NodeType value -> name, e.g. 7 -> "COMM_COLL_NODE".
NODE_TYPE_NAMES: dict[int, str] = {t.value: t.name for t in NodeType}
#: CollectiveType value -> name, e.g. 6 -> "ALL_TO_ALL".
COLLECTIVE_NAMES: dict[int, str] = {t.value: t.name for t in CollectiveType}
