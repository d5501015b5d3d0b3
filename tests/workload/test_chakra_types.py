"""astra's Chakra enums name every value of et_def.proto's, with the same numbers."""

from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.chakra_types import CollectiveType, NodeType


def test_the_enums_are_the_protos():
    assert {t.name: t.value for t in NodeType} == dict(pb.NodeType.items())
    assert {t.name: t.value for t in CollectiveType} == dict(pb.CollectiveCommType.items())
