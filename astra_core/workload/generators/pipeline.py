"""Pipeline-parallel schedules: the order of forward and backward micro-batch passes per stage.

* GPipe (Huang et al., NeurIPS 2019): every forward pass, then every backward pass.
* 1F1B (PipeDream-Flush, Narayanan et al. ICML 2021; Megatron-LM's default
  non-interleaved schedule): stage ``p`` of ``P`` runs ``min(P - p - 1, M)``
  warm-up forwards, then alternates one forward and one backward, then drains
  the remaining backwards.

With uniform stages and free communication both take ``(M + P - 1)`` forward
plus backward slots, so the idle (bubble) fraction is ``(P - 1) / (M + P - 1)``.

* Interleaved 1F1B (Narayanan et al. SC'21, Megatron-LM's
  ``forward_backward_pipelining_with_interleaving``): each stage holds ``V``
  model chunks; virtual micro-batch ``k`` runs chunk ``(k // P) % V`` (the
  reverse order going backward) of micro-batch ``(k // (P V)) P + k % P``;
  stage ``p`` warms up with ``2 (P - p - 1) + (V - 1) P`` forwards, then
  alternates, then drains. The bubble shrinks to ``(P - 1) / (V M + P - 1)``.

Layers split evenly over the ``P V`` virtual stages, or, without interleaving,
with given layer counts on the first and the last stage and the rest evenly over
the stages between (Megatron-LM's ``--decoder-first-pipeline-num-layers`` and
``--decoder-last-pipeline-num-layers``; Megatron-core's ``get_num_layers_to_build``
refuses them with a virtual pipeline). Two ways give the embedding and the loss a
share of the split, with or without interleaving:

* Megatron-core's ``--account-for-embedding-in-pipeline-split`` and
  ``--account-for-loss-in-pipeline-split``: each counts as one more layer, the
  ``L (+1) (+1)`` layers split evenly over the ``P V`` virtual stages, and the
  first (last) virtual stage builds one layer less;
* Megatron-core's ``--pipeline-model-parallel-layout`` (:func:`parse_layout`):
  the layers of every virtual stage spelled out.
"""

from __future__ import annotations

import re

__all__ = [
    "SCHEDULES",
    "combined_passes",
    "interleaved",
    "layout_stages",
    "parse_layout",
    "schedule",
    "stage_layers",
    "stage_passes",
]

SCHEDULES = ("gpipe", "1f1b")


def schedule(kind: str, stages: int, stage: int, microbatches: int) -> list[tuple[str, int]]:
    """The passes of ``stage`` (0-based) in order: ``("F", m)`` / ``("B", m)``, m in 0..M-1.

    Raises ValueError for an unknown ``kind`` or a stage out of range.
    """
    if not 0 <= stage < stages or microbatches < 1:
        raise ValueError(f"stage {stage} of {stages} with {microbatches} micro-batches")
    m = microbatches
    if kind == "gpipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    if kind == "1f1b":
        warmup = min(stages - stage - 1, m)
        order = [("F", i) for i in range(warmup)]
        for i in range(m - warmup):
            order += [("F", warmup + i), ("B", i)]
        order += [("B", i) for i in range(m - warmup, m)]
        return order
    raise ValueError(f"unknown pipeline schedule {kind!r} (expected one of {', '.join(SCHEDULES)})")


