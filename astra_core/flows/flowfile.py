"""Flow workloads and their file format (the HPCC artifact's flow files).

A flow file's first line is the number of flows; then one flow per line::

    <src> <dst> <priority group> <dport> <size bytes> <start time s>

``src`` and ``dst`` are NPU (host) ranks: rank ``r`` is the ``r``-th
non-switch node of the topology, which is node ``r`` when hosts are numbered
first, as in the HPCC artifact's topologies. The priority group (3) and
destination port (100) are kept for compatibility and not used. Start times
are seconds (the artifact's ``%.9f``, whole ns). The artifact's generator
can leave stale digits on the first line when its flow estimate was longer
than the real count, so the count is checked against the lines that follow.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from astra_core.errors import ConfigError


@dataclass(frozen=True)
class FlowSpec:
    """One flow: ``size_bytes`` from NPU ``src`` to NPU ``dst`` starting at ``start_ns``."""

    src: int
    dst: int
    size_bytes: int
    start_ns: int
    group: int = 3
    dport: int = 100


def format_flows(flows: list[FlowSpec]) -> str:
    """The flow file text for ``flows`` (in the order given)."""
    lines = [str(len(flows))]
    lines += [f"{f.src} {f.dst} {f.group} {f.dport} {f.size_bytes} {f.start_ns / 1e9:.9f}" for f in flows]
    return "\n".join(lines) + "\n"


def parse_flows(text: str, source: str, npus: int | None = None) -> list[FlowSpec]:
    """Flows from a flow file's text, sorted by start time (stable).

    Raises ConfigError naming ``source`` and the line for a malformed line, a
    flow count that disagrees with the lines, a negative start time, a size
    below 1 byte, a flow from an NPU to itself, or (given ``npus``) an NPU
    outside ``0 .. npus-1``."""
    lines = [(n, line.split()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise ConfigError(f"{source}: empty flow file (the first line is the number of flows)")
    (head_line, head), body = lines[0], lines[1:]
    try:
        count = int(head[0]) if len(head) == 1 and head[0].isascii() else -1
    except ValueError:
        count = -1
    if count < 0:
        raise ConfigError(f"{source}: line {head_line}: expected the number of flows, got {' '.join(head)!r}")
    if count != len(body):
        raise ConfigError(f"{source}: line {head_line} says {count} flows, but {len(body)} follow")
    flows = []
    for number, fields in body:
        if len(fields) != 6:
            raise ConfigError(
                f"{source}: line {number}: expected <src> <dst> <pg> <dport> "
                f"<size bytes> <start s>, got {' '.join(fields)!r}"
            )
        try:
            src, dst, group, dport, size = (int(x) for x in fields[:5])
            start_s = float(fields[5])
        except ValueError:
            raise ConfigError(f"{source}: line {number}: not numbers: {' '.join(fields)!r}") from None
        if not 0 <= start_s < 1e9:
            raise ConfigError(f"{source}: line {number}: start time {fields[5]} s is not in [0, 1e9)")
        if size < 1:
            raise ConfigError(f"{source}: line {number}: flow size {size} bytes must be >= 1")
        if src == dst:
            raise ConfigError(f"{source}: line {number}: flow from NPU {src} to itself")
        for name, rank in (("src", src), ("dst", dst)):
            if rank < 0 or (npus is not None and rank >= npus):
                limit = f"0 .. {npus - 1}" if npus is not None else ">= 0"
                raise ConfigError(f"{source}: line {number}: {name} NPU {rank} is not in {limit}")
        flows.append(FlowSpec(src, dst, size, round(start_s * 1e9), group, dport))
    flows.sort(key=lambda f: f.start_ns)
    return flows


def read_flows(path: str | os.PathLike, npus: int | None = None) -> list[FlowSpec]:
    """:func:`parse_flows` of a file; raises ConfigError if it cannot be read."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the flow file: {exc}") from None
    return parse_flows(text, str(path), npus)
