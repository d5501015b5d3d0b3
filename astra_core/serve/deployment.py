"""A serving deployment and its memory: weights, KV cache blocks and the activation peak per GPU.

One replica runs the model on ``tp`` GPUs (tensor parallelism: attention heads, MLP
columns and the vocabulary split as in Megatron-LM, which vLLM's parallel layers follow;
routed experts split over the same GPUs, whole under expert parallelism), or on ``dp``
data-parallel engines of ``tp`` GPUs whose routed experts spread over all of them, and a
deployment runs ``replicas`` of them behind one router.

Memory per GPU, as vLLM's v1 worker sizes its KV cache (``gpu_worker.py``
``determine_available_memory``: the memory the instance may use less what its profiling
pass adds to the memory at start-up, which already holds the CUDA context):

    KV cache = total HBM x gpu_memory_utilization - weights - activation peak - non-torch

* **weights**: every parameter of the replica's share (:func:`weight_bytes`), 2 bytes in
  BF16, 1 in FP8 (the norms and the router stay 16-bit: counted at 2);
* **activation peak**: what the profiling forward pass of ``max_num_batched_tokens``
  tokens holds at once (:func:`activation_peak_bytes`);
* **non-torch**: what the profiling pass adds outside PyTorch's allocator (libraries'
  workspaces, NCCL's buffers; the CUDA context is there before): 0.16 GiB on one H100
  (vLLM PR #12126's profiling log) and 0.20 GiB per GPU with tensor parallelism (the
  tensor-parallel workers' log in vLLM PR #14447). The 1.79 / 3.58 GiB of vLLM PR #10511's log counted
  the CUDA context too, which vLLM's profiling has left out since PR #12126;
* **KV cache**: ``2 (K and V) x layers x (kv_heads / tp, at least 1: vLLM replicates a
  KV head where TP passes their count) x head_dim x kv bytes`` per token, in blocks of
  ``block_size`` tokens (vLLM's default 16); under MLA one latent of
  ``kv_lora_rank + rope_head_dim`` per token and layer, on every TP rank.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from astra_core.config.gpus import GPUSpec
from astra_core.errors import ConfigError
from astra_core.workload.generators.models import ModelConfig

__all__ = [
    "Deployment",
    "activation_peak_bytes",
    "engine_defaults",
    "kv_blocks",
    "kv_bytes_per_token",
    "weight_bytes",
]

GiB = float(1 << 30)
#: Non-torch memory per GPU [bytes] the profiling pass adds, without / with tensor
#: parallelism: vLLM PR #12126's log on one H100 ("non_torch_memory takes 0.16GiB") and
#: PR #14447's log of its tensor-parallel workers ("non_torch_memory takes 0.20GiB").
NON_TORCH_BYTES = (0.16 * GiB, 0.20 * GiB)
#: Bytes per element of the sampler's logits (vLLM computes them in FP32).
LOGIT_BYTES = 4


@dataclass(frozen=True)
class Deployment:
    """What serves: ``model`` on ``tp`` GPUs of type ``gpu`` per replica, ``replicas`` of
    them; ``precision``: ``bf16`` or ``fp8`` weights and GEMMs; ``kv_bytes``: bytes per KV
    cache element (2: BF16; 1: an FP8 KV cache); the engine's limits ``block_size``
    [tokens], ``max_num_batched_tokens`` (the token budget of one step), ``max_num_seqs``
    (requests in one step) and ``gpu_memory_utilization`` (the share of HBM the engine
    may use); ``chunked_prefill``: a prompt may be split over steps (vLLM v1's default);
    ``expert_parallel``: a replica's GPUs hold whole routed experts, ``1/tp`` of them each
    (vLLM's ``--enable-expert-parallel``), rather than every expert's ``1/tp``; ``dp``:
    data-parallel attention, ``dp`` engines of ``tp`` GPUs per replica (each its own
    scheduler, requests and KV cache) whose MoE layers share the experts over all
    ``dp x tp`` GPUs and step together (vLLM's ``--data-parallel-size`` with expert
    parallelism; :meth:`.step_time.StepClock.group_step_ns`);
    ``prefix_caching``: requests reuse the cached blocks of a prefix they share
    (:mod:`.prefix_cache`; on by default in vLLM v1); ``no_evict``: TensorRT-LLM's
    default capacity policy (``GUARANTEED_NO_EVICT``) instead of vLLM's preemption: a
    request is admitted only with the blocks for its whole prompt and output reserved,
    and a started request is never preempted (:mod:`.scheduler`)."""

    model: ModelConfig
    gpu: GPUSpec
    tp: int = 1
    replicas: int = 1
    dp: int = 1
    precision: str = "bf16"
    kv_bytes: int = 2
    block_size: int = 16
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 256
    gpu_memory_utilization: float = 0.9
    chunked_prefill: bool = True
    expert_parallel: bool = False
    prefix_caching: bool = True
    no_evict: bool = False

    @property
    def gpus(self) -> int:
        return self.tp * self.dp * self.replicas

    @property
    def engines(self) -> int:
        """Engines (schedulers with their own requests and KV caches): ``dp`` per replica."""
        return self.dp * self.replicas

    @property
    def kv_heads_per_gpu(self) -> int:
        """KV heads one GPU holds: ``kv_heads / tp``, at least one (replicated)."""
        return max(1, self.model.kv // self.tp)


def engine_defaults(gpu: GPUSpec) -> tuple[int, int]:
    """vLLM 0.11's ``max_num_batched_tokens`` and ``max_num_seqs`` for its OpenAI server on
    ``gpu`` (``vllm/engine/arg_utils.py``, ``_set_default_args``): 8,192 and 1,024 on GPUs
    of at least 70 GiB other than the A100, 2,048 and 256 otherwise."""
    large = gpu.memory_gb >= 70 and "A100" not in gpu.name.upper()
    return (8192, 1024) if large else (2048, 256)


def weight_bytes(d: Deployment) -> float:
    """Weights one GPU holds [bytes] (module docstring)."""
    m, t = d.model, d.tp
    per_param = 1.0 if d.precision == "fp8" else 2.0
    matrices = m.vocab * m.hidden * (1 if m.tie_embeddings else 2) / t
    for layer in range(m.layers):
        matrices += m.attention_params_on(t)
        if m.is_moe_layer(layer):
            routed = m.experts / (t * d.dp) if d.expert_parallel else m.experts / t
            matrices += routed * m.expert_params() + m.shared_experts * m.expert_params() / t
        else:
            matrices += m.dense_mlp_params() / t
    small = m.layers * m.norm_params() + m.hidden  # norms, replicated
    small += sum(m.hidden * m.experts for layer in range(m.layers) if m.is_moe_layer(layer))  # routers
    return matrices * per_param + small * 2.0


def kv_bytes_per_token(d: Deployment) -> float:
    """KV cache bytes one token takes on one GPU, all layers (module docstring)."""
    m = d.model
    if m.mla:
        return m.layers * (m.kv_lora_rank + m.rope_head_dim) * d.kv_bytes
    return 2.0 * m.layers * d.kv_heads_per_gpu * m.hd * d.kv_bytes


def activation_peak_bytes(d: Deployment) -> float:
    """The profiling pass's activation peak per GPU [bytes]: at ``max_num_batched_tokens``
    tokens, the MLP's widest moment (its up projection's output, the activation's output
    beside it, the residual stream and the layer's input and output), and the sampler's
    FP32 logits of ``max_num_seqs`` rows beside the hidden states, whichever is larger."""
    m, t, n = d.model, d.tp, d.max_num_batched_tokens
    width = (m.expert_ffn_hidden * m.top_k if m.experts else m.ffn_hidden) / t
    ups = m.mlp_matrices - 1
    mlp = n * (ups * width + width) * 2.0
    hidden = 3 * n * m.hidden * 2.0
    logits = d.max_num_seqs * m.vocab / t * LOGIT_BYTES * 2  # the logits and their softmax
    return max(mlp, logits) + hidden


def kv_blocks(d: Deployment) -> int:
    """KV cache blocks of one GPU (all of a replica's GPUs hold the same count). Raises
    ConfigError (one line, with the figures) when the weights and the activation peak
    leave no room for one block."""
    usable = d.gpu.hbm_bytes * d.gpu_memory_utilization
    weights, peak = weight_bytes(d), activation_peak_bytes(d)
    non_torch = NON_TORCH_BYTES[1 if d.tp > 1 else 0]
    left = usable - weights - peak - non_torch
    block = kv_bytes_per_token(d) * d.block_size
    if left < block:
        raise ConfigError(
            f"deployment: {d.model.name} at TP {d.tp} does not fit a {d.gpu.name}: weights "
            f"{weights / GiB:.1f} GiB, activation peak {peak / GiB:.1f} GiB and non-torch "
            f"{non_torch / GiB:.2f} GiB leave {max(left, 0) / GiB:.2f} GiB of the "
            f"{usable / GiB:.1f} GiB the engine may use for the KV cache"
        )
    return math.floor(left / block)
