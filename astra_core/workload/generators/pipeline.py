"""Pipeline-parallel schedules: the order of forward and backward micro-batch passes per stage.

* GPipe (Huang et al., NeurIPS 2019): every forward pass, then every backward pass.
* 1F1B (PipeDream-Flush, Narayanan et al. ICML 2021; Megatron-LM's default
  non-interleaved schedule): stage ``p`` of ``P`` runs ``min(P - p - 1, M)``
  warm-up forwards, then alternates one forward and one backward, then drains
  the remaining backwards.

With uniform stages and free communication both take ``(M + P - 1)`` forward
plus backward slots, so the idle (bubble) fraction is ``(P - 1) / (M + P - 1)``.
"""

from __future__ import annotations

__all__ = ["SCHEDULES", "schedule"]

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
