"""Synthetic traffic for NoC studies: destination patterns and a Bernoulli injector.

Patterns (Dally & Towles, *Principles and Practices of Interconnection
Networks*, table 3.2; the same definitions as BookSim), for ``N`` nodes laid
out as a grid of ``sizes`` (node id = x + X * (y + Y * z), dimension 0
fastest):

``uniform_random``
    every other node equally likely.
``transpose``
    (x, y) -> (y, x) on a square 2-D grid; otherwise, for ``N = 2^b`` with
    ``b`` even, the bit pattern ``d_i = s_{(i + b/2) mod b}``.
``tornado``
    every coordinate moves ``ceil(k/2) - 1`` ahead: ``d = (s + ceil(k/2) - 1) mod k``.
``bit_complement``
    ``d_i = not s_i`` (``N`` a power of two): on a 2^a x 2^a grid, (x, y) ->
    (k-1-x, k-1-y).
``neighbor``
    every coordinate one ahead: ``d = (s + 1) mod k``.

A node whose pattern destination is itself (the diagonal of transpose) does
not inject.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

from astra.plugin import ConfigError

PATTERNS = ("uniform_random", "transpose", "tornado", "bit_complement", "neighbor")

#: A pattern: (source node, random generator) -> destination node.
Pattern = Callable[[int, random.Random], int]

#: Most flits a node can offer per cycle: its injection port takes one flit per cycle
#: (Garnet's NI; Dally & Towles, ch. 23: offered load as a fraction of injection capacity).
MAX_INJECTION_RATE = 1.0


def check_injection_rate(rate_flits: float) -> None:
    """Raise ConfigError unless ``rate_flits`` (flits/node/cycle) is in (0, 1]."""
    if not 0 < rate_flits <= MAX_INJECTION_RATE:
        raise ConfigError(
            f"--injection-rate must be in (0, 1] flits/node/cycle (a node's injection port "
            f"takes one flit per cycle), got {rate_flits:g}"
        )


def _coords(node: int, sizes: Sequence[int]) -> list[int]:
    out = []
    for k in sizes:
        out.append(node % k)
        node //= k
    return out


def _node(coords: Sequence[int], sizes: Sequence[int]) -> int:
    node, stride = 0, 1
    for c, k in zip(coords, sizes):
        node += c * stride
        stride *= k
    return node


def make_pattern(name: str, sizes: Sequence[int]) -> Pattern:
    """The destination function of pattern ``name`` on a grid of ``sizes``.

    Raises ConfigError for an unknown name or a grid the pattern is not
    defined on (bit patterns need a power-of-two node count).
    """
    sizes = list(sizes)
    n = math.prod(sizes)
    if name == "uniform_random":
        if n < 2:
            raise ConfigError("uniform_random needs at least 2 nodes")

        def uniform(src: int, rng: random.Random) -> int:
            dst = rng.randrange(n - 1)
            return dst + 1 if dst >= src else dst

        return uniform
    if name in ("tornado", "neighbor"):
        shifts = [max(0, math.ceil(k / 2) - 1) if name == "tornado" else 1 for k in sizes]
        table = [
            _node([(c + s) % k for c, s, k in zip(_coords(src, sizes), shifts, sizes)], sizes)
            for src in range(n)
        ]
        return lambda src, rng: table[src]
    if name == "transpose":
        if len(sizes) == 2 and sizes[0] == sizes[1]:
            table = [_node(list(reversed(_coords(src, sizes))), sizes) for src in range(n)]
            return lambda src, rng: table[src]
        bits = n.bit_length() - 1
        if n != 1 << bits or bits % 2:
            raise ConfigError(
                f"transpose needs a square 2-D grid or 2^b nodes with b even; got {'x'.join(map(str, sizes))}"
            )
        half, mask = bits // 2, n - 1
        return lambda src, rng: ((src << half) | (src >> half)) & mask
    if name == "bit_complement":
        if n & (n - 1):
            raise ConfigError(f"bit_complement needs a power-of-two node count; got {n}")
        mask = n - 1
        return lambda src, rng: ~src & mask
    raise ConfigError(f"unknown traffic pattern {name!r}; known: {', '.join(PATTERNS)}")


class Injector:
    """Open-loop Bernoulli injection: each node starts a packet in a cycle with probability p.

    ``p = rate_flits / packet_flits`` (rate in flits/node/cycle, at most one
    packet per cycle). The gap to a node's next packet is drawn from the
    geometric distribution, so a node costs one event per packet, not per
    cycle. ``send(src, dst)`` is called for each packet.
    """

    def __init__(
        self,
        nodes: int,
        pattern: Pattern,
        rate_flits: float,
        packet_flits: int,
        cycle_ps: int,
        clock,
        send: Callable[[int, int], None],
        seed: int = 1,
    ):
        check_injection_rate(rate_flits)
        self.p = min(1.0, rate_flits / packet_flits)
        self.pattern = pattern
        self.cycle_ps = cycle_ps
        self.clock = clock
        self.send = send
        self.rng = random.Random(seed)
        self.stopped = False
        self._log_q = math.log1p(-self.p) if self.p < 1 else None
        for src in range(nodes):
            clock.call_in(self._gap() - cycle_ps, self._inject, src)

    def _gap(self) -> int:
        """Cycles to the next packet (>= 1), geometric with success probability p, in ps."""
        if self._log_q is None:
            return self.cycle_ps
        u = 1.0 - self.rng.random()  # (0, 1]
        return (int(math.log(u) / self._log_q) + 1) * self.cycle_ps

    def _inject(self, src: int) -> None:
        if self.stopped:
            return
        dst = self.pattern(src, self.rng)
        if dst == src:
            return  # this node's destination is itself: it does not inject
        self.send(src, dst)
        self.clock.call_in(self._gap(), self._inject, src)
