"""A lone message's store-and-forward time over a route of links, packet by packet.

A message of ``B`` payload bytes goes as ``n = max(1, ceil(B / P))`` packets
(``P`` payload bytes, ``H`` header bytes each): ``n - 1`` full frames of
``F = P + H`` bytes and a last one of ``L = B - (n - 1) P + H``. Every link
``j`` (``t_j`` ns per byte) sends a frame only once it has received all of
it, one frame at a time, in order. The last frame leaves the last link after
the longest chain of transmissions through the (frame, link) grid that moves
to a later frame or a later link at each step (the tandem-queue recursion of
store-and-forward networks). With equal full frames the longest chain takes
frame 1 over links ``0 .. j1``, every full frame at link ``j1``, frame
``n - 1`` on to a link ``j2 >= j1`` and the last frame from ``j2`` to the
end; the full frames then cost ``F (P(j2) + (n - 2) t_j1)`` with ``P(j2) =
t_0 + ... + t_j2``, so the best ``j1`` is the slowest link up to ``j2``::

    time = max over j2 of [ F P(j2) + (n - 2) F max_{j <= j2} t_j + L (t_j2 + ... + t_last) ]

plus the links' latencies (``n = 1``: ``L`` times the sum of ``t_j``). On
one bottleneck with faster links around it this is ``W / r_b`` (``W = B + n
H`` wire bytes) plus one frame's store and forward per other link; where a
link after the bottleneck is as slow as it, the largest frame's. The ns3
backend's packet model gives a lone message exactly this time
(``backends/ns3/astra_ns3/tests/test_ideal_fct.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from astra_core.events import kernel


def pipeline_ns(
    ns_per_byte: Sequence[float], size_bytes: int, payload_bytes: int, header_bytes: int
) -> float:
    """Transmission part (ns, latencies excluded) of a lone ``size_bytes`` message over
    links of ``ns_per_byte`` each (>= 1 link), in packets of ``payload_bytes`` +
    ``header_bytes``: the closed form above, computed by the simulation kernel
    (``astra_core/cpp/include/astra_pipeline.h``, which the flow model uses too). Raises
    ValueError for no link, a payload that is not positive or a negative size."""
    return kernel().pipeline_ns(ns_per_byte, size_bytes, payload_bytes, header_bytes)
