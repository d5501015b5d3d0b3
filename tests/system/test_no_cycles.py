"""A run leaves no reference cycles behind: every chunk's stream, phases and plans
are freed by reference counting as the chunk retires, so memory follows the
chunks in flight even with the cyclic garbage collector off."""

import gc
import warnings
from contextlib import contextmanager

import pytest

from astra_core.api import simulate
from astra_core.collector import YOUNG_THRESHOLD

CASES = [
    ("workload/models/Resnet50_DataParallel_8npus/Resnet50_DataParallel", "analytical"),
    ("workload/models/DLRM_HybridParallel_8npus/DLRM_HybridParallel", "analytical-congestion"),
]


@contextmanager
def cyclic_garbage():
    """The cyclic collector off inside; on leaving, one pass whose garbage (what only
    reference cycles kept) is listed by type in the list yielded, and the collector as
    it was. Passes first until nothing is left: one pass can leave garbage whose last
    reference a finalizer or weakref callback of that pass dropped (a matplotlib figure
    an earlier test on this worker closed), which would be counted as the block's."""
    while gc.collect():
        pass
    was = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    types: list[type] = []
    try:
        yield types
    finally:
        gc.collect()
        types.extend(type(o) for o in gc.garbage)
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()


@pytest.mark.parametrize("workload,backend", CASES, ids=["resnet50", "dlrm"])
def test_a_run_makes_no_cyclic_garbage(reference_dir, workload, backend):
    import astra_core.system.simulation as simulation

    run = simulation.Simulation.run
    garbage = []

    def watched(self):
        with cyclic_garbage() as types:
            result = run(self)
        garbage.extend(t.__name__ for t in types)
        return result

    simulation.Simulation.run = watched
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = simulate(
                reference_dir / workload,
                reference_dir / "system/text_converter_system.json",
                reference_dir / "network/text_converter_network.yml",
                memory=reference_dir / "memory/text_converter_remote_memory.json",
                backend=backend,
                symmetry=False,
            )
    finally:
        simulation.Simulation.run = run
    assert result.step_ns > 0 and len(result.collectives) > 0
    assert garbage == []


def test_a_run_collects_rarely_and_restores_the_collector(reference_dir):
    import astra_core.system.simulation as simulation

    seen = []
    drain = simulation.Simulation._start_and_drain

    def watched(self):
        seen.append(gc.get_threshold()[0])
        drain(self)

    before = gc.get_threshold()
    simulation.Simulation._start_and_drain = watched
    try:
        simulate(
            reference_dir / CASES[0][0],
            reference_dir / "system/text_converter_system.json",
            reference_dir / "network/text_converter_network.yml",
            memory=reference_dir / "memory/text_converter_remote_memory.json",
        )
    finally:
        simulation.Simulation._start_and_drain = drain
    assert seen == [YOUNG_THRESHOLD]
    assert gc.get_threshold() == before


def test_a_finished_run_leaves_nothing_to_the_cyclic_collector(tmp_path):
    """Once ``simulate`` returns, reference counting alone frees the run: its simulation,
    engines, generated traces (template node lists) and graphs. A cycle among them would
    keep a 1,024-rank step's millions of objects alive until the collector's next full
    pass (a third of a second a run in ``astra plan``'s workers)."""
    from astra_core.config.system import nccl_system
    from astra_core.workload.generators.gpus import GPUS
    from astra_core.workload.generators.llm import LLMConfig, generate_llm
    from astra_core.workload.generators.llm_traces import llm_traces
    from astra_core.workload.generators.models import ModelConfig

    model = ModelConfig(
        "t", layers=4, hidden=512, heads=8, kv_heads=2, ffn_hidden=1024, vocab=1000, mlp="swiglu"
    )
    cfg = LLMConfig(
        model, GPUS["h100"], dp=4, tp=2, pp=2, microbatches=4, sequence_parallel=True, dims=[8, 2]
    )
    network = tmp_path / "network.yml"
    network.write_text(
        "topology: [Switch, Switch]\nnpus_count: [8, 2]\nbandwidth: [419.09, 46.57]\nlatency: [300, 1350]\n"
    )
    with cyclic_garbage() as types:
        traces, groups = llm_traces(generate_llm(cfg))
        result = simulate(traces, nccl_system("H100"), network, comm_groups=groups)
        assert result.symmetry_off == "" and len(set(result.representative)) < 16  # symmetric
        del traces, groups, result
    ours = ("astra_core.system", "astra_core.workload")
    assert sorted({t.__qualname__ for t in types if t.__module__.startswith(ours)}) == []
