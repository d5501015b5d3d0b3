"""Collective algorithm names of system.json's ``*-implementation`` lists.

Upstream source: ``generate_collective_impl_from_input`` (Sys.cc, later
astraccl/CollectiveImplLookup.cc), ``GeneralComplexTopology`` and
``Sys::generate_collective_phase``.  Each list entry names the algorithm of one
network dimension, dimension 0 first:

=====================  ====================================================
``ring``               ring over this dimension's NPUs
``direct``             direct (all-to-all style) exchange over this dimension;
                       each NPU talks to all peers of the dimension at once
``direct<N>``          direct with a window: at most N peers in flight at a
                       time (upstream ``AllToAll``: ``min(N, npus - 1)``; no
                       suffix means ``npus - 1``).  Upstream reads up to 5
                       digits with ``stoi``; here the suffix must be digits >= 1
``halvingDoubling``    recursive halving / doubling over this dimension
``doubleBinaryTree``   double binary tree; upstream runs its all-reduce
                       pattern whatever the collective type
``oneRing``            one ring over *all* NPUs of the network, ignoring the
                       dimensions (upstream stops reading the list after it)
``oneDirect[<N>]``     direct over all NPUs, optional window as above
``oneHalvingDoubling`` halving-doubling over all NPUs
``nccl``               NCCL's algorithms and protocols, chosen per size as
                       NCCL chooses them, over all NPUs of the collective
                       (astra's extension; needs the system.json ``nccl``
                       section, see ``astra_core.config.nccl``); must be the
                       only entry
``plugin:NAME``        an algorithm registered by a plugin
                       (``astra_register_collectives``); whether NAME is
                       registered is checked when a simulation starts
=====================  ====================================================

Unknown names: upstream logs "Cannot interpret collective implementations" and
exits; here they are a :class:`ConfigError` naming the key and the entry.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Any


class AlgorithmKind(str, Enum):
    """Upstream ``CollectiveImplType`` values reachable from system.json."""

    RING = "ring"
    ONE_RING = "oneRing"
    DIRECT = "direct"
    ONE_DIRECT = "oneDirect"
    HALVING_DOUBLING = "halvingDoubling"
    ONE_HALVING_DOUBLING = "oneHalvingDoubling"
    DOUBLE_BINARY_TREE = "doubleBinaryTree"
    NCCL = "nccl"
    PLUGIN = "plugin"  # "plugin:NAME": an algorithm a plugin registered

    def __str__(self) -> str:
        return self.value

    @property
    def spans_all_dims(self) -> bool:
        """True for the ``one*`` forms: one logical dimension over all NPUs."""
        return self in (
            AlgorithmKind.ONE_RING,
            AlgorithmKind.ONE_DIRECT,
            AlgorithmKind.ONE_HALVING_DOUBLING,
            AlgorithmKind.NCCL,
        )

    @property
    def base(self) -> AlgorithmKind:
        """The per-dimension algorithm a ``one*`` form runs (ring for oneRing...)."""
        return {
            AlgorithmKind.ONE_RING: AlgorithmKind.RING,
            AlgorithmKind.ONE_DIRECT: AlgorithmKind.DIRECT,
            AlgorithmKind.ONE_HALVING_DOUBLING: AlgorithmKind.HALVING_DOUBLING,
        }.get(self, self)


#: The NCCL model's algorithm name (system.json ``["nccl"]``), as a plain str (set members,
#: dict keys and comparisons with names read from files).
NCCL = AlgorithmKind.NCCL.value


_WINDOWED = re.compile(r"(direct|oneDirect)(\d*)\Z")

#: The accepted spellings, for messages.
ACCEPTED_NAMES = (
    "ring",
    "oneRing",
    "direct",
    "direct<N>",
    "oneDirect",
    "oneDirect<N>",
    "halvingDoubling",
    "oneHalvingDoubling",
    "doubleBinaryTree",
    "nccl",
    "plugin:<name>",
)
_PLUGIN = re.compile(r"plugin:([A-Za-z_][A-Za-z0-9_.-]*)\Z")


class CollectiveAlgorithm(str):
    """One entry of an ``*-implementation`` list: the upstream string itself,
    plus its parsed ``kind`` (:class:`AlgorithmKind`) and ``window``.

    It compares equal to its string (``CollectiveAlgorithm("ring") == "ring"``),
    so configs can be written and compared with plain strings.
    ``window`` is the direct-algorithm window (peers in flight), or None for
    "all peers" and for non-direct algorithms.
    """

    kind: AlgorithmKind
    window: int | None

    @property
    def plugin_name(self) -> str | None:
        """NAME of a ``plugin:NAME`` entry, else None."""
        return self[len("plugin:") :] if self.kind is AlgorithmKind.PLUGIN else None

    def __new__(cls, text: str) -> CollectiveAlgorithm:
        if isinstance(text, CollectiveAlgorithm):
            return text
        kind, window = parse_algorithm(text)
        self = super().__new__(cls, text)
        self.kind = kind
        self.window = window
        return self

    def __repr__(self) -> str:
        return f"CollectiveAlgorithm({str.__repr__(self)})"

    def __reduce__(self):
        return (CollectiveAlgorithm, (str(self),))


def parse_algorithm(text: object) -> tuple[AlgorithmKind, int | None]:
    """``'direct8'`` -> ``(AlgorithmKind.DIRECT, 8)``; raise ValueError if unknown.

    The ValueError message is a sentence fit for a config error line.
    """
    if not isinstance(text, str):
        raise ValueError(f"expected an algorithm name (a string), got {text!r}")
    if text.startswith("plugin:"):
        if not _PLUGIN.match(text):
            raise ValueError(f"expected plugin:<name> with a name of letters, digits, _ . -, got {text!r}")
        return AlgorithmKind.PLUGIN, None
    match = _WINDOWED.match(text)
    if match:
        kind = AlgorithmKind(match.group(1))
        digits = match.group(2)
        if not digits:
            return kind, None
        window = int(digits)
        if window < 1:
            raise ValueError(f"window of {text!r} must be >= 1")
        return kind, window
    try:
        return AlgorithmKind(text), None
    except ValueError:
        pass
    hint = ""
    lowered = {name.lower(): name for name in ACCEPTED_NAMES if "<" not in name}
    if text.lower() in lowered:
        hint = f" (names are case-sensitive: use {lowered[text.lower()]!r})"
    raise ValueError(f"expected one of {', '.join(ACCEPTED_NAMES)}, got {text!r}{hint}")


def as_algorithm(value: Any) -> tuple[CollectiveAlgorithm | None, str | None]:
    """A house check (:mod:`astra_core.config.issues`): ``value`` as a
    :class:`CollectiveAlgorithm`, or None and :func:`parse_algorithm`'s sentence."""
    try:
        return CollectiveAlgorithm(value), None
    except ValueError as exc:
        return None, str(exc)
