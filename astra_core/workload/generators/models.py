"""Transformer model shapes for the LLM generator, with presets from public configurations.

A :class:`ModelConfig` describes a decoder-only transformer: ``layers``,
``hidden`` size, attention ``heads`` (``kv_heads`` for grouped-query attention,
``head_dim`` when not ``hidden / heads``), the feed-forward width ``ffn_hidden``
(``mlp`` ``"gelu"``: two matrices, ``"swiglu"``: three), ``vocab`` size, and
optionally mixture-of-experts layers (``experts`` routed experts of width
``expert_ffn_hidden``, ``top_k`` per token, ``shared_experts``, the first
``dense_layers`` layers dense), and optionally sliding-window attention
(``sliding_window`` keys before each query, on every layer but each
``full_attention_every``-th, counted from 1: Megatron-core's ``window_size``
and ``window_attn_skip_freq``), and optionally multi-head latent attention
(DeepSeek-V2/V3, MLA: ``kv_lora_rank`` > 0; queries through a ``q_lora_rank``
bottleneck when > 0, keys and values up-projected per head from a ``kv_lora_rank``
latent, queries and keys of ``head_dim + rope_head_dim`` (a RoPE part of
``rope_head_dim`` shared by the heads' keys), values of ``v_head_dim``; the down
projections whole on every tensor-parallel rank, as Megatron-core's
``MLASelfAttention`` duplicates them). Parameter counts ignore biases. A
``vocab`` of 0 means a bare stack of layers (no embedding, final norm or output head).

Presets (sources in each entry): GPT-3 175B, Llama-3 8B / 70B / 405B,
Mixtral 8x7B, Qwen3 8B / 14B / 32B, 30B-A3B and 235B-A22B, GPT-OSS 120B and DeepSeek-V3 (its
multi-token-prediction module not included). Not modelled: Qwen3's per-head
query/key norms, GPT-OSS's attention sinks (one logit per head) and biases, and
MLA's rotary embedding of its RoPE parts, each an element-wise term beside the
attention kernel.
A user file (JSON or YAML) holds the same keys.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from typing import Any

from astra_core.config.issues import Problems, as_choice, as_flag, as_int, show
from astra_core.config.limits import MAX_INT32
from astra_core.errors import ConfigError
from astra_core.workload.generators.specs import read_spec

__all__ = ["MODELS", "ModelConfig", "load_model"]


@dataclass(frozen=True)
class ModelConfig:
    """Shape of a decoder-only transformer (see the module docstring). Sizes in elements."""

    name: str
    layers: int
    hidden: int
    heads: int
    ffn_hidden: int
    vocab: int
    seq_len: int = 2048
    kv_heads: int | None = None
    head_dim: int | None = None
    mlp: str = "gelu"
    tie_embeddings: bool = False
    experts: int = 0
    top_k: int = 0
    expert_ffn_hidden: int = 0
    shared_experts: int = 0
    dense_layers: int = 0
    sliding_window: int = 0
    full_attention_every: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    rope_head_dim: int = 0
    v_head_dim: int = 0
    source: str = ""

    @property
    def kv(self) -> int:
        return self.kv_heads or self.heads

    @property
    def hd(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def mla(self) -> bool:
        """Multi-head latent attention (see the module docstring)."""
        return self.kv_lora_rank > 0

    @property
    def qk_dim(self) -> int:
        """Width of a query or key head (MLA: with its RoPE part)."""
        return self.hd + self.rope_head_dim if self.mla else self.hd

    @property
    def v_dim(self) -> int:
        """Width of a value head."""
        return self.v_head_dim if self.mla else self.hd

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.mlp == "swiglu" else 2

    def is_moe_layer(self, layer: int) -> bool:
        return self.experts > 0 and layer >= self.dense_layers

    def window(self, layer: int) -> int:
        """Keys before each query that layer ``layer`` (from 0) attends to; 0: all."""
        if not self.sliding_window:
            return 0
        every = self.full_attention_every
        return 0 if every and (layer + 1) % every == 0 else self.sliding_window

    # -- parameter counts (elements) -----------------------------------------------
    def attention_params(self) -> int:
        """Q, K, V and output projections of one layer."""
        return int(self.attention_params_on(1))

    def attention_params_on(self, t: int) -> float:
        """One layer's attention parameters on one of ``t`` tensor-parallel ranks: the
        projections split by heads; MLA's down projections and latent norms whole."""
        if not self.mla:
            return self.hidden * self.hd * (2 * self.heads + 2 * self.kv) / t
        q_in = self.q_lora_rank or self.hidden
        whole = self.hidden * (self.kv_lora_rank + self.rope_head_dim) + self.kv_lora_rank
        if self.q_lora_rank:
            whole += self.hidden * self.q_lora_rank + self.q_lora_rank
        split = self.heads * (
            q_in * self.qk_dim + self.kv_lora_rank * (self.hd + self.v_dim) + self.v_dim * self.hidden
        )
        return whole + split / t

    def dense_mlp_params(self) -> int:
        return self.mlp_matrices * self.hidden * self.ffn_hidden

    def expert_params(self) -> int:
        """One routed or shared expert (a SwiGLU/GELU MLP of width expert_ffn_hidden)."""
        return self.mlp_matrices * self.hidden * self.expert_ffn_hidden

    def norm_params(self) -> int:
        """The two layer norms of one layer (replicated across tensor-parallel ranks)."""
        return 2 * self.hidden

    def layer_params(self, layer: int) -> int:
        total = self.attention_params() + self.norm_params()
        if self.is_moe_layer(layer):
            total += (self.experts + self.shared_experts) * self.expert_params() + self.hidden * self.experts
        else:
            total += self.dense_mlp_params()
        return total

    def embedding_params(self) -> int:
        """Input embedding plus output projection (once if tied) plus the final norm."""
        if not self.vocab:
            return 0
        return self.vocab * self.hidden * (1 if self.tie_embeddings else 2) + self.hidden

    def params(self) -> int:
        """All parameters."""
        return sum(self.layer_params(i) for i in range(self.layers)) + self.embedding_params()

    def active_params(self) -> int:
        """Parameters one token uses (MoE: top_k routed + shared experts)."""
        total = self.embedding_params()
        for i in range(self.layers):
            total += self.attention_params() + self.norm_params()
            if self.is_moe_layer(i):
                total += (
                    self.top_k + self.shared_experts
                ) * self.expert_params() + self.hidden * self.experts
            else:
                total += self.dense_mlp_params()
        return total


