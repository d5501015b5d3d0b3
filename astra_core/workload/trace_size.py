"""How large a trace set ``astra gen`` / ``astra convert`` writes, and the refusal past that.

Every generator and converter counts what it is asked for before it builds it,
so that a typing mistake (``--dp 100000``, ``--microbatches 1000000000``,
``--npus 100000000``) is refused in well under a second with its estimate
instead of filling the disk or memory:

* the ranks against :data:`~astra_core.config.limits.MAX_NPUS` (2^20), with
  :func:`~astra_core.config.limits.npus_limit_message`, the very limit and
  words ``astra run`` refuses the same network with (:func:`check_npus`);
* the nodes of one rank's trace against :data:`MAX_RANK_NODES`
  (:func:`check_rank_nodes`): a lower bound from the inputs at once, the exact
  count while the nodes are built;
* the bytes of the whole set against :data:`MAX_TRACE_BYTES` and against the
  free space of the destination (:func:`check_trace_set`), before the first
  file is written.

Why these numbers (measured on this code, 2026-11): a 200,000-node trace
takes 2.4 KB per node in ``astra run`` (475 MB resident) and ~2.1 KB per node
while ``gen micro`` builds it; on disk a node is 70-80 bytes (llama3-405b
on 288 ranks: 2,300 nodes, 179 KB per rank). :data:`MAX_RANK_NODES` = 2^22
nodes is then about 10 GB to simulate one rank, past what a run can hold next
to its other ranks; :data:`MAX_TRACE_BYTES` = 2^34 bytes (16 GiB) is some
200 million nodes on disk, a hundred times the largest example traces.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from astra_core.config.limits import MAX_NPUS, npus_limit_message
from astra_core.errors import ConfigError

__all__ = [
    "MAX_RANK_NODES",
    "MAX_TRACE_BYTES",
    "TraceSetSize",
    "check_npus",
    "check_rank_nodes",
    "check_trace_set",
]

#: Most nodes in one rank's trace (and in all pipeline stages a generator holds at once).
MAX_RANK_NODES = 1 << 22
#: Most bytes of one trace set (every rank's file together), 16 GiB.
MAX_TRACE_BYTES = 1 << 34


def _bytes_text(nbytes: float) -> str:
    """``179 KB``, ``2.4 GB``, ``1.3 TB`` (SI units, as ``du -h --si``)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.1f} {unit}"
    return f"{int(nbytes)} bytes"


def check_npus(source: str, npus: int) -> None:
    """Raise ConfigError ``<source>: <npus_limit_message>`` when ``npus`` ranks are more
    than :data:`~astra_core.config.limits.MAX_NPUS`: the limit and message of
    ``astra run``'s ``npus_count``. ``source`` names the inputs (``--npus``,
    ``dp 100000 x tp 8 x pp 18 x cp 1``)."""
    if npus > MAX_NPUS:
        raise ConfigError(f"{source}: {npus_limit_message(npus)}")


def check_rank_nodes(source: str, nodes: int, why: str = "", per: str = "per rank") -> None:
    """Raise ConfigError when one rank's trace would hold ``nodes`` (a count or a lower
    bound) nodes, more than :data:`MAX_RANK_NODES`. ``why`` says where the count
    comes from (``500,000,000 micro-batches x 126 layers``); ``per`` what holds them."""
    if nodes > MAX_RANK_NODES:
        raise ConfigError(
            f"{source}: at least {nodes:,} nodes {per}{f' ({why})' if why else ''}, more than "
            f"astra's limit of {MAX_RANK_NODES:,} (2^22, about 10 GB to simulate one rank)"
        )


@dataclass(frozen=True)
class TraceSetSize:
    """What a trace set will hold: ``files`` rank traces, ``nodes`` nodes in all of
    them, ``rank_nodes`` in the largest one, ``nbytes`` bytes on disk (estimated)."""

    files: int
    nodes: int
    rank_nodes: int
    nbytes: int

    def text(self) -> str:
        """``288 trace files, 662,400 nodes, about 51.5 MB``."""
        return f"{self.files:,} trace files, {self.nodes:,} nodes, about {_bytes_text(self.nbytes)}"


def _free_bytes(folder: Path) -> int | None:
    """Free bytes for this user on the file system ``folder`` (or its nearest
    existing ancestor) is on; None when it cannot be told."""
    folder = folder.absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def check_trace_set(source: str, size: TraceSetSize, prefix: str | os.PathLike) -> None:
    """Raise ConfigError (one line: ``source``, the estimate and the limit) when a trace set
    of ``size`` passes :data:`MAX_RANK_NODES` nodes per rank, :data:`MAX_TRACE_BYTES`
    bytes, or the free space of the folder of ``prefix`` (rank r writes
    ``<prefix>.<r>.et``)."""
    check_rank_nodes(source, size.rank_nodes)
    if size.nbytes > MAX_TRACE_BYTES:
        raise ConfigError(
            f"{source}: {size.text()}, more than astra's limit of {_bytes_text(MAX_TRACE_BYTES)} "
            "(2^34 bytes) for one trace set"
        )
    folder = Path(f"{os.fspath(prefix)}.0.et").parent
    free = _free_bytes(folder)
    if free is not None and size.nbytes > free:
        raise ConfigError(
            f"{source}: {size.text()}, more than the {_bytes_text(free)} free in {folder.absolute()}"
        )