def interleaved(stages: int, stage: int, microbatches: int, chunks: int) -> list[tuple[str, int, int]]:
    """Interleaved 1F1B passes of ``stage``: ``("F" | "B", micro-batch, chunk)`` in order.

    Warm-up as Megatron-core's ``get_pp_rank_microbatches`` counts it, also when the
    micro-batches equal the stages (where Megatron-LM before its tunable schedule of
    2024 ran every forward pass first). Raises ValueError unless the micro-batches are
    a multiple of the stages (Megatron-LM's requirement for this schedule).
    """
    if not 0 <= stage < stages or microbatches < 1 or chunks < 1:
        raise ValueError(f"stage {stage} of {stages} with {microbatches} micro-batches, {chunks} chunks")
    if microbatches % stages:
        raise ValueError(
            f"interleaved 1F1B needs the micro-batches ({microbatches}) to be a multiple "
            f"of the pipeline stages ({stages})"
        )
    group = stages * chunks
    total = microbatches * chunks

    def pass_of(kind: str, k: int) -> tuple[str, int, int]:
        chunk = (k % group) // stages
        if kind == "B":
            chunk = chunks - 1 - chunk
        return kind, (k // group) * stages + k % stages, chunk

    warmup = min((stages - stage - 1) * 2 + (chunks - 1) * stages, total)
    order = [pass_of("F", k) for k in range(warmup)]
    for i in range(total - warmup):
        order += [pass_of("F", warmup + i), pass_of("B", i)]
    order += [pass_of("B", k) for k in range(total - warmup, total)]
    return order


def stage_passes(
    kind: str, stages: int, stage: int, microbatches: int, chunks: int
) -> list[tuple[str, int, int]]:
    """The passes of ``stage``: ``("F" | "B", micro-batch, chunk)`` in order, interleaved
    1F1B with ``chunks`` > 1 (:func:`interleaved`), else ``kind``'s order on chunk 0
    (:func:`schedule`). Raises ValueError as those do."""
    if chunks > 1:
        return interleaved(stages, stage, microbatches, chunks)
    return [(f_or_b, m, 0) for f_or_b, m in schedule(kind, stages, stage, microbatches)]


def combined_passes(order: list[tuple[str, int, int]], stages: int) -> list[tuple[int | None, int | None]]:
    """The passes of ``order`` (:func:`stage_passes`) as Megatron-core's expert-parallel
    overlap runs them: ``(forward step, backward step)`` index pairs into ``order``, None
    where a pass runs alone.

    One stage (``forward_backward_no_pipelining``): micro-batch 0's forward alone, then
    each forward beside the previous micro-batch's backward, the last backward alone.
    Interleaved stages (``forward_backward_pipelining_with_interleaving``): every
    steady-state forward beside the backward that follows it in ``order``; warm-up
    forwards and cool-down backwards alone.
    """
    if stages == 1:
        forward = [i for i, step in enumerate(order) if step[0] == "F"]
        backward = [i for i, step in enumerate(order) if step[0] == "B"]
        pairs: list[tuple[int | None, int | None]] = [(forward[0], None)]
        pairs += list(zip(forward[1:], backward[:-1]))
        return [*pairs, (None, backward[-1])]
    pairs, i = [], 0
    while i < len(order):
        if order[i][0] == "F" and i + 1 < len(order) and order[i + 1][0] == "B":
            pairs.append((i, i + 1))
            i += 2
        else:
            pairs.append((i, None) if order[i][0] == "F" else (None, i))
            i += 1
    return pairs


def stage_layers(
    layers: int,
    stages: int,
    chunks: int = 1,
    first: int | None = None,
    last: int | None = None,
    *,
    embedding: bool = False,
    loss: bool = False,
    layout: str | None = None,
    mtp: int = 0,
) -> list[int]:
    """Layers of each of the ``stages x chunks`` virtual stages, in order (virtual stage
    ``v P + p`` is chunk ``v`` of stage ``p``): ``first`` and ``last`` (None: not given)
    on the first and last stage, the rest evenly over the others; ``embedding`` /
    ``loss``: the embedding / the loss counted as a layer (module docstring);
    ``layout``: a pipeline layout (:func:`parse_layout`, with ``mtp`` multi-token-prediction
    layers). The caller checks that they divide (``chunks`` 1 where ``first`` or ``last``
    is given)."""
    if layout is not None:
        return parse_layout(layout, stages, layers, mtp)
    if embedding or loss:
        each = (layers + embedding + loss) // (stages * chunks)
        counts = [each] * (stages * chunks)
        counts[0] -= embedding
        counts[-1] -= loss
        return counts
    if first is None and last is None:
        return [layers // (stages * chunks)] * (stages * chunks)
    given = [count for count in (first, last) if count is not None]
    others = stages - len(given)
    each = (layers - sum(given)) // others if others else 0
    counts = [each] * stages
    if first is not None:
        counts[0] = first
    if last is not None:
        counts[-1] = last
    return counts


def parse_layout(layout: str, stages: int, layers: int, mtp: int = 0) -> list[int]:
    """Transformer layers of each virtual stage of a pipeline layout as Megatron-core's
    ``--pipeline-model-parallel-layout`` writes it (``PipelineParallelLayerLayout``):
    virtual stages in order (``v P + p``) separated by ``|``, each a string of ``E``
    (the embedding), ``t`` (a transformer layer) and ``L`` (the loss); ``x*n`` repeats
    a letter and ``(...)*n`` a group, commas are ignored. ``"Et|(tt|)*62tL"`` puts 126
    layers on 64 virtual stages, the embedding and the loss with one layer each.

    Raises ValueError (one line) unless the virtual stages are a multiple of
    ``stages``, the embedding is the first entry and the loss the last (once each),
    ``layers`` transformer layers are placed, and the ``mtp`` multi-token-prediction
    layers (``m``) come right before the loss (where Megatron-core runs them)."""
    text = _unrolled(layout)
    unknown = sorted(set(text) - set("EtmL|"))
    if unknown:
        raise ValueError(f"unknown layer letters {''.join(unknown)!r} (E embedding, t layer, m MTP, L loss)")
    if text.count("m") != mtp:
        raise ValueError(
            f"it places {text.count('m')} multi-token-prediction layers (m); --mtp-num-layers is {mtp}"
        )
    if mtp and not text.endswith("m" * mtp + "L"):
        raise ValueError("the multi-token-prediction layers (m) must come right before the loss (L)")
    text = text.replace("m", "")
    parts = text.split("|")
    if len(parts) % stages:
        raise ValueError(f"{len(parts)} virtual stages are not a multiple of the {stages} pipeline stages")
    flat = text.replace("|", "")
    if flat.count("E") != 1 or flat.count("L") != 1 or not flat.startswith("E") or not flat.endswith("L"):
        raise ValueError("the embedding (E) must come first and the loss (L) last, once each")
    if flat.count("t") != layers:
        raise ValueError(f"it places {flat.count('t')} transformer layers; the model has {layers}")
    return [part.count("t") for part in parts]


def layout_stages(layout: str) -> int:
    """Virtual stages (all pipeline stages' together) that a pipeline layout spells."""
    return _unrolled(layout).count("|") + 1


def _unrolled(layout: str) -> str:
    """A layout with its repeats written out and its commas dropped."""
    text = layout.replace(",", "")
    text = re.sub(r"\(([^()]+)\)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), text)
    return re.sub(r"(.)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), text)