MODELS: dict[str, ModelConfig] = {
    m.name: m
    for m in (
        ModelConfig(
            "gpt3-175b",
            layers=96,
            hidden=12288,
            heads=96,
            ffn_hidden=4 * 12288,
            vocab=50257,
            seq_len=2048,
            mlp="gelu",
            tie_embeddings=True,
            source="Brown et al., 'Language Models are Few-Shot Learners', 2020, Table 2.1",
        ),
        ModelConfig(
            "llama3-8b",
            layers=32,
            hidden=4096,
            heads=32,
            kv_heads=8,
            ffn_hidden=14336,
            vocab=128256,
            seq_len=8192,
            mlp="swiglu",
            source="Meta Llama 3 8B config.json; Dubey et al., 'The Llama 3 Herd of Models', 2024, Table 3",
        ),
        ModelConfig(
            "llama3-70b",
            layers=80,
            hidden=8192,
            heads=64,
            kv_heads=8,
            ffn_hidden=28672,
            vocab=128256,
            seq_len=8192,
            mlp="swiglu",
            source="Meta Llama 3 70B config.json; 'The Llama 3 Herd of Models', Table 3",
        ),
        ModelConfig(
            "llama3-405b",
            layers=126,
            hidden=16384,
            heads=128,
            kv_heads=8,
            ffn_hidden=53248,
            vocab=128256,
            seq_len=8192,
            mlp="swiglu",
            source="'The Llama 3 Herd of Models', 2024, Table 3 (Llama 3.1 405B)",
        ),
        ModelConfig(
            "mixtral-8x7b",
            layers=32,
            hidden=4096,
            heads=32,
            kv_heads=8,
            ffn_hidden=14336,
            vocab=32000,
            seq_len=4096,
            mlp="swiglu",
            experts=8,
            top_k=2,
            expert_ffn_hidden=14336,
            source="Jiang et al., 'Mixtral of Experts', 2024, Table 1; Mixtral-8x7B config.json",
        ),
        ModelConfig(
            "deepseek-v3",
            layers=61,
            hidden=7168,
            heads=128,
            head_dim=128,
            ffn_hidden=18432,
            vocab=129280,
            seq_len=4096,
            mlp="swiglu",
            experts=256,
            top_k=8,
            expert_ffn_hidden=2048,
            shared_experts=1,
            dense_layers=3,
            q_lora_rank=1536,
            kv_lora_rank=512,
            rope_head_dim=64,
            v_head_dim=128,
            source="DeepSeek-AI, 'DeepSeek-V3 Technical Report', 2024, sec. 4.2; deepseek-ai/DeepSeek-V3 "
            "config.json (q_lora_rank, kv_lora_rank, qk_rope_head_dim, v_head_dim)",
        ),
        ModelConfig(
            "qwen3-8b",
            layers=36,
            hidden=4096,
            heads=32,
            kv_heads=8,
            head_dim=128,
            ffn_hidden=12288,
            vocab=151936,
            seq_len=4096,
            mlp="swiglu",
            source="Qwen/Qwen3-8B config.json; Qwen Team, 'Qwen3 Technical Report', 2025, Table 1",
        ),
        ModelConfig(
            "qwen3-14b",
            layers=40,
            hidden=5120,
            heads=40,
            kv_heads=8,
            head_dim=128,
            ffn_hidden=17408,
            vocab=151936,
            seq_len=4096,
            mlp="swiglu",
            source="Qwen/Qwen3-14B config.json; Qwen Team, 'Qwen3 Technical Report', 2025, Table 1",
        ),
        ModelConfig(
            "qwen3-32b",
            layers=64,
            hidden=5120,
            heads=64,
            kv_heads=8,
            head_dim=128,
            ffn_hidden=25600,
            vocab=151936,
            seq_len=4096,
            mlp="swiglu",
            source="Qwen/Qwen3-32B config.json; Qwen Team, 'Qwen3 Technical Report', 2025, Table 1",
        ),
        ModelConfig(
            "qwen3-30b-a3b",
            layers=48,
            hidden=2048,
            heads=32,
            kv_heads=4,
            head_dim=128,
            ffn_hidden=6144,
            vocab=151936,
            seq_len=4096,
            mlp="swiglu",
            experts=128,
            top_k=8,
            expert_ffn_hidden=768,
            source="Qwen/Qwen3-30B-A3B config.json; Qwen Team, 'Qwen3 Technical Report', 2025, Table 2",
        ),
        ModelConfig(
            "qwen3-235b-a22b",
            layers=94,
            hidden=4096,
            heads=64,
            kv_heads=4,
            head_dim=128,
            ffn_hidden=12288,
            vocab=151936,
            seq_len=4096,
            mlp="swiglu",
            experts=128,
            top_k=8,
            expert_ffn_hidden=1536,
            source="Qwen/Qwen3-235B-A22B config.json; 'Qwen3 Technical Report', 2025, Table 2",
        ),
        ModelConfig(
            "gpt-oss-120b",
            layers=36,
            hidden=2880,
            heads=64,
            kv_heads=8,
            head_dim=64,
            ffn_hidden=2880,
            vocab=201088,
            seq_len=4096,
            mlp="swiglu",
            experts=128,
            top_k=4,
            expert_ffn_hidden=2880,
            sliding_window=128,
            full_attention_every=2,
            source="openai/gpt-oss-120b config.json (layer_types alternate sliding and full attention, "
            "sliding_window 128); OpenAI, 'gpt-oss-120b & gpt-oss-20b Model Card', 2025",
        ),
    )
}


