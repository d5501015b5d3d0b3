"""Which experts a mixture-of-experts router sends its tokens to: per MoE layer, each
expert's share of the (token, expert) assignments (``astra gen llm --moe-routing``).

* ``balanced`` (the default): every expert ``1 / E``, as Megatron-core's force-balanced
  routing (``--moe-router-force-load-balancing``) that the published benchmark recipes
  use.
* ``zipf:S``: per layer the experts in an order drawn from ``--moe-routing-seed`` and
  the layer, the ``j``-th in that order taking a share proportional to ``(j + 1)^-S``
  (a Zipf law, a common model of skewed popularity; ``S`` is the user's choice, not a
  measured value; ``S = 0`` is balanced).
* a JSON file ``{"layers": [[w_1, ..., w_E], ...]}``: one list of E non-negative
  weights per MoE layer of the model, in layer order, or a single list for every MoE
  layer (token counts per expert that a router recorded, for example Megatron-core's
  per-layer expert-load logging), normalized here.

A rank of expert-parallel index ``q`` holds experts ``q E/ep .. (q + 1) E/ep - 1``
(Megatron-core's contiguous placement); its share of a layer's assignments is the sum
of theirs (:func:`rank_shares`).

With a capacity factor ``cf`` (``--moe-capacity-factor``, Megatron-core's
``--moe-expert-capacity-factor``) each rank keeps at most ``ceil(A / E x cf)`` of its
``A`` assignment rows per expert (``moe_utils.get_capacity`` on the rank's tokens x
top-k) and drops the rest; with ``--moe-pad-to-capacity``
(``--moe-pad-expert-input-to-capacity``) every expert gets exactly that many
(:func:`rows_to_ranks`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from astra_core.errors import ConfigError

__all__ = [
    "BALANCED",
    "check_routing",
    "expert_shares",
    "load_summary",
    "rank_shares",
    "rows_by_layer",
    "rows_to_ranks",
]

BALANCED = "balanced"
_OPTION = "--moe-routing"


def check_routing(routing: str) -> None:
    """Raise ConfigError unless ``routing`` is ``balanced``, ``zipf:S`` (0 <= S <= 10)
    or an existing file."""
    if routing == BALANCED or Path(routing).is_file():
        return
    if routing.startswith("zipf:"):
        _zipf_exponent(routing)
        return
    raise ConfigError(f"{_OPTION} {routing!r}: expected balanced, zipf:S or a JSON file of expert loads")


def _zipf_exponent(routing: str) -> float:
    try:
        exponent = float(routing[len("zipf:") :])
    except ValueError:
        exponent = math.nan
    if not 0 <= exponent <= 10:
        raise ConfigError(f"{_OPTION} {routing!r}: zipf:S needs an exponent S in [0, 10]")
    return exponent


def expert_shares(
    routing: str, experts: int, moe_layers: list[int], seed: int
) -> dict[int, np.ndarray] | None:
    """Per MoE layer (``moe_layers``: the model's MoE layer indices, ascending) each
    expert's share of its assignments (``experts`` values summing to 1); None when
    balanced. Raises ConfigError naming the option or the file and the key."""
    if routing == BALANCED:
        return None
    if routing.startswith("zipf:") and not Path(routing).is_file():
        exponent = _zipf_exponent(routing)
        out = {}
        for layer in moe_layers:
            order = np.random.default_rng([seed, layer]).permutation(experts)
            weights = np.empty(experts)
            weights[order] = (np.arange(experts) + 1.0) ** -exponent
            out[layer] = weights / weights.sum()
        return out
    return _recorded(Path(routing), experts, moe_layers)


def _recorded(path: Path, experts: int, moe_layers: list[int]) -> dict[int, np.ndarray]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: expected a JSON object with a 'layers' list ({exc})") from None
    layers = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(layers, list) or len(layers) not in (1, len(moe_layers)):
        raise ConfigError(
            f"{path}: layers: expected one list of expert loads, or one per MoE layer ({len(moe_layers)})"
        )
    out = {}
    for i, layer in enumerate(moe_layers):
        row = layers[0] if len(layers) == 1 else layers[i]
        ok = isinstance(row, list) and len(row) == experts
        weights = np.array(row, dtype=float) if ok and all(_number(v) for v in row) else None
        if weights is None or not np.all(np.isfinite(weights)) or (weights < 0).any() or weights.sum() <= 0:
            raise ConfigError(
                f"{path}: layers[{i if len(layers) > 1 else 0}]: expected {experts} loads >= 0, not all 0"
            )
        out[layer] = weights / weights.sum()
    return out


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def rank_shares(shares: np.ndarray, ep: int) -> np.ndarray:
    """Each expert-parallel rank's share of a layer's assignments: the sum of its
    ``len(shares) / ep`` contiguous experts'."""
    return shares.reshape(ep, -1).sum(axis=1)


def rows_to_ranks(
    shares: np.ndarray, assigned: float, ep: int, capacity_factor: float | None = None, pad: bool = False
) -> np.ndarray:
    """The assignment rows every rank sends to each of the ``ep`` expert-parallel
    indices: of its ``assigned`` rows, ``shares[e]`` go to expert ``e``, at most the
    capacity with ``capacity_factor`` (exactly it with ``pad``), summed over each
    index's contiguous experts."""
    per_expert = assigned * shares
    if capacity_factor is not None:
        capacity = math.ceil(assigned / len(shares) * capacity_factor)
        per_expert = np.full(len(shares), float(capacity)) if pad else np.minimum(per_expert, capacity)
    return rank_shares(per_expert, ep)


def rows_by_layer(
    routing: str,
    seed: int,
    experts: int,
    moe_layers: list[int],
    assigned: float,
    ep: int,
    capacity_factor: float | None = None,
    pad: bool = False,
) -> dict[int, np.ndarray]:
    """Per MoE layer (``moe_layers``), the assignment rows every rank sends each
    expert-parallel index (:func:`rows_to_ranks`, ``assigned`` rows per rank); empty when
    routing is balanced and dropless (every index ``assigned / ep``). Reads a loads file
    once. Raises ConfigError as :func:`expert_shares`."""
    if routing == BALANCED and capacity_factor is None:
        return {}
    shares = expert_shares(routing, experts, moe_layers, seed)
    even = np.full(experts, 1.0 / experts)
    return {
        layer: rows_to_ranks(even if shares is None else shares[layer], assigned, ep, capacity_factor, pad)
        for layer in moe_layers
    }


def load_summary(
    routing: str, rows: dict[int, np.ndarray], assigned: float, capacity_factor: float | None, pad: bool
) -> str:
    """One line on what routing and capacity do to a step's MoE layers (``rows``:
    :func:`rows_by_layer`, not empty): the busiest expert-parallel rank's rows against the
    mean (the layer where that is largest) and, with a capacity, the share of assignments
    dropped (``assigned`` rows per rank)."""
    worst, worst_layer, dropped = 1.0, min(rows), 0.0
    for layer, sent in sorted(rows.items()):
        if sent.max() / sent.mean() > worst:
            worst, worst_layer = float(sent.max() / sent.mean()), layer
        dropped += max(0.0, 1.0 - float(sent.sum()) / assigned) / len(rows)
    line = f"MoE routing {routing}: the busiest expert-parallel rank gets {worst:.2f}x the mean rows"
    line += f" (layer {worst_layer})" if worst > 1.0 else ""
    if capacity_factor is not None:
        line += f"; capacity factor {capacity_factor:g} drops {100 * dropped:.1f} % of assignments"
        line += ", pads every expert to its capacity" if pad else ""
    return line
