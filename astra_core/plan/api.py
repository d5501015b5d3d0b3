"""``astra.plan(...)``: the search of :mod:`astra_core.plan.search` from the names and
files a user has (a model preset or file, a GPU preset or file, network.yml)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from astra_core.errors import ConfigError
from astra_core.plan.search import PlanOutcome, search
from astra_core.plan.space import Limits, Space

__all__ = ["executor", "plan"]

TARGET = "astra_core.plan.point:run_layout"


def _failed(task: dict, error: str) -> dict:
    """The row of a layout whose worker died or whose Ray task failed."""
    return {"key": task["key"], "status": "error", "error": error, "simulated": list(task["counts"])}


def executor(workers: int | None = None, ray: bool | str | None = None) -> tuple[Callable, int, str]:
    """(run(tasks, on_row), parallel runs, where in words): a local pool of ``workers``
    processes (default one per CPU), or Ray (True: a local instance; an address)."""
    from astra_core.plan.point import run_layout
    from astra_core.sweep.executors import default_workers, run_pool, run_ray

    if ray:
        address = None if ray is True or ray == "local" else str(ray)

        def on_ray(tasks, on_row, admit=None):
            run_ray(tasks, on_row, address, function=run_layout, failed=_failed, admit=admit)

        return on_ray, 8, f"Ray ({address or 'local'})"
    count = workers or default_workers()

    def on_pool(tasks, on_row, admit=None):
        run_pool(tasks, on_row, count, target=TARGET, failed=_failed, admit=admit)

    return on_pool, count, f"{count} worker process{'es' if count > 1 else ''}"


def plan(
    model: Any,
    network: str | os.PathLike,
    global_batch: int,
    *,
    gpu: Any = "H100",
    system: Any = None,
    backend: str | None = None,
    seq_len: int | None = None,
    precision: str = "bf16",
    fp8_recipe: str = "tensorwise",
    limits: Limits | None = None,
    top: int = 5,
    full: int = 1,
    workers: int | None = None,
    ray: bool | str | None = None,
    cache: str | os.PathLike | None = None,
    on_progress: Callable[[str, int, int | None], None] | None = None,
) -> PlanOutcome:
    """The fastest layouts of ``model`` (a preset name, a file, or a ModelConfig) for
    ``global_batch`` sequences on the cluster of ``network`` (network.yml: its GPUs are
    the product of its dimensions, the first one the NVLink domain) that fit in ``gpu``'s
    HBM (a preset name, a file or a GPUSpec). ``system``: a system.json path or dict
    (default: every collective on NCCL's model of ``gpu``). See :func:`.search.search`
    for ``top``, ``full`` and ``on_progress``; ``cache``: a JSON Lines file of earlier runs
    (None: none). Raises ConfigError (one line) for bad inputs or when nothing fits."""
    from astra_core.config.network import load_network
    from astra_core.config.system import nccl_system
    from astra_core.workload.generators.gpus import GPUSpec, load_gpu
    from astra_core.workload.generators.models import ModelConfig, load_model

    model = model if isinstance(model, ModelConfig) else load_model(model)
    gpu = gpu if isinstance(gpu, GPUSpec) else load_gpu(gpu)
    dims = tuple(load_network(network).npus_per_dim)
    gpus = 1
    for size in dims:
        gpus *= size
    if system is None:
        if not gpu.nvlinks:
            raise ConfigError(f"gpu {gpu.name}: NCCL has no model of it; give a system")
        system = nccl_system(gpu.name)
    space = Space(
        model, gpu, gpus, dims[0], global_batch, seq_len or model.seq_len, precision, fp8_recipe, dims,
        limits or Limits(),
    )  # fmt: skip
    run, _, _ = executor(workers, ray)
    return search(
        space,
        system,
        str(Path(network).resolve()),
        run=run,
        backend=backend,
        top=top,
        full=full,
        cache=cache,
        on_progress=on_progress,
    )