def load_model(spec: str | os.PathLike) -> ModelConfig:
    """A preset by name (see :data:`MODELS`) or a JSON/YAML file with ModelConfig keys.

    Raises ConfigError for an unknown name, an unreadable file, unknown or
    missing keys, or inconsistent shapes (heads not dividing hidden, MoE
    fields missing, ...).
    """
    data, path = read_spec(spec, MODELS, "--model", "model", ModelConfig, ", ".join(MODELS))
    if path is None:
        return data
    try:
        model = ModelConfig(**data)
    except TypeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return check_model(model, str(path))


#: Integer keys of a model file and their least value (None: may be absent).
_INT_KEYS = {
    "layers": 1,
    "hidden": 1,
    "heads": 1,
    "ffn_hidden": 1,
    "seq_len": 1,
    "vocab": 0,
    "experts": 0,
    "top_k": 0,
    "expert_ffn_hidden": 0,
    "shared_experts": 0,
    "dense_layers": 0,
    "sliding_window": 0,
    "full_attention_every": 0,
    "kv_heads": None,
    "head_dim": None,
    "q_lora_rank": 0,
    "kv_lora_rank": 0,
    "rope_head_dim": 0,
    "v_head_dim": 0,
}


def _checked_keys(model: ModelConfig, where: str) -> ModelConfig:
    """Every key's type and range, with the house checks (:mod:`astra_core.config.issues`),
    all problems at once. Integers (``10`` or ``10.0``, never ``true``) are at most
    :data:`~astra_core.config.limits.MAX_INT32`: Megatron-LM and Hugging Face configs
    keep these sizes in C ints, and sizes past them only overflow Chakra's
    int64 FLOP and byte counts. Returns the model with integral floats made ints."""
    problems = Problems(where)
    typed: dict[str, Any] = {}
    for key, least in _INT_KEYS.items():
        value = getattr(model, key)
        if value is None and least is None:
            continue
        value, error = as_int(value, minimum=1 if least is None else least, maximum=MAX_INT32)
        if error:
            problems.add(key, error)
        typed[key] = value
    tied, error = as_flag(model.tie_embeddings)
    if error:
        problems.add("tie_embeddings", error)
    mlp, error = as_choice(model.mlp, ["gelu", "swiglu"])
    if error:
        problems.add("mlp", error)
    if not isinstance(model.name, str):
        problems.add("name", f"expected a string, got {show(model.name)}")
    problems.raise_if_any()
    return replace(model, **typed, tie_embeddings=bool(tied), mlp=str(mlp))


