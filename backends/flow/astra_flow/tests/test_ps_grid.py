"""The flow model's ps grid (the kernel's round_ps) against Python's round(t, 3).

The kernel rounds by one multiplication where t * 1000 is far from a half, and
as Python does (through the decimal string) near one; both must give Python's
double exactly, so that the model's event times are those of the Python model
it replaced. Near-halves are built on purpose: t = (k + 0.5) / 1000 and its
neighbouring doubles.
"""

from __future__ import annotations

import math
import random

from astra_core.events import kernel


def test_round_ps_is_pythons_round_to_three_decimals():
    round_ps = kernel().round_ps
    rng = random.Random(11)
    values = [rng.uniform(0, 1e4) for _ in range(20_000)]
    values += [rng.uniform(0, 1e13) for _ in range(20_000)]
    for _ in range(20_000):  # near-halves and their neighbours
        t = (rng.randrange(10**12) + 0.5) / 1000
        values += [t, math.nextafter(t, 0.0), math.nextafter(t, math.inf)]
    values += [0.0, 1e-9, 0.0005, 0.0015, 2.5e-3, 1e15 + 0.0625, 5e15 + 0.5]
    for t in values:
        assert round_ps(t) == round(t, 3), t
