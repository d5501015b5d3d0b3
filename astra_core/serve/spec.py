"""The serving spec (``astra serve SPEC.yaml``): a deployment, its engine's limits, the
network its tensor-parallel collectives cross, a router and the requests.

.. code-block:: yaml

    model: llama3-70b          # a preset or a model file
    gpu: H100                  # a preset or a GPU file
    precision: bf16            # bf16 or fp8 (weights and GEMMs)
    tp: 8                      # GPUs per replica
    dp: 1                      # a MoE under expert parallelism at tp 1: data-parallel engines
    replicas: 1
    network: network.yml       # tp NPUs; needed when tp > 1 (paths: from the spec's folder)
    system: system.json        # optional: default, every collective on NCCL's model of gpu
    backend: analytical        # optional: the network backend
    router: round-robin        # or least-loaded
    engine:                    # vLLM's engine arguments, each optional
      max_num_batched_tokens: 8192
      max_num_seqs: 1024
      block_size: 16
      gpu_memory_utilization: 0.9
      enable_chunked_prefill: true
      kv_cache_dtype: auto     # auto (the model's 16 bits) or fp8
      enable_expert_parallel: false   # MoE: whole experts per GPU instead of slices
      enable_prefix_caching: true     # requests reuse the blocks of a prefix they share
      capacity_policy: preempt        # or guaranteed_no_evict (TensorRT-LLM's default)
    requests:                  # a file ...
      file: requests.csv
    # requests: {count: 2000, rate: 8.0, lengths: azure-conv-2023, cv: 1.0, seed: 0}
    # requests: {count: 2000, rate: 8.0, lengths: [1024, 128]}
    # requests: {count: 500, concurrency: 64, lengths: [5000, 500]}  # 64 clients back to back
    #   warmup: 128            # the first requests sent are left out of the statistics
    # prefill: {tp: 4, replicas: 2, engine: {...}}   # disaggregated: these two pools
    # decode: {tp: 8, replicas: 1}                   # instead of tp, replicas, engine;
    # topology: fabric.txt     # the network (and topology) then carry the KV caches
    slo:                       # optional, for goodput [ms]
      ttft: 2000
      tpot: 100

Engine defaults are vLLM 0.11's for its OpenAI-compatible server
(:func:`~astra_core.serve.deployment.engine_defaults`; blocks of 16 tokens, 0.9 of the
GPU's memory, chunked prefill on).

:func:`load_serve_spec` reads and checks a spec: one ConfigError with a line per
problem, naming the spec and the key.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, model_validator

from astra_core.config.files import read_yaml, source_name
from astra_core.config.issues import Problems
from astra_core.config.model import ConfigModel, int_in, number_in, one_of, raise_problems, validate_mapping
from astra_core.serve.deployment import Deployment, engine_defaults
from astra_core.serve.engine import ROUTERS
from astra_core.serve.requests import LENGTH_DISTRIBUTIONS, Request, generate_requests, read_requests

__all__ = ["EngineSpec", "PoolSpec", "RequestsSpec", "ServeSpec", "load_serve_spec"]


class EngineSpec(ConfigModel):
    """vLLM's engine arguments (module docstring); None: vLLM's default for the GPU."""

    max_num_batched_tokens: Annotated[int, int_in(1, 1 << 24)] | None = None
    max_num_seqs: Annotated[int, int_in(1, 1 << 20)] | None = None
    block_size: Annotated[int, int_in(1, 1 << 16)] = 16
    gpu_memory_utilization: Annotated[float, number_in(0.0, 1.0, positive=True)] = 0.9
    enable_chunked_prefill: bool = True
    kv_cache_dtype: Annotated[str, one_of("auto", "fp8")] = "auto"
    enable_expert_parallel: bool = False
    enable_prefix_caching: bool = True
    capacity_policy: Annotated[str, one_of("preempt", "guaranteed_no_evict")] = "preempt"


class RequestsSpec(ConfigModel):
    """A request file, or the generator's settings (module docstring)."""

    file: str | None = None
    count: Annotated[int, int_in(1, 100_000_000)] | None = None
    rate: Annotated[float, number_in(positive=True)] | None = None
    lengths: str | list[Annotated[int, int_in(1, 1 << 24)]] | None = None
    cv: Annotated[float, number_in(positive=True, maximum=100.0)] = 1.0
    seed: Annotated[int, int_in(0)] = 0
    concurrency: Annotated[int, int_in(1, 100_000_000)] | None = None
    warmup: Annotated[int, int_in(0, 100_000_000)] = 0

    @model_validator(mode="after")
    def _one_source(self) -> RequestsSpec:
        generated = [k for k in ("count", "rate", "lengths") if getattr(self, k) is not None]
        if self.file is not None and generated:
            raise_problems([(generated[0], "give either file or the generator's count, rate and lengths")])
        needed = ("count", "lengths") if self.concurrency else ("count", "rate", "lengths")
        if self.file is None:
            raise_problems(
                [
                    (k, "missing: the generator needs count, rate and lengths (or give file)")
                    for k in needed
                    if k not in generated
                ]
            )
        if isinstance(self.lengths, str) and self.lengths not in LENGTH_DISTRIBUTIONS:
            known = ", ".join(sorted(LENGTH_DISTRIBUTIONS))
            raise_problems([("lengths", f"unknown distribution {self.lengths!r}; known: {known}")])
        if isinstance(self.lengths, list) and len(self.lengths) != 2:
            raise_problems(
                [
                    (
                        "lengths",
                        f"expected a distribution's name or [prompt, output] tokens, got {self.lengths}",
                    )
                ]
            )
        return self