def check_model(model: ModelConfig, where: str) -> ModelConfig:
    """Validate keys and shapes; raise ConfigError naming ``where`` and the key (one
    line per bad key). Returns the model (integral floats as ints)."""
    model = _checked_keys(model, where)
    if model.head_dim is None and model.hidden % model.heads:
        raise ConfigError(
            f"{where}: heads: {model.heads} does not divide hidden {model.hidden} (give head_dim)"
        )
    if model.heads % model.kv:
        raise ConfigError(f"{where}: kv_heads: {model.kv} does not divide heads {model.heads}")
    if model.mla and (model.v_head_dim < 1 or model.kv != model.heads):
        raise ConfigError(
            f"{where}: kv_lora_rank: multi-head latent attention needs v_head_dim >= 1 and a key "
            "and value head per query head (kv_heads absent or equal to heads)"
        )
    if model.experts:
        if not 1 <= model.top_k <= model.experts or model.expert_ffn_hidden < 1:
            raise ConfigError(
                f"{where}: experts: MoE models need 1 <= top_k <= experts and expert_ffn_hidden >= 1"
            )
        if not 0 <= model.dense_layers < model.layers:
            raise ConfigError(f"{where}: dense_layers: must be in 0..{model.layers - 1}")
    return model


def model_summary(model: ModelConfig) -> dict:
    """The config plus its parameter counts (for reports)."""
    out = asdict(model)
    out["params"] = model.params()
    out["active_params"] = model.active_params()
    return out
