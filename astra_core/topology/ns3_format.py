"""Upstream ASTRA-sim's ns-3 physical topology file (astra-network-ns3 ``SetupNetwork``).

::

    <nodes> <switches> <links>
    <switch id> <switch id> ...
    <src> <dst> <rate> <delay> <error rate>      one line per link
    ...

e.g. ``9 1 8`` / ``8`` / ``8 0 400Gbps 0.0005ms 0``. Every link line is a
cable: ns-3 installs one point-to-point device at each end, so it becomes two
directed links of the same rate and delay. NPU rank ``r`` is the ``r``-th
non-switch node in ascending id.

Units are ns-3's own (``DataRate`` and ``Time`` parsing):

* rate: bits/s ``bps b/s kbps Kbps kb/s Kb/s Mbps Mb/s Gbps Gb/s``, bytes/s
  ``Bps B/s kBps KBps kB/s KB/s MBps MB/s GBps GB/s``, binary
  ``Kib/s KiB/s Mib/s MiB/s Gib/s GiB/s`` (1 Gbps = 10^9 bit/s = 0.125 bytes/ns);
* delay: ``s ms us ns ps``.

Two deliberate departures from ns-3, which reads the file as a stream of
whitespace-separated words: a bare number without a unit is an error here (ns-3
would read ``100`` as 100 bit/s and ``1000`` as 1000 s, never what was meant),
and each link must sit on one line, so that a missing field is reported on its
own line instead of shifting every later field. Blank lines are skipped; line 2
may be blank when there are no switches, as in upstream's ring examples. The
error rate must be a number in [0, 1]; the physical model has no packet loss,
so it is checked and then ignored.

Every problem is a :class:`~astra_core.errors.ConfigError` of one line naming
the file and line: ``topo.txt: line 5: unknown node id 12 (nodes are 0..9)``.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator
from decimal import Decimal, DecimalException

from astra_core.config.files import read_bounded_text
from astra_core.errors import ConfigError
from astra_core.topology.physical import PhysicalTopology
from astra_core.topology.size import check_topology_size

#: bits per second of one unit (ns-3 ``DataRate::DoParse``).
RATE_UNITS: dict[str, int] = {
    "bps": 1,
    "b/s": 1,
    "Bps": 8,
    "B/s": 8,
    "kbps": 10**3,
    "kb/s": 10**3,
    "Kbps": 10**3,
    "Kb/s": 10**3,
    "kBps": 8 * 10**3,
    "kB/s": 8 * 10**3,
    "KBps": 8 * 10**3,
    "KB/s": 8 * 10**3,
    "Kib/s": 2**10,
    "KiB/s": 8 * 2**10,
    "Mbps": 10**6,
    "Mb/s": 10**6,
    "MBps": 8 * 10**6,
    "MB/s": 8 * 10**6,
    "Mib/s": 2**20,
    "MiB/s": 8 * 2**20,
    "Gbps": 10**9,
    "Gb/s": 10**9,
    "GBps": 8 * 10**9,
    "GB/s": 8 * 10**9,
    "Gib/s": 2**30,
    "GiB/s": 8 * 2**30,
}
#: picoseconds of one unit (ns-3 ``Time`` string units).
TIME_UNITS: dict[str, int] = {"s": 10**12, "ms": 10**9, "us": 10**6, "ns": 10**3, "ps": 1}

_BITS_PER_S_PER_BYTE_PER_NS = Decimal(8 * 10**9)
_PS_PER_NS = Decimal(1000)
_QUANTITY = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(.*)")


class _Reader:
    """Reads the file's sections (header, switch ids, links) from its numbered lines
    into checked values; every error names file and line."""

    def __init__(self, source: str):
        self.source = source
        self.line = 0

    def fail(self, message: str, line: int | None = None) -> ConfigError:
        return ConfigError(f"{self.source}: line {line or self.line}: {message}")

    def integer(self, word: str, what: str) -> int:
        try:
            return int(word)
        except ValueError:
            raise self.fail(f"{what} must be an integer, got {word!r}") from None

    def node(self, word: str, what: str, nodes: int) -> int:
        node = self.integer(word, what)
        if not 0 <= node < nodes:
            raise self.fail(f"unknown node id {node} in {what} (nodes are 0..{nodes - 1})")
        return node

    def quantity(self, word: str, what: str, units: dict[str, int], scale: Decimal, example: str) -> float:
        """``word`` as ``number * units[unit] / scale``, computed in decimal so that
        ``0.001ms`` is exactly 1000 ns and a written rate reads back bit for bit."""
        match = _QUANTITY.fullmatch(word)
        if not match:
            raise self.fail(f"{what} {word!r} is not a number with a unit (e.g. {example})")
        number, unit = match.groups()
        if not unit:
            raise self.fail(f"{what} {word!r} has no unit (e.g. {example})")
        if unit not in units:
            raise self.fail(f"{what} {word!r}: unknown unit {unit!r} (one of {' '.join(units)})")
        try:
            return float(Decimal(number) * units[unit] / scale)
        except DecimalException:  # an exponent past the decimal context's range
            raise self.fail(f"{what} {word!r} is out of range") from None

    def header(self, rows: Iterator[tuple[int, list[str]]]) -> tuple[int, int, int]:
        """``(nodes, switches, links)`` from the first row, checked against each other
        and against astra's size limits."""
        header = next(rows, None)
        if header is None:
            raise self.fail("empty file; expected the header '<nodes> <switches> <links>'", 1)
        self.line, words = header
        if len(words) != 3:
            raise self.fail(f"header must be '<nodes> <switches> <links>', got {len(words)} fields")
        nodes = self.integer(words[0], "node count")
        switch_count = self.integer(words[1], "switch count")
        link_count = self.integer(words[2], "link count")
        if nodes < 1:
            raise self.fail(f"node count must be >= 1, got {nodes}")
        if not 0 <= switch_count < nodes:
            raise self.fail(f"switch count must be 0..{nodes - 1} (at least one NPU), got {switch_count}")
        if link_count < 0:
            raise self.fail(f"link count must be >= 0, got {link_count}")
        try:
            check_topology_size(self.source, nodes, 2 * link_count, nodes - switch_count)
        except ConfigError as exc:
            raise self.fail(str(exc).removeprefix(f"{self.source}: ")) from None
        return nodes, switch_count, link_count

    def switches(
        self, rows: Iterator[tuple[int, list[str]]], switch_count: int, nodes: int, header_line: int
    ) -> list[int]:
        """The switch id line: ``switch_count`` distinct node ids."""
        row = next(rows, None)
        if row is None:
            raise self.fail(
                f"header says {switch_count} switches but the switch id line is missing", header_line
            )
        self.line, words = row
        if len(words) != switch_count:
            raise self.fail(f"header says {switch_count} switches, this line lists {len(words)} ids")
        switches: list[int] = []
        for word in words:
            switch = self.node(word, "switch id", nodes)
            if switch in switches:
                raise self.fail(f"switch id {switch} listed twice")
            switches.append(switch)
        return switches

    def links(
        self, rows: Iterator[tuple[int, list[str]]], nodes: int, link_count: int, header_line: int
    ) -> list[tuple[int, int, float, float]]:
        """The ``link_count`` link lines, each cable as two directed links."""
        links: list[tuple[int, int, float, float]] = []
        seen: dict[tuple[int, int], int] = {}  # cable -> its line
        for self.line, words in rows:
            if len(seen) == link_count:
                raise self.fail(
                    f"more link lines than the {link_count} the header (line {header_line}) declares"
                )
            if len(words) != 5:
                raise self.fail(
                    f"a link is '<src> <dst> <rate> <delay> <error rate>', got {len(words)} fields"
                )
            src = self.node(words[0], "link source", nodes)
            dst = self.node(words[1], "link destination", nodes)
            if src == dst:
                raise self.fail(f"link from node {src} to itself")
            cable = (min(src, dst), max(src, dst))
            if cable in seen:
                raise self.fail(f"nodes {src} and {dst} are already linked on line {seen[cable]}")
            seen[cable] = self.line
            bandwidth, delay_ns = self.cable_properties(words)
            links.append((src, dst, bandwidth, delay_ns))
            links.append((dst, src, bandwidth, delay_ns))
        if len(seen) < link_count:
            raise self.fail(f"header says {link_count} links, the file has {len(seen)}", header_line)
        return links

    def cable_properties(self, words: list[str]) -> tuple[float, float]:
        """A link line's ``(bytes/ns, delay ns)``, with its error rate checked."""
        bandwidth = self.quantity(words[2], "rate", RATE_UNITS, _BITS_PER_S_PER_BYTE_PER_NS, "100Gbps")
        if not bandwidth > 0:
            raise self.fail(f"rate must be > 0, got {words[2]}")
        if bandwidth == math.inf:
            raise self.fail(f"rate must be finite, got {words[2]}")
        delay_ns = self.quantity(words[3], "delay", TIME_UNITS, _PS_PER_NS, "0.001ms or 1000ns")
        if delay_ns < 0:
            raise self.fail(f"delay must be >= 0, got {words[3]}")
        if delay_ns == math.inf:
            raise self.fail(f"delay must be finite, got {words[3]}")
        try:
            error_rate = float(words[4])
        except ValueError:
            raise self.fail(f"error rate must be a number, got {words[4]!r}") from None
        if not 0 <= error_rate <= 1:
            raise self.fail(f"error rate must be in [0, 1], got {words[4]}")
        return bandwidth, delay_ns


