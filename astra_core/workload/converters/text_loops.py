"""Training loops of ASTRA-sim 1.0 text workloads as Chakra node graphs.

One function per parallelism builds the rank-independent node list of a
:class:`~astra_core.workload.converters.text.ConvertedText` through
:class:`Graph`: forward passes layer by layer, then backward passes in
reverse, with the dependencies ASTRA-sim 1.0's ``Workload::iterate_*`` loops
imply (and Chakra's text converter encodes, in its node order): see
:mod:`astra_core.workload.converters.text`. ``scope(layer, phase)`` names the
NPUs a phase's collective spans (phase 0 forward, 1 input gradient, 2 weight
gradient).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from astra_core.errors import ConfigError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.converters.text_format import COMM_TYPES, TextWorkload

__all__ = ["LOOPS", "Graph", "Template"]


@dataclass
class Template:
    """One node of the rank-independent graph; ``scope`` is (layout, role) for collectives."""

    name: str
    type: int
    duration: int = 0
    deps: tuple[int, ...] = ()
    comm_type: int | None = None
    comm_size: int = 0
    scope: tuple[str, str] | None = None


class Graph:
    """Builds the template list; handles are tuples of node indices."""

    def __init__(self, present: Callable[[tuple[str, str]], bool]):
        self.nodes: list[Template] = []
        self.present = present  # scope -> False when its collectives are left out

    @staticmethod
    def _deps(handles) -> tuple[int, ...]:
        out: list[int] = []
        for h in handles:
            for d in h or ():
                if d not in out:
                    out.append(d)
        return tuple(out)

    def comp(self, layer: str, phase: str, duration: int, *deps) -> tuple[int, ...]:
        self.nodes.append(Template(f"COMP_NODE_{layer}_{phase}", pb.COMP_NODE, duration, self._deps(deps)))
        return (len(self.nodes) - 1,)

    def coll(self, label: str, comm: str, size: int, scope: tuple[str, str], *deps) -> tuple[int, ...]:
        """A collective node, or (when there is nothing to communicate) its dependencies.

        Nothing to communicate: comm type NONE, a group of one NPU, or 0 bytes
        (a collective needs comm_size > 0: the reader rejects 0, as upstream
        has no message to send for it)."""
        kind = COMM_TYPES[comm]
        if kind is None or size <= 0 or not self.present(scope):
            return self._deps(deps)
        self.nodes.append(
            Template(
                f"COMM_COLL_NODE_{label}_{comm}",
                pb.COMM_COLL_NODE,
                0,
                self._deps(deps),
                pb.CollectiveCommType.Value(kind),
                size,
                scope,
            )
        )
        return (len(self.nodes) - 1,)


def _data(wl: TextWorkload, g: Graph, passes: int, scope) -> None:
    layers, n = wl.layers, len(wl.layers)
    wg_comm: list = [None] * n
    for _ in range(passes):
        fwd: list = [None] * n
        for i, layer in enumerate(layers):
            fwd[i] = g.comp(layer.name, "FWD", layer.fwd_compute, fwd[i - 1] if i else None, wg_comm[i])
        ig: list = [None] * n
        for idx, i in enumerate(range(n - 1, -1, -1)):
            layer = layers[i]
            wg = g.comp(layer.name, "BWD_WG", layer.wg_compute, fwd[n - 1] if idx == 0 else ig[i + 1])
            wg_comm[i] = g.coll(layer.name, layer.wg_comm, layer.wg_bytes, scope(layer, 2), wg)
            if idx != n - 1:
                ig[i] = g.comp(layer.name, "BWD_IG", layer.ig_compute, wg)


def _micro(wl: TextWorkload, g: Graph, passes: int, scope) -> None:
    for _ in range(passes):
        for layer in wl.layers:
            g.coll(layer.name, layer.wg_comm, layer.wg_bytes, scope(layer, 2))


def _model(wl: TextWorkload, g: Graph, passes: int, scope) -> None:
    layers, n = wl.layers, len(wl.layers)
    wg: list = [None] * n
    for _ in range(passes):
        fwd_comm: list = [None] * n
        for i, layer in enumerate(layers):
            f = g.comp(layer.name, "FWD", layer.fwd_compute, fwd_comm[i - 1] if i else None, wg[i])
            fwd_comm[i] = g.coll(layer.name, layer.fwd_comm, layer.fwd_bytes, scope(layer, 0), f)
        ig_comm: list = [None] * n
        for idx, i in enumerate(range(n - 1, -1, -1)):
            layer = layers[i]
            deps = (fwd_comm[n - 1],) if idx == 0 else (wg[i + 1], ig_comm[i + 1])
            ig = g.comp(layer.name, "BWD_IG", layer.ig_compute, *deps)
            if idx != n - 1:
                ig_comm[i] = g.coll(layer.name, layer.ig_comm, layer.ig_bytes, scope(layer, 1), ig)
            wg[i] = g.comp(layer.name, "BWD_WG", layer.wg_compute, ig)


def _hybrid(wl: TextWorkload, g: Graph, passes: int, scope) -> None:
    """HYBRID_DATA_MODEL / HYBRID_MODEL_DATA / HYBRID_CUSTOMIZED (Chakra's hybrid loop)."""
    layers, n = wl.layers, len(wl.layers)
    suffix = "" if wl.parallelism == "HYBRID_MODEL_DATA" else "_IG_COMM_"
    wg_comm: list = [None] * n
    for _ in range(passes):
        fwd_comm: list = [None] * n
        for i, layer in enumerate(layers):
            f = g.comp(layer.name, "FWD", layer.fwd_compute, wg_comm[i], fwd_comm[i - 1] if i else None)
            fwd_comm[i] = g.coll(layer.name, layer.fwd_comm, layer.fwd_bytes, scope(layer, 0), f)
        wg: list = [None] * n
        ig_comm: list = [None] * n
        for idx, i in enumerate(range(n - 1, -1, -1)):
            layer = layers[i]
            deps = (fwd_comm[n - 1],) if idx == 0 else (wg[i + 1], ig_comm[i + 1])
            ig = g.comp(layer.name, "BWD_IG", layer.ig_compute, *deps)
            if idx != n - 1:
                ig_comm[i] = g.coll(layer.name + suffix, layer.ig_comm, layer.ig_bytes, scope(layer, 1), ig)
            wg[i] = g.comp(layer.name, "BWD_WG", layer.wg_compute, ig)
            wg_comm[i] = g.coll(layer.name, layer.wg_comm, layer.wg_bytes, scope(layer, 2), wg[i])


def _transformer(wl: TextWorkload, g: Graph, passes: int, scope) -> None:
    """HYBRID_TRANSFORMER[_FWD_IN_BCKWD] (ASTRA-sim 1.0 iterate_hybrid_parallel_Transformer*)."""
    layers, n = wl.layers, len(wl.layers)
    checkpoints, initiates = set(wl.checkpoints), set(wl.checkpoint_initiates)
    wg_comm: list = [None] * n
    for _ in range(passes):
        fwd_comm: list = [None] * n
        for i, layer in enumerate(layers):
            f = g.comp(layer.name, "FWD", layer.fwd_compute, wg_comm[i], fwd_comm[i - 1] if i else None)
            fwd_comm[i] = g.coll(layer.name, layer.fwd_comm, layer.fwd_bytes, scope(layer, 0), f)
        last = fwd_comm[n - 1]
        for i in range(n - 1, -1, -1):
            layer = layers[i]
            if i in initiates:
                start = max(c for c in checkpoints if c <= i)
                for j in range(start, i):  # re-run the forward pass from the checkpoint
                    f = g.comp(layers[j].name, "FWD_RECOMPUTE", layers[j].fwd_compute, last)
                    last = g.coll(
                        layers[j].name + "_RECOMPUTE",
                        layers[j].fwd_comm,
                        layers[j].fwd_bytes,
                        scope(layers[j], 0),
                        f,
                    )
            ig = g.comp(layer.name, "BWD_IG", layer.ig_compute, last)
            ig_comm = g.coll(layer.name + "_IG_COMM_", layer.ig_comm, layer.ig_bytes, scope(layer, 1), ig)
            wg = g.comp(layer.name, "BWD_WG", layer.wg_compute, ig_comm)
            wg_comm[i] = g.coll(layer.name, layer.wg_comm, layer.wg_bytes, scope(layer, 2), wg)
            last = wg


def _dlrm(wl: TextWorkload, g: Graph, passes: int, scope) -> None:
    layers, n = wl.layers, len(wl.layers)
    bottom = cast(int, wl.last_bottom_layer)  # a DLRM header always sets it (text_format)
    if layers[0].fwd_comm != "ALLTOALL":
        raise ConfigError(
            f"{wl.source}:{layers[0].line}: {wl.parallelism}: the first layer (embedding) "
            f"must have an ALLTOALL forward collective"
        )
    wg: list = [None] * n
    wg_comm: list = [None] * n
    embedding_ig_comm = None
    for _ in range(passes):
        fwd: list = [None] * n
        fwd_comm0 = None
        for i, layer in enumerate(layers):
            prev_pass = wg_comm[i] if wg_comm[i] is not None else wg[i]
            deps = [prev_pass, fwd[i - 1] if i else None]
            if i == bottom:
                deps.append(fwd_comm0)
            fwd[i] = g.comp(layer.name, "FWD", layer.fwd_compute, *deps)
            if layer.fwd_comm == "ALLTOALL":
                c = g.coll(layer.name, layer.fwd_comm, layer.fwd_bytes, scope(layer, 0), fwd[i])
                if i == 0:
                    fwd_comm0 = c
        ig: list = [None] * n
        for idx, i in enumerate(range(n - 1, -1, -1)):
            layer = layers[i]
            if idx == 0:
                bwd_deps: tuple[Any, ...] = (fwd[n - 1],)
            else:
                bwd_deps = (ig[i + 1], embedding_ig_comm if i == 0 else None)
            wg[i] = g.comp(layer.name, "BWD_WG", layer.wg_compute, *bwd_deps)
            wg_comm[i] = (
                g.coll(layer.name, layer.wg_comm, layer.wg_bytes, scope(layer, 2), wg[i])
                if layer.wg_comm != "NONE"
                else None
            )
            if idx != n - 1:
                ig[i] = g.comp(layer.name, "BWD_IG", layer.ig_compute, wg[i])
            if i == bottom + 1:
                first = layers[0]
                embedding_ig_comm = g.coll(first.name, first.ig_comm, first.ig_bytes, scope(first, 1), ig[i])


LOOPS = {
    "DATA": _data,
    "MICRO": _micro,
    "MODEL": _model,
    "HYBRID_DATA_MODEL": _hybrid,
    "HYBRID_MODEL_DATA": _hybrid,
    "HYBRID_CUSTOMIZED": _hybrid,
    "HYBRID_TRANSFORMER": _transformer,
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD": _transformer,
    "HYBRID_DLRM": _dlrm,
    "HYBRID_DLRM_ENHANCED": _dlrm,
}
