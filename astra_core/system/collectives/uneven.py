"""An all-to-all whose ranks send and receive different bytes to and from each member.

NCCL runs an all-to-all as grouped sends and receives, one pair per member, of
any sizes (``ncclGroupStart`` / ``ncclSend`` / ``ncclRecv``, as PyTorch's
``all_to_all_single`` with split sizes does): a mixture-of-experts layer whose
router sends more tokens to some experts than to others is one. In a Chakra trace
it is an ``ALL_TO_ALL`` collective node with two int64-list attributes, one entry
per member of its communicator in ascending rank order:

* ``send_bytes``: the bytes this rank sends to each member (its own entry stays on
  the GPU); ``comm_size`` is their sum;
* ``recv_bytes``: the bytes it receives from each member.

The NCCL model runs it (system.json ``all-to-all-implementation: ["nccl"]``):
each rank's messages are its own sizes, and its time is NCCL's point-to-point
latency plus the larger of what it sends and receives inside its node and across
nodes (:meth:`~astra_core.system.collectives.nccl.model.NcclModel.choose`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from astra_core.errors import TraceError

__all__ = ["RECV_BYTES", "SEND_BYTES", "Uneven", "UnevenBook", "uneven_of"]

#: The node attributes (int64 lists, one entry per member in ascending rank order).
SEND_BYTES = "send_bytes"
RECV_BYTES = "recv_bytes"


@dataclass(frozen=True)
class Uneven:
    """Rank ``rank``'s bytes to (``send_bytes``) and from (``recv_bytes``) each member
    of an all-to-all, in ascending rank order of the members; ``where``: the trace file,
    rank and node it came from, for messages (not part of its identity)."""

    rank: int
    send_bytes: tuple[int, ...]
    recv_bytes: tuple[int, ...]
    where: str = field(default="", compare=False)

    def bytes_by_scope(self, members: tuple[int, ...], per_node: int) -> tuple[int, int]:
        """(bytes inside the rank's node, bytes across nodes), each the larger of what it
        sends and what it receives; ``members`` ascending, ``per_node`` consecutive
        members to a node."""
        node = members.index(self.rank) // per_node
        sent, received = [0, 0], [0, 0]
        for index, member in enumerate(members):
            if member != self.rank:
                across = int(index // per_node != node)
                sent[across] += self.send_bytes[index]
                received[across] += self.recv_bytes[index]
        return max(sent[0], received[0]), max(sent[1], received[1])


def uneven_of(node: Any, rank: int, members: tuple[int, ...] | None, where: str) -> Uneven | None:
    """Rank ``rank``'s :class:`Uneven` from ET node ``node``'s attributes, or None
    when it has neither. ``members``: the communicator (None when the collective
    runs on no single communicator). Raises TraceError, naming ``where`` (the
    trace file), the node and the rank, for one attribute without the other, a
    collective other than an all-to-all, entries that are not one non-negative
    integer per member, or a ``comm_size`` other than the bytes sent."""
    attrs = node.attrs
    if not attrs or (SEND_BYTES not in attrs and RECV_BYTES not in attrs):
        return None
    at = f"{where}: rank {rank}: node {node.id} ({node.name})"
    if SEND_BYTES not in attrs or RECV_BYTES not in attrs:
        raise TraceError(f"{at}: {SEND_BYTES} and {RECV_BYTES} go together (an uneven all-to-all)")
    if members is None:
        raise TraceError(
            f"{at}: {SEND_BYTES} / {RECV_BYTES} need an all-to-all on one NCCL communicator "
            '(all-to-all-implementation ["nccl"])'
        )
    lists = []
    for key in (SEND_BYTES, RECV_BYTES):
        values = attrs[key]
        if (
            not isinstance(values, list)
            or len(values) != len(members)
            or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in values)
        ):
            raise TraceError(
                f"{at}: {key}: expected {len(members)} byte counts >= 0 (one per member of "
                f"its communicator, in rank order), got {_shown(values)}"
            )
        lists.append(tuple(values))
    if sum(lists[0]) != node.comm_size:
        raise TraceError(f"{at}: comm_size {node.comm_size} is not the sum of {SEND_BYTES} ({sum(lists[0])})")
    return Uneven(rank, lists[0], lists[1], at)


class UnevenBook:
    """The uneven all-to-alls of a run that not every member has issued yet, so that
    what a rank sends a member is checked against what that member expects from it."""

    def __init__(self) -> None:
        self._open: dict[tuple, dict[int, Uneven]] = {}

    def check(self, members: tuple[int, ...], collective: int, uneven: Uneven) -> None:
        """Record rank ``uneven.rank``'s part of collective number ``collective`` on
        ``members`` (ascending). Raises TraceError, naming ``uneven.where`` (the rank's
        file and node), when its bytes to or from a member that issued it before disagree
        with that member's."""
        where = uneven.where
        issued = self._open.setdefault((members, collective), {})
        me = members.index(uneven.rank)
        for other, theirs in issued.items():
            q = members.index(other)
            if uneven.send_bytes[q] != theirs.recv_bytes[me]:
                raise TraceError(
                    f"{where}: {SEND_BYTES}[{q}] sends rank {other} {uneven.send_bytes[q]} bytes, "
                    f"which expects {theirs.recv_bytes[me]} from it ({RECV_BYTES}[{me}] of its node)"
                )
            if uneven.recv_bytes[q] != theirs.send_bytes[me]:
                raise TraceError(
                    f"{where}: {RECV_BYTES}[{q}] expects {uneven.recv_bytes[q]} bytes from rank "
                    f"{other}, which sends {theirs.send_bytes[me]} ({SEND_BYTES}[{me}] of its node)"
                )
        issued[uneven.rank] = uneven
        if len(issued) == len(members):
            del self._open[(members, collective)]


def _shown(values: Any) -> str:
    text = repr(values)
    return text if len(text) <= 60 else text[:57] + "..."
