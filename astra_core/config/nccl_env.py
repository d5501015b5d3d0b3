"""NCCL's names for its collectives, algorithms and protocols, and how NCCL reads
its ``NCCL_ALGO`` / ``NCCL_PROTO`` variables (``src/graph/tuning.cc``,
``ncclFuncStr`` / ``ncclAlgoStr`` / ``ncclProtoStr`` and ``parseList``; NCCL
commit 5067397c). The system.json ``nccl`` section is checked with these; the
NCCL model (:mod:`astra_core.system.collectives.nccl.tuning`) applies them.
"""

from __future__ import annotations

from astra_core.errors import ConfigError

FUNC_NAMES = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
ALGO_NAMES = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
PROTO_NAMES = ("LL", "LL128", "Simple")


def parse_env_list(
    text: str, prefixes: tuple[str, ...], elems: tuple[str, ...], variable: str
) -> list[list[bool] | None]:
    """Which elements each prefix enables, as NCCL reads ``NCCL_ALGO`` / ``NCCL_PROTO``.

    ``"ring,tree;allreduce:^tree"``: entries separated by ``;``, each
    ``[prefix:]elem,elem``; ``^`` enables all but the listed; only the first
    entry may omit the prefix (it then applies to every prefix); names are
    case-insensitive. Returns ``[prefix][elem]``; None for a prefix the
    string never names (NCCL's defaults stay in force there).
    """
    table: list[list[bool] | None] = [None for _ in prefixes]
    lowered_prefixes = [p.lower() for p in prefixes]
    lowered_elems = [e.lower() for e in elems]
    prefix: str | None
    for index, entry in enumerate(text.split(";")):
        prefix, sep, items = entry.rpartition(":")
        if not sep:
            prefix = None
        if prefix is None and index:
            raise ConfigError(f"{variable}={text!r}: every entry after the first needs a 'function:' prefix")
        if prefix is not None and prefix.lower() not in lowered_prefixes:
            raise ConfigError(
                f"{variable}={text!r}: unknown function {prefix!r} (one of {', '.join(prefixes)})"
            )
        negate = items.startswith("^")
        names = [n for n in items.lstrip("^").split(",") if n]
        chosen = set()
        for name in names:
            if name.lower() not in lowered_elems:
                raise ConfigError(f"{variable}={text!r}: unknown {name!r} (one of {', '.join(elems)})")
            chosen.add(lowered_elems.index(name.lower()))
        rows = range(len(prefixes)) if prefix is None else [lowered_prefixes.index(prefix.lower())]
        for row in rows:
            table[row] = [(e in chosen) != negate for e in range(len(elems))]
    return table