class PoolSpec(ConfigModel):
    """A pool of replicas under disaggregation (``prefill`` or ``decode``)."""

    tp: Annotated[int, int_in(1, 1024)] = 1
    dp: Annotated[int, int_in(1, 1 << 16)] = 1
    replicas: Annotated[int, int_in(1, 1 << 20)] = 1
    engine: EngineSpec = Field(default_factory=EngineSpec)


class ServeSpec(ConfigModel):
    """The spec's keys (module docstring)."""

    model: str = Field(min_length=1)
    gpu: str = Field(min_length=1)
    precision: Annotated[str, one_of("bf16", "fp8")] = "bf16"
    tp: Annotated[int, int_in(1, 1024)] = 1
    dp: Annotated[int, int_in(1, 1 << 16)] = 1
    replicas: Annotated[int, int_in(1, 1 << 20)] = 1
    prefill: PoolSpec | None = None
    decode: PoolSpec | None = None
    network: str | dict[str, Any] | None = None  # a path, or (Python API) network.yml's keys
    topology: str | None = None
    system: str | None = None
    backend: str | None = None
    backend_config: str | None = None
    router: Annotated[str, one_of(*ROUTERS)] = "round-robin"
    engine: EngineSpec = Field(default_factory=EngineSpec)
    requests: RequestsSpec
    slo: dict[Annotated[str, one_of("ttft", "tpot", "e2e")], Annotated[float, number_in(positive=True)]] = (
        Field(default_factory=dict)
    )

    @model_validator(mode="after")
    def _network_for_tp(self) -> ServeSpec:
        problems: list[tuple[str | None, str]] = []
        if (self.prefill is None) != (self.decode is None):
            problems.append(
                (
                    "prefill" if self.prefill is None else "decode",
                    "disaggregation needs both prefill and decode",
                )
            )
        elif self.prefill is not None:
            problems += [
                (k, "goes in prefill and decode under disaggregation")
                for k in ("tp", "dp", "replicas", "engine")
                if k in self.model_fields_set
            ]
            if self.network is None:
                problems.append(("network", "disaggregation needs the network that carries the KV caches"))
        elif self.tp > 1 and self.network is None:
            problems.append(
                ("network", f"tp {self.tp} needs a network.yml whose first dimension holds {self.tp} NPUs")
            )
        raise_problems(problems)
        return self

    def deployments(self) -> tuple[Deployment, Deployment | None]:
        """The deployment (the prefill pool's under disaggregation) and the decode pool's
        (None without); models and GPUs loaded, their errors naming them."""
        from astra_core.workload.generators.gpus import load_gpu
        from astra_core.workload.generators.models import load_model

        model, gpu = load_model(self.model), load_gpu(self.gpu)
        if self.prefill is None or self.decode is None:
            return self._deployment(model, gpu, self), None
        return self._deployment(model, gpu, self.prefill), self._deployment(model, gpu, self.decode)

    def _deployment(self, model: Any, gpu: Any, pool: Any) -> Deployment:
        tp, dp, replicas, e = pool.tp, pool.dp, pool.replicas, pool.engine
        tokens, seqs = engine_defaults(gpu)
        return Deployment(
            model,
            gpu,
            tp=tp,
            dp=dp,
            replicas=replicas,
            precision=self.precision,
            kv_bytes=1 if e.kv_cache_dtype == "fp8" else 2,
            block_size=e.block_size,
            max_num_batched_tokens=e.max_num_batched_tokens or tokens,
            max_num_seqs=e.max_num_seqs or seqs,
            gpu_memory_utilization=e.gpu_memory_utilization,
            chunked_prefill=e.enable_chunked_prefill,
            expert_parallel=e.enable_expert_parallel,
            prefix_caching=e.enable_prefix_caching,
            no_evict=e.capacity_policy == "guaranteed_no_evict",
        )

    def request_list(self) -> list[Request]:
        """The requests: read from the file or generated."""
        r = self.requests
        if r.file is not None:
            return read_requests(r.file)
        lengths: Any = r.lengths if isinstance(r.lengths, str) else tuple(r.lengths or ())
        return generate_requests(r.count or 0, r.rate, lengths, cv=r.cv, seed=r.seed)


def _resolve(path: Any, directory: Path) -> Any:
    if not isinstance(path, str):
        return path
    return str(Path(path) if os.path.isabs(path) else directory / path)


def load_serve_spec(path: str | os.PathLike) -> ServeSpec:
    """Read and check a serving spec, its paths made relative to its folder. Raises
    ConfigError: one line per problem, naming the spec and the key."""
    source = source_name(path)
    problems = Problems(source)
    data = read_yaml(path, problems, aliases=False)
    problems.raise_if_any()
    spec = validate_mapping(ServeSpec, data, source)
    directory = Path(path).resolve().parent
    update: dict[str, Any] = {
        key: _resolve(getattr(spec, key), directory)
        for key in ("network", "topology", "system", "backend_config")
    }
    for key in ("model", "gpu"):  # a file beside the spec, else a preset's name
        candidate = _resolve(getattr(spec, key), directory)
        if candidate is not None and Path(candidate).is_file():
            update[key] = candidate
    requests = spec.requests.model_copy(update={"file": _resolve(spec.requests.file, directory)})
    resolved = spec.model_copy(update={**update, "requests": requests})
    resolved._source = source
    return resolved
