"""The layouts ``astra plan`` considers: every parallel plan of a model on N GPUs that
Megatron-core can run, pruned by what does not divide and by memory.

A :class:`Layout` fixes TP, CP, PP, virtual stages, EP, the micro-batch, recomputation
and the ZeRO stage; DP = N / (TP CP PP). Megatron-core's rules (``arguments.py`` and
``parallel_state.py``): TP divides the attention heads and the key/value heads, the
FFN width and (for MoE) the expert width; CP splits each sequence into 2 CP chunks
(its load-balanced causal split); PP x V divides the layers (or the layers plus the
embedding and the loss counted as one layer each, ``--account-for-*-in-pipeline-split``:
a virtual stage may then hold the embedding or the loss alone, as Megatron-core's
``transformer_block.py`` builds any number of layers from 0);
the global batch is a multiple of DP x micro-batch; the interleaved schedule needs the
micro-batches to be a multiple of PP; EP divides the experts and the ranks experts are
folded over (TP x CP x DP, expert-tensor parallelism 1). Sequence parallelism and
Transformer Engine's TP communication overlap go with TP > 1, Megatron-core's
distributed optimizer (ZeRO 1) unless ZeRO 3 is asked for, its weight all-gather
overlapped with the next forward pass where DP > 1 (Megatron-Bridge's default; a base
plan's choice where one is given).

:func:`layouts` returns the layouts that fit the GPU's HBM
(:mod:`astra_core.workload.generators.llm_memory`) and counts what it pruned and why.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from astra_core.errors import ConfigError
from astra_core.run_digest import InputDigests
from astra_core.workload.generators.gpus import GPUSpec
from astra_core.workload.generators.llm import LLMConfig
from astra_core.workload.generators.llm_memory import StageMemory, stage_memory
from astra_core.workload.generators.llm_size import check_plan
from astra_core.workload.generators.models import ModelConfig

__all__ = ["Layout", "Limits", "Space", "identity", "layouts"]

RECOMPUTES = ("none", "selective", "full")
#: Fewest tokens of a sequence a context-parallel rank keeps unless ``max_cp`` says
#: otherwise: the published recipes split 8K sequences 2 ways (Megatron-Bridge's Llama 3.1
#: 405B) and 128K ones 16 ways (the Llama 3 paper's long-context stage), 4K-8K per rank.
CP_MIN_TOKENS = 4096


@dataclass(frozen=True)
class Layout:
    """One parallel plan: sizes of each parallelism, micro-batch [sequences], recomputation
    (``none``, ``selective``: Megatron-core's default modules, ``full``), ZeRO stage, and
    whether the embedding and the loss count as layers in the pipeline split."""

    tp: int
    cp: int
    pp: int
    vp: int
    dp: int
    ep: int
    micro_batch: int
    recompute: str = "none"
    zero: int = 1
    edges_in_split: bool = False

    def short(self) -> str:
        """The layout in a few characters: ``TP4 CP1 PP2 V8 DP128 MBS1`` (EP, recomputation
        and ZeRO stage only where they are not 1, none and 1)."""
        text = f"TP{self.tp} CP{self.cp} PP{self.pp} V{self.vp} DP{self.dp} MBS{self.micro_batch}"
        if self.ep > 1:
            text += f" EP{self.ep}"
        if self.recompute != "none":
            text += f" {self.recompute}"
        return text + (f" ZeRO{self.zero}" if self.zero != 1 else "")

    def label(self) -> str:
        parts = [f"TP {self.tp}", f"CP {self.cp}", f"PP {self.pp}", f"V {self.vp}", f"DP {self.dp}"]
        if self.ep > 1:
            parts.append(f"EP {self.ep}")
        parts += [f"MBS {self.micro_batch}", f"recompute {self.recompute}", f"ZeRO {self.zero}"]
        return ", ".join(parts)


@dataclass(frozen=True)
class Limits:
    """What the search may choose; None: any value the rules allow.

    ``tp``, ``cp``, ``pp``, ``vp``, ``ep``, ``micro_batch``: fixed values; ``max_tp``
    (default: the NVLink domain), ``max_pp``, ``max_vp``, ``max_cp`` (default: each
    context-parallel rank keeps at least :data:`CP_MIN_TOKENS` tokens of a sequence):
    upper bounds;
    ``micro_batches``: the micro-batch sizes tried; ``recomputes``, ``zeros``: the
    recomputation and ZeRO choices tried; ``reserve_bytes``: HBM kept free of what the
    memory model counts (it counts PyTorch's allocator: the CUDA context, NCCL's buffers
    and the allocator's fragmentation take the rest)."""

    tp: int | None = None
    cp: int | None = None
    pp: int | None = None
    vp: int | None = None
    ep: int | None = None
    micro_batch: int | None = None
    max_tp: int | None = None
    max_pp: int = 32
    max_vp: int = 8
    max_cp: int | None = None
    micro_batches: tuple[int, ...] = (1, 2, 4)
    recomputes: tuple[str, ...] = ("none", "full")
    zeros: tuple[int, ...] = (1,)
    reserve_bytes: float = 0.0


@dataclass(frozen=True)
class Space:
    """A search's fixed inputs: model, GPU, GPU count, NVLink domain size, global batch
    [sequences], sequence length [tokens], precision and FP8 recipe, network dimensions.

    ``base``: a plan whose other settings every layout keeps (attention kernels, DDP,
    gradient precision, the modules selective recomputation recomputes, the MoE
    dispatcher and routing, ...: what the software of a published run had); None:
    Megatron-core's current defaults (flash attention, BF16 gradient reduction, the
    all-to-all dispatcher). A base plan with TP > 1 also gives whether sequence
    parallelism and TP overlap go with TP; one without TP leaves them
    on wherever TP > 1. The base's userbuffers table goes with TP overlap, its FP8
    attention with layouts without context parallelism."""

    model: ModelConfig
    gpu: GPUSpec
    gpus: int
    domain: int
    global_batch: int
    seq_len: int
    precision: str = "bf16"
    fp8_recipe: str = "tensorwise"
    dims: tuple[int, ...] = ()
    limits: Limits = field(default_factory=Limits)
    base: LLMConfig | None = None

    def microbatches(self, layout: Layout) -> int:
        """Micro-batches per step of ``layout``: global batch / (DP x micro-batch)."""
        return self.global_batch // (layout.dp * layout.micro_batch)

    def config(self, layout: Layout) -> LLMConfig:
        """The generator's plan of ``layout`` (see the module docstring and ``base``)."""
        moe = self.model.experts > 0
        base = self.base
        selective: tuple[str, ...] = ("moe_act", "layernorm") if moe else ("core_attn",)
        if base is not None:
            selective = base.recompute_modules
        kept = base is not None and base.tp > 1  # the base plan says what goes with TP
        overlap = layout.tp > 1 and (not kept or bool(base and base.tp_comm_overlap))
        chosen: dict[str, Any] = dict(
            model=self.model,
            gpu=self.gpu,
            dp=layout.dp,
            tp=layout.tp,
            pp=layout.pp,
            cp=layout.cp,
            ep=layout.ep,
            etp=1 if moe else None,
            micro_batch=layout.micro_batch,
            microbatches=None,
            global_batch=self.global_batch,
            seq_len=self.seq_len,
            dims=list(self.dims) or None,
            virtual_stages=layout.vp,
            first_stage_layers=None,
            last_stage_layers=None,
            pipeline_layout=None,
            account_for_embedding=layout.edges_in_split,
            account_for_loss=layout.edges_in_split,
            sequence_parallel=layout.tp > 1 and (not kept or bool(base and base.sequence_parallel)),
            tp_comm_overlap=overlap,
            # the base's userbuffers table where the layout overlaps, else none; its FP8
            # attention where the layout has no context parallelism (not modelled with it)
            tp_comm_overlap_cfg=base.tp_comm_overlap_cfg if base is not None and overlap else None,
            fp8_attention=base is not None and base.fp8_attention and layout.cp == 1,
            zero=layout.zero,
            # the distributed optimizer's weight all-gather in the next forward pass: the
            # base's choice, else Megatron-Bridge's (where DP > 1); FP8 weights gathered in
            # FP8 where the base asks and the layout shards
            overlap_param_gather=layout.zero in (1, 2)
            and (base.overlap_param_gather if base is not None else layout.dp > 1),
            fp8_param_gather=base is not None and base.fp8_param_gather and layout.zero >= 1,
            recompute=layout.recompute,
            # the modules are selective recomputation's; without it the generator's default
            recompute_modules=selective if layout.recompute == "selective" else LLMConfig.recompute_modules,
            precision=self.precision,
            fp8_recipe=self.fp8_recipe,
        )
        if base is None:
            return LLMConfig(grad_reduce_in_bf16=True, **chosen)
        return replace(base, **chosen)


def _powers_of_two(limit: int) -> list[int]:
    out, x = [], 1
    while x <= limit:
        out.append(x)
        x *= 2
    return out


def _divisors(n: int, limit: int) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def _tensor_sizes(space: Space) -> list[int]:
    m, lim = space.model, space.limits
    top = lim.max_tp or space.domain
    widths = [m.heads, m.kv, m.ffn_hidden] + ([m.expert_ffn_hidden] if m.experts else [])
    sizes = [t for t in _powers_of_two(top) if all(w % t == 0 for w in widths if w)]
    return [t for t in sizes if lim.tp in (None, t)]


def _pipeline_splits(space: Space, pp: int) -> list[tuple[int, bool]]:
    """(virtual stages, edges counted) choices for ``pp`` stages."""
    layers, lim = space.model.layers, space.limits
    out = []
    for vp in range(1, lim.max_vp + 1):
        if lim.vp not in (None, vp) or (vp > 1 and pp == 1):
            continue
        if layers % (pp * vp) == 0:
            out.append((vp, False))
        elif pp > 1 and (layers + 2) % (pp * vp) == 0:
            out.append((vp, True))
    return out


def _expert_sizes(space: Space, folded_ranks: int) -> list[int]:
    m, lim = space.model, space.limits
    if not m.experts:
        return [1]
    sizes = [e for e in _powers_of_two(m.experts) if m.experts % e == 0 and folded_ranks % e == 0]
    return [e for e in sizes if lim.ep in (None, e)]


def _shapes(space: Space, pruned: Counter) -> list[Layout]:
    """Every (TP, CP, PP, V, DP, EP, micro-batch) the rules allow."""
    lim, n, seq = space.limits, space.gpus, space.seq_len
    out = []
    for tp in _tensor_sizes(space):
        max_cp = lim.max_cp if lim.max_cp is not None else max(1, seq // CP_MIN_TOKENS)
        for cp in _powers_of_two(max_cp):
            if lim.cp not in (None, cp) or seq % (2 * cp) or n % (tp * cp):
                continue
            for pp in _divisors(n // (tp * cp), lim.max_pp):
                if lim.pp not in (None, pp):
                    continue
                splits = _pipeline_splits(space, pp)
                if not splits:
                    pruned["layers do not divide over the pipeline stages"] += 1
                    continue
                dp = n // (tp * cp * pp)
                for mbs in lim.micro_batches if lim.micro_batch is None else (lim.micro_batch,):
                    if space.global_batch % (dp * mbs):
                        pruned["global batch not a multiple of DP x micro-batch"] += 1
                        continue
                    mb = space.global_batch // (dp * mbs)
                    for vp, edges in splits:
                        if vp > 1 and mb % pp:
                            pruned["interleaving needs micro-batches a multiple of PP"] += 1
                            continue
                        for ep in _expert_sizes(space, tp * cp * dp):
                            out.append(Layout(tp, cp, pp, vp, dp, ep, mbs, edges_in_split=edges))
    return out


def layouts(space: Space) -> tuple[list[tuple[Layout, list[StageMemory]]], Counter]:
    """The layouts that divide and fit in the GPU's HBM, with their memory per stage, and
    a count of the pruned ones by reason. Raises ConfigError (one line) when nothing divides."""
    pruned: Counter = Counter()
    shapes = _shapes(space, pruned)
    if not shapes:
        raise ConfigError(
            f"no parallel layout of {space.model.name} divides over {space.gpus} GPUs with global batch "
            f"{space.global_batch} and sequence {space.seq_len} ({reasons(pruned) or 'no candidate at all'})"
        )
    limit = space.gpu.hbm_bytes - space.limits.reserve_bytes
    over = "over the GPU's HBM" + (" less the reserve" if space.limits.reserve_bytes else "")
    fit = []
    for shape in shapes:
        for recompute in space.limits.recomputes:
            for zero in space.limits.zeros:
                layout = replace(shape, recompute=recompute, zero=zero)
                try:
                    cfg, microbatches = space.config(layout), space.microbatches(layout)
                    if _past_trace_limits(cfg, microbatches):
                        pruned["a step past astra's trace limits (micro-batches x layers)"] += 1
                        continue
                    memory = stage_memory(cfg, microbatches)
                except ConfigError as exc:
                    pruned[f"not a plan astra can generate: {str(exc).split(':')[0]}"] += 1
                    continue
                if max(m.peak_bytes for m in memory) > limit:
                    pruned[over] += 1
                    continue
                fit.append((layout, memory))
    return fit, pruned


def _past_trace_limits(cfg: LLMConfig, microbatches: int) -> bool:
    """Would ``cfg``'s step of ``microbatches`` pass the generator's node limits
    (:func:`~astra_core.workload.generators.llm_size.check_plan`)? Asked before the memory
    model walks the schedule micro-batch by micro-batch: a global batch of 10^12
    sequences must be refused, not walked."""
    try:
        check_plan(cfg, microbatches)
    except ConfigError:
        return True
    return False


def reasons(pruned: Counter) -> str:
    """Pruned layouts as one line, most first: ``246 over the GPU's HBM; 36 ...``."""
    return "; ".join(f"{n} {why}" for why, n in pruned.most_common())


#: :class:`LLMConfig` fields added after searches were kept: at their default they leave
#: a key as it was (a kept search asked the same question), another value keys another.
LATER_FIELDS = ("cp_comm_type",)


def identity(value: Space | LLMConfig, digests: InputDigests) -> str:
    """``repr(value)`` with each file it reads named by the digest of its bytes, not its
    path: the GPU's measured GEMM table (``gemm_table``) and a recorded MoE routing
    (``moe_routing``), a base plan's too; the :data:`LATER_FIELDS` at their defaults
    left out. What keys a search or a layout's run: the same wherever the files lie,
    another once a file's content changes."""
    configs: list[Any] = [value, value.base] if isinstance(value, Space) else [value]
    files = {c.gpu.gemm_table for c in configs if c is not None}
    files |= {c.moe_routing for c in configs if isinstance(c, LLMConfig) and Path(c.moe_routing).is_file()}
    text = repr(value)
    for name in LATER_FIELDS:
        text = text.replace(f", {name}={getattr(LLMConfig, name)!r}", "")
    for path in sorted((f for f in files if f is not None), key=len, reverse=True):
        text = text.replace(repr(path), repr(f"file {digests.file(path)}"))
    return text