def parse_ns3_topology(text: str, source: str = "topology") -> PhysicalTopology:
    """A :class:`PhysicalTopology` from the text of an ns-3 topology file.

    ``source`` names the file in error messages. Bandwidths become bytes/ns
    (``100Gbps`` -> 12.5), delays ns (``0.001ms`` -> 1000).
    """
    r = _Reader(source)
    lines = [(number, line.split()) for number, line in enumerate(text.splitlines(), 1)]
    rows = iter([(number, words) for number, words in lines if words])
    nodes, switch_count, link_count = r.header(rows)
    header_line = r.line
    switches = r.switches(rows, switch_count, nodes, header_line) if switch_count else []
    links = r.links(rows, nodes, link_count, header_line)
    return PhysicalTopology(nodes, switches, links, source=source)


#: Longest topology file read (bytes). A file at the size limits
#: (:mod:`astra_core.topology.size`: 2^21 cables of about 40 bytes a line) has under
#: 100 MB; a device such as /dev/zero or an endless pipe must not be read forever.
MAX_FILE_BYTES = 256 << 20


def read_ns3_topology(path: str | os.PathLike) -> PhysicalTopology:
    """Read an ns-3 topology file; errors name ``path`` and the line.

    Raises ConfigError for an unreadable file, a device (``/dev/zero``), text
    that is not UTF-8, or more than :data:`MAX_FILE_BYTES` bytes
    (:func:`~astra_core.config.files.read_bounded_text`).
    """
    name = os.fspath(path)
    text = read_bounded_text(name, MAX_FILE_BYTES, "an ns-3 topology file")
    return parse_ns3_topology(text, name)


