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
refuses them with a virtual pipeline).
"""

from __future__ import annotations

__all__ = ["SCHEDULES", "interleaved", "schedule", "stage_layers"]

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

    Raises ValueError unless the micro-batches are a multiple of the stages
    (Megatron-LM's requirement for this schedule).
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

    if microbatches == stages:
        warmup = total
    else:
        warmup = min((stages - stage - 1) * 2 + (chunks - 1) * stages, total)
    order = [pass_of("F", k) for k in range(warmup)]
    for i in range(total - warmup):
        order += [pass_of("F", warmup + i), pass_of("B", i)]
    order += [pass_of("B", k) for k in range(total - warmup, total)]
    return order


def stage_layers(
    layers: int, stages: int, chunks: int = 1, first: int | None = None, last: int | None = None
) -> list[int]:
    """Layers of each of the ``stages x chunks`` virtual stages, in order (virtual stage
    ``v P + p`` is chunk ``v`` of stage ``p``): ``first`` and ``last`` (None: not given)
    on the first and last stage, the rest evenly over the others. The caller checks that
    they divide (``chunks`` 1 where ``first`` or ``last`` is given)."""
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
