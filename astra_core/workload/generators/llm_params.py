"""Which layers and how many parameters one pipeline stage of ``astra gen llm`` holds.

Shared by the stage's program (:mod:`.llm_stage`) and its memory (:mod:`.llm_memory`).
Parameter counts are elements on one rank: matrices split over the T tensor-parallel
ranks (routed experts' over the expert-tensor-parallel ranks, and over the E
expert-parallel ranks by expert), norms and routers whole (Megatron-LM's layout,
Shoeybi et al. 2019; Megatron-core's MoE layer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from astra_core.workload.generators.layout import experts_folded
from astra_core.workload.generators.models import ModelConfig
from astra_core.workload.generators.pipeline import stage_layers

if TYPE_CHECKING:
    from astra_core.workload.generators.llm import LLMConfig

__all__ = [
    "StageParams",
    "dense_data_parallel",
    "expert_data_parallel",
    "layer_params",
    "stage_params",
    "virtual_stage_starts",
]


def layer_params(model: ModelConfig, layer: int, t: int, ep: int, etp: int) -> tuple[float, float]:
    """(dense, expert) parameters of one layer on one rank: sharded matrices / t (routed
    experts' / ``etp``, and 1/``ep`` of the experts), norms and the router whole."""
    dense = model.attention_params_on(t) + model.norm_params()
    if model.is_moe_layer(layer):
        dense += model.shared_experts * model.expert_params() / t + model.hidden * model.experts
        return dense, model.experts / ep * model.expert_params() / etp
    return dense + model.dense_mlp_params() / t, 0.0


def dense_data_parallel(cfg: LLMConfig) -> int:
    """Ranks of a stage holding the same dense weights: D x C. Megatron-core reduces their
    gradients and shards the distributed optimizer over the data-parallel group with
    context parallelism (``get_data_parallel_group(with_context_parallel=True)``)."""
    return cfg.dp * cfg.cp


def expert_data_parallel(cfg: LLMConfig) -> int:
    """Ranks of a stage holding the same experts: T x C x D / E under MoE parallel folding
    (experts carved from the stage's T x C x D ranks), else D / E (:mod:`.layout`)."""
    if experts_folded(cfg.etp, cfg.tp, cfg.cp):
        return cfg.tp * cfg.cp * cfg.dp // cfg.ep
    return cfg.dp // cfg.ep


def virtual_stage_starts(cfg: LLMConfig) -> list[int]:
    """First layer of each of the P x V virtual stages, and the layer count at the end
    (:func:`.pipeline.stage_layers` with the plan's options)."""
    counts = stage_layers(
        cfg.model.layers,
        cfg.pp,
        cfg.virtual_stages,
        cfg.first_stage_layers,
        cfg.last_stage_layers,
        embedding=cfg.account_for_embedding,
        loss=cfg.account_for_loss,
        layout=cfg.pipeline_layout,
        mtp=cfg.mtp_layers,
    )
    return [sum(counts[:q]) for q in range(len(counts) + 1)]


@dataclass(frozen=True)
class StageParams:
    """Pipeline stage ``p``'s layers and parameters on one of its ranks [elements].

    ``chunks[v]``: the layers of model chunk ``v`` (virtual stage ``v P + p``);
    ``mtp``: multi-token prediction's layers (numbered after the model's, last stage
    only); ``params[layer]`` = (dense, expert); ``edge``: the embedding (first stage),
    final norm and output projection (last stage; a copy of the embedding when tied
    and pipelined, none when tied on one stage; one more for multi-token prediction
    when pipelined and not tied); ``dense`` (``edge`` included) and ``expert``: totals.
    """

    chunks: tuple[range, ...]
    mtp: range
    params: dict[int, tuple[float, float]]
    edge: float
    dense: float
    expert: float

    @property
    def layers(self) -> list[int]:
        return [i for chunk in self.chunks for i in chunk]


def stage_params(cfg: LLMConfig, p: int) -> StageParams:
    """The layers and parameters of pipeline stage ``p`` (see :class:`StageParams`)."""
    model, T, P = cfg.model, cfg.tp, cfg.pp
    starts = virtual_stage_starts(cfg)
    chunks = tuple(range(starts[v * P + p], starts[v * P + p + 1]) for v in range(cfg.virtual_stages))
    first, last = p == 0, p == P - 1
    mtp = range(model.layers, model.layers + cfg.mtp_layers) if last else range(0)
    etp = 1 if experts_folded(cfg.etp, T, cfg.cp) else T
    params = {i: layer_params(model, i, T, cfg.ep, etp) for chunk in chunks for i in chunk}
    for i in mtp:  # its layer, the projection of 2h to h and the two norms
        d, e = layer_params(model, i, T, cfg.ep, etp)
        params[i] = (d + 2 * model.hidden * model.hidden / T + 2 * model.hidden, e)
    edge = 0.0
    if model.vocab:  # vocab 0: a bare stack of layers, no embedding or head
        table = model.vocab * model.hidden / T
        copy = bool(mtp) and P > 1 and not model.tie_embeddings
        edge = (table if first else 0.0) + (
            model.hidden + (table if not model.tie_embeddings or P > 1 else 0.0) + (table if copy else 0.0)
            if last
            else 0.0
        )
    dense = sum(v[0] for v in params.values()) + edge
    expert = sum(v[1] for v in params.values())
    return StageParams(chunks, mtp, params, edge, dense, expert)