def cables(topology: PhysicalTopology) -> list[tuple[int, int, float, float]]:
    """Each cable once, ``(a, b, bytes/ns, ns)``, in the order of its first link.

    Raises :class:`ConfigError` for a link without a reverse link of the same
    bandwidth and latency: the file format has only symmetric cables.
    """
    result = []
    for index, (src, dst) in enumerate(zip(topology.link_src, topology.link_dst)):
        bandwidth, latency = topology.link_bandwidth[index], topology.link_latency[index]
        try:
            back = topology.link(dst, src)
        except KeyError:
            back = None
        if back is None or (topology.link_bandwidth[back], topology.link_latency[back]) != (
            bandwidth,
            latency,
        ):
            raise ConfigError(
                f"{topology.source}: link {src} -> {dst} has no reverse link of the same "
                "bandwidth and latency; the ns-3 format has only symmetric cables"
            )
        if back > index:
            result.append((src, dst, bandwidth, latency))
    return result


def _plain(value: float) -> str:
    """Shortest round-tripping decimal without an exponent (ns-3 rates cannot have one)."""
    text = format(Decimal(repr(float(value))), "f")
    return text[:-2] if text.endswith(".0") else text


def format_ns3_topology(topology: PhysicalTopology) -> str:
    """The ns-3 file text: rates in Gbps, delays in ns, error rate 0."""
    lines = cables(topology)
    out = [
        f"{topology.nodes_count} {len(topology.switches)} {len(lines)}",
        " ".join(map(str, sorted(topology.switches))),
    ]
    out.extend(f"{a} {b} {_plain(bw * 8)}Gbps {_plain(lat)}ns 0" for a, b, bw, lat in lines)
    return "\n".join(out) + "\n"


def write_ns3_topology(topology: PhysicalTopology, path: str | os.PathLike) -> None:
    """Write ``topology`` in the ns-3 format (each cable once); reading it back gives the same links.

    The file is written atomically, parent directories created on demand;
    raises ConfigError naming ``path`` when it cannot be written.
    """
    from astra_core.outputs import write_text

    write_text(path, format_ns3_topology(topology))
