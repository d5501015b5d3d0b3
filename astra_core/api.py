"""The Python API: ``run(spec)`` simulates one :class:`~astra_core.run_spec.RunSpec` and
returns its results; ``simulate(...)`` is the same from keyword arguments, ``estimate`` and
``estimate_run`` what a run would cost its backend.

The CLI, sweeps and clusters are thin layers over this module.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from astra_core import estimate as estimating
from astra_core.backend import Topology, WorkLimitExceeded, require_link_changes, wall_time_text
from astra_core.collector import few_passes, paused
from astra_core.config.comm_groups import groups_beside, load_comm_groups, parse_comm_groups
from astra_core.config.memory import MemoryConfig, load_memory
from astra_core.config.network import NetworkConfig, load_network
from astra_core.config.system import SystemConfig, load_system
from astra_core.errors import ConfigError, SimulationDeadlock, TraceError
from astra_core.estimate import Estimate, MessageTally, PassStopped, price_run
from astra_core.flows.flowfile import FlowSpec, read_flows
from astra_core.flows.run import BACKGROUND_TAG_BASE, check_link_sharing, flow_results, start_flows
from astra_core.plugins import (
    BUILTIN_DEFAULT_BACKEND,
    BackendInfo,
    BackendRegistry,
    collective_registry,
    load_settings,
    make_plugin_manager,
    notify_run_finished,
    notify_run_started,
    progress_observers,
)
from astra_core.report import Report
from astra_core.report.iterations import measure_iterations
from astra_core.run_spec import PathLike, RunSpec, expect
from astra_core.system.context import check_network_models
from astra_core.system.memory_guard import check_nodes_fit
from astra_core.system.simulation import Simulation
from astra_core.topology.faults import (
    LinkChange,
    LinkFault,
    apply_faults,
    check_reachable,
    fault_changes,
    load_faults,
)
from astra_core.topology.logical import logical_dims
from astra_core.topology.physical import PhysicalTopology
from astra_core.workload.chakra import RankTrace, read_workload
from astra_core.workload.graph import RankGraph, build_graphs
from astra_core.workload.iterations import NODE_BYTES, repeat_traces, repeated_nodes

#: The cheap model the estimate runs the system layer on (:mod:`astra_core.estimate`):
#: the core's built-in backend, which every plugin manager has.
ESTIMATE_BACKEND = BUILTIN_DEFAULT_BACKEND


def resolve_comm_groups(
    comm_groups: PathLike | Mapping | None, npus_count: int
) -> dict[str, tuple[int, ...]]:
    """Communicator groups from a comm-group JSON file or a mapping shaped like one.

    A mapping is validated exactly as the file is
    (:func:`~astra_core.config.comm_groups.parse_comm_groups`; errors name
    ``comm_groups``); tuples and ranges of NPU ids count as lists.
    """
    if comm_groups is None:
        return {}
    if isinstance(comm_groups, (str, os.PathLike)):
        return load_comm_groups(comm_groups, npus_count)
    mapping = {
        key: list(members) if isinstance(members, (tuple, range)) else members
        for key, members in comm_groups.items()
    }
    return parse_comm_groups(mapping, npus_count, source="comm_groups")


def load_graphs(
    workload: PathLike | Sequence[RankTrace], npus_count: int, iterations: int = 1
) -> list[RankGraph]:
    """Per-rank dependency graphs from a trace prefix or from already read traces,
    each repeated ``iterations`` times (:mod:`astra_core.workload.iterations`).

    Raises TraceError when a list of traces does not have one trace per NPU, and
    ConfigError for ``iterations`` < 1, a streamed trace repeated, or copies that would
    need more memory than the machine has available (said before copying).
    """
    if isinstance(workload, (str, os.PathLike)):
        traces = read_workload(workload, npus_count)
    else:
        traces = list(workload)
        if len(traces) != npus_count:
            raise TraceError(
                f"simulate: workload has {len(traces)} rank traces, but the network "
                f"has {npus_count} NPUs (one trace per NPU)"
            )
    if iterations != 1:
        _check_copies_fit(traces, iterations)
        traces = repeat_traces(traces, iterations)
    return build_graphs(traces)


def _check_copies_fit(traces: Sequence[RankTrace], iterations: int) -> None:
    """RunTooLarge when ``iterations`` copies of the traces would not fit in the memory
    the machine has available (:data:`~astra_core.workload.iterations.NODE_BYTES` a node)."""
    check_nodes_fit(
        repeated_nodes(traces, iterations), NODE_BYTES, f"--iterations {iterations}", "iterations"
    )


def resolve_network(
    network: PathLike | NetworkConfig | None,
    topology: PathLike | PhysicalTopology | None,
    dims: Sequence[int] | None,
) -> tuple[NetworkConfig, PhysicalTopology | None]:
    """The logical network (for collectives) and the physical topology (if any).

    With only ``network``: network.yml's dimensions, no physical topology.
    With ``topology`` (an ns-3 format file or a PhysicalTopology): NPU rank r
    is its r-th non-switch node; the logical dimensions come from ``network``
    if given (its NPU count must match) or from ``dims`` (default: one
    dimension of all NPUs). Raises ConfigError.
    """
    if topology is None:
        if network is None:
            raise ConfigError(
                "no network: give network.yml (--network) or a physical topology file (--topology)"
            )
        if dims:
            raise ConfigError("--dims goes with --topology; network.yml already has dimensions")
        net = network if isinstance(network, NetworkConfig) else load_network(network)
        return net, None
    if isinstance(topology, PhysicalTopology):
        physical = topology
    else:
        from astra_core.topology.ns3_format import read_ns3_topology

        physical = read_ns3_topology(topology)
    if network is not None:
        if dims:
            raise ConfigError("give either --network or --dims with --topology, not both")
        net = network if isinstance(network, NetworkConfig) else load_network(network)
        if net.npus_count != physical.npus_count:
            raise ConfigError(
                f"{physical.source}: {physical.npus_count} NPUs, but network.yml "
                f"{net.source} has {net.npus_count}"
            )
        return net, physical
    return logical_dims(physical, list(dims) if dims else None), physical


def _background_flows(
    background: PathLike | Sequence[FlowSpec] | None, physical: PhysicalTopology | None
) -> list[FlowSpec]:
    """The background flows to run (none when ``background`` is None)."""
    if background is None:
        return []
    if physical is None:
        raise ConfigError("--background: background flows need a physical topology (--topology)")
    if isinstance(background, (str, os.PathLike)):
        return read_flows(background, physical.npus_count)
    flows: list[FlowSpec] = list(background)
    expect(
        all(isinstance(f, FlowSpec) for f in flows),
        "background",
        "a flow file path or a list of FlowSpec",
        background,
    )
    return flows


class RunInputs:
    """A run's inputs, loaded and checked once: the logical ``network`` and ``physical``
    topology, background ``flows``, ``system``, ``memory``, communicator ``groups``,
    per-rank ``graphs`` (each trace repeated ``iterations`` times), the plugin
    ``settings``, and the ``link_changes`` of timed ``faults`` (whole-run faults are
    applied to ``physical``) of ``spec`` (see :func:`run`). Raises what
    the loaders raise (ConfigError, TraceError)."""

    link_changes: list[LinkChange]
    faults: list[LinkFault]

    def __init__(self, spec: RunSpec):
        workload, comm_groups = spec.workload, spec.comm_groups
        self.network, self.physical = resolve_network(spec.network, spec.topology, spec.dims)
        fault_list = self.faults = load_faults(spec.faults)
        self.link_changes = []
        if fault_list:
            if self.physical is None:
                raise ConfigError("faults: link faults need a physical topology (--topology)")
            self.physical = apply_faults(self.physical, fault_list)
            self.link_changes = fault_changes(self.physical, fault_list)
        self.flows = _background_flows(spec.background, self.physical)
        system, memory = spec.system, spec.memory
        self.system = system if isinstance(system, SystemConfig) else load_system(system)
        self.system.check_dims(self.network.dims_count)
        check_network_models(self.system, self.network)  # before minutes of trace reading
        self.memory = memory if isinstance(memory, MemoryConfig) or memory is None else load_memory(memory)
        if comm_groups is None:
            comm_groups = groups_beside(workload)
        self.groups = resolve_comm_groups(comm_groups, self.network.npus_count)
        self.iterations = spec.iterations
        self.graphs = load_graphs(workload, self.network.npus_count, spec.iterations)
        if fault_list:  # NPUs with work must reach each other whatever is down
            assert self.physical is not None
            busy = [rank for rank, graph in enumerate(self.graphs) if len(graph.nodes)]
            check_reachable(self.physical, "faults", busy, fault_list)
        self.settings = load_settings()

    def estimate(
        self,
        pm,
        registry: BackendRegistry,
        info: BackendInfo,
        model: Any,
        symmetry: bool,
        budget_s: float | None = None,
    ) -> Estimate:
        """What the run would cost backend ``info`` (:mod:`astra_core.estimate`): the
        system layer on the ``analytical`` backend of ``registry``, priced by ``model``
        (``info``'s :class:`~astra_core.backend.WorkModel`, or None: messages and bytes
        only). Raises SimulationDeadlock (saying it was found on the analytical model) where the
        step cannot finish. ``budget_s``: stop the pass after this many wall seconds
        and give lower bounds (:data:`~astra_core.estimate.PRE_RUN_PASS_S`)."""
        cheap = registry.get(ESTIMATE_BACKEND)
        tallies: list[MessageTally] = []
        deadline = None if budget_s is None else time.perf_counter() + budget_s

        def fresh() -> MessageTally:
            tallies.append(MessageTally(cheap.build(Topology(self.network, None)), deadline))
            return tallies[-1]

        def run_pass():
            sim = Simulation(
                self.graphs,
                self.network,
                self.system,
                fresh(),
                memory=self.memory,
                comm_groups=self.groups,
                backend_name=cheap.name,
                symmetry=symmetry,
                algorithms=collective_registry(pm),
                fresh_backend=fresh,
            )
            with warnings.catch_warnings():  # the run itself will warn, once
                warnings.simplefilter("ignore")
                try:
                    sim.run()
                except PassStopped:
                    return tallies[-1].counts, sim.symmetry, True
                except SimulationDeadlock as exc:
                    raise SimulationDeadlock(
                        f"estimate (the system layer on the analytical model): {exc}", exc.waiting
                    ) from exc
            return tallies[-1].counts, sim.symmetry, False

        return price_run(info.name, model, run_pass, self.flows)


def _estimate_first(
    inputs: RunInputs, pm, registry: BackendRegistry, info: BackendInfo, spec: RunSpec
) -> Estimate | None:
    """The estimate made before a run, or None where none is made: the backend prices no
    work (the pass would only repeat the run) or the step cannot finish (the run itself reports that, with its own times). Raises
    ConfigError for a bad backend config, as building the backend would."""
    model = info.work_model(Topology(inputs.network, inputs.physical), spec.backend_config)
    if model is None:
        return None
    try:
        return inputs.estimate(pm, registry, info, model, spec.symmetry, budget_s=estimating.PRE_RUN_PASS_S)
    except SimulationDeadlock:
        return None


def limit_text(est: Estimate, backend_config: Any) -> str:
    """The error of a run whose estimate is past its backend's work limit."""
    where = (
        os.fspath(backend_config) if isinstance(backend_config, (str, os.PathLike)) else "--backend-config"
    )
    return (
        f"{est.backend} backend: the run would move {est.budgeted:.3g} {est.unit} "
        f"(about {wall_time_text(est.wall_s or 0.0)} of wall time), past the limit "
        f"{est.limit_key} = {est.limit:.3g} (raise it in {where}; 0 = no limit)"
    )


def simulate(
    workload: PathLike | Sequence[RankTrace],
    system: Any,
    network: Any = None,
    *,
    backend: str | None = None,
    progress: Any = False,
    topology: PathLike | PhysicalTopology | None = None,
    dims: Sequence[int] | None = None,
    memory: Any = None,
    comm_groups: PathLike | Mapping | None = None,
    backend_config: Any = None,
    plugin_manager=None,
    symmetry: bool = True,
    background: PathLike | Sequence[FlowSpec] | None = None,
    on_estimate: Callable[[Estimate], None] | None = None,
    iterations: int = 1,
    faults: PathLike | Sequence[LinkFault | Mapping[str, Any]] | None = None,
) -> Report:
    """Simulate one training step and return its :class:`~astra_core.report.Report`.

    ``workload``: a Chakra trace prefix (rank r reads ``<prefix>.<r>.et``) or
    a list of :class:`RankTrace`. ``system``, ``network`` and ``memory``: a
    path, a config object, or a dict shaped like system.json / network.yml /
    the remote-memory JSON (errors then name ``system``, ``network`` or
    ``memory`` as the source). ``progress``: True for a progress line on
    stderr when it is a terminal, or a
    :class:`~astra_core.progress.RunProgress`. The other keywords are
    :func:`run`'s and :class:`~astra_core.run_spec.RunSpec`'s. Raises AstraError
    subclasses; an argument of the wrong type is a ConfigError naming it, e.g.
    ``simulate: workload must be a path or a list of rank traces, got int``.
    ``astra.simulate`` is this function.
    """
    spec = RunSpec.of(locals())
    return run(spec, progress=progress, plugin_manager=plugin_manager, on_estimate=on_estimate)


def estimate(
    workload: PathLike | Sequence[RankTrace],
    system: Any,
    network: Any = None,
    *,
    backend: str | None = None,
    topology: PathLike | PhysicalTopology | None = None,
    dims: Sequence[int] | None = None,
    memory: Any = None,
    comm_groups: PathLike | Mapping | None = None,
    backend_config: Any = None,
    plugin_manager=None,
    symmetry: bool = True,
    background: PathLike | Sequence[FlowSpec] | None = None,
    iterations: int = 1,
    faults: PathLike | Sequence[LinkFault | Mapping[str, Any]] | None = None,
) -> Estimate:
    """What simulating this step on ``backend`` would cost, without simulating it:
    messages, bytes, the backend's units of work (packet-hops, flit-hops, flows) and
    the projected wall time (:class:`~astra_core.estimate.Estimate`; seconds).

    Arguments as :func:`simulate`'s; :func:`estimate_run` is the same for a
    :class:`~astra_core.run_spec.RunSpec`. ``astra.estimate`` is this function.
    """
    return estimate_run(RunSpec.of(locals()), plugin_manager=plugin_manager)


def _check_plugin_manager(plugin_manager: Any) -> None:
    """ConfigError unless ``plugin_manager`` is a pluggy PluginManager or None."""
    import pluggy

    expect(
        plugin_manager is None or isinstance(plugin_manager, pluggy.PluginManager),
        "plugin_manager",
        "a pluggy PluginManager or None",
        plugin_manager,
    )


def _prepare(spec: RunSpec, plugin_manager) -> tuple[RunInputs, Any, BackendRegistry, BackendInfo]:
    """A checked spec's inputs, the plugin manager (the caller's, or one made with the
    inputs' plugin settings), the backend registry and the spec's backend in it."""
    inputs = RunInputs(spec)
    pm = plugin_manager or make_plugin_manager(settings=inputs.settings)
    registry = BackendRegistry(pm, inputs.settings.default_backend)
    return inputs, pm, registry, registry.get(spec.backend)


def estimate_run(spec: RunSpec, *, plugin_manager=None) -> Estimate:
    """What simulating ``spec`` would cost its backend, without simulating it (:func:`estimate`).

    The system layer runs on the ``analytical`` backend (rank symmetry where it
    applies) and the backend's work model prices every message
    (:mod:`astra_core.estimate`). Raises AstraError subclasses as :func:`run` does
    for bad input, and SimulationDeadlock where the step cannot finish.
    """
    spec = spec.checked()
    _check_plugin_manager(plugin_manager)
    inputs, pm, registry, info = _prepare(spec, plugin_manager)
    model = info.work_model(Topology(inputs.network, inputs.physical), spec.backend_config)
    return inputs.estimate(pm, registry, info, model, spec.symmetry)


def run(
    spec: RunSpec,
    *,
    progress: Any = False,
    plugin_manager=None,
    on_estimate: Callable[[Estimate], None] | None = None,
) -> Report:
    """Simulate the training step ``spec`` describes and return its :class:`~astra_core.report.Report`.

    ``progress``: True for a progress line on stderr when it is a terminal, or a
    :class:`~astra_core.progress.RunProgress`. ``plugin_manager`` replaces the
    default one (from :func:`~astra_core.plugins.make_plugin_manager`), whose
    observers get ``astra_run_started`` / ``astra_run_finished``. Raises
    :class:`~astra_core.errors.AstraError` subclasses for bad input (a field of
    the wrong type is a ConfigError naming it: :meth:`RunSpec.checked`) and
    :class:`~astra_core.errors.SimulationDeadlock` when the run cannot finish.

    The fields: the network is network.yml's dimensions or a physical ``topology``
    with logical ``dims`` (see :func:`resolve_network`). ``backend`` names a
    registered network backend (default from plugins.toml). ``symmetry=False``
    simulates every rank even when rank 0 could stand for all (see
    :mod:`astra_core.system.symmetry`). Dict ``comm_groups`` are checked as a file
    is; default: ``<prefix>.comm_groups.json`` if it exists.
    ``background``: a flow file (or :class:`~astra_core.flows.flowfile.FlowSpec`
    list) run on the same fabric alongside the step (start times from the
    step's start; needs ``topology``): every rank is simulated, and
    ``result.background`` holds each flow's FCT, ideal FCT and slowdown
    (:mod:`astra_core.flows.run`). Raises ConfigError without a topology or on a
    backend that does not model link sharing (the flows would change nothing).

    ``iterations``: run every rank's trace that many times back to back, iteration
    i + 1 of a rank starting when its iteration i has finished
    (:mod:`astra_core.workload.iterations`); ``result.iterations`` then has each
    iteration's times. ConfigError unless it is an integer >= 1.

    ``faults``: degraded and failed cables of ``topology`` (a YAML file with a
    ``faults:`` list, or a list of :class:`~astra_core.topology.faults.LinkFault`
    or mappings; :mod:`astra_core.topology.faults`). Those for the whole run are
    taken out of the topology (every backend); those with ``at_us`` or ``until_us``
    change the links during the run, on a backend that can
    (:class:`~astra_core.backend.LinkChanges`), and turn rank symmetry off.
    ConfigError for a bad fault, faults without a topology, a backend that cannot
    change links, or NPUs with work that the cables down cut apart at some time.

    ``on_estimate``: first estimate what the run will cost the backend
    (:func:`estimate`; the system layer on the analytical model, no packets):
    a run past the backend's work limit is refused before it starts
    (:class:`~astra_core.backend.WorkLimitExceeded`, with the estimate), any
    other is given to ``on_estimate(estimate)`` and run.
    """
    spec = spec.checked()
    _check_plugin_manager(plugin_manager)
    display = None
    if progress is not False:  # rich's progress display loads only when asked for
        from astra_core.progress import RunProgress

        expect(
            isinstance(progress, (bool, RunProgress)), "progress", "True, False or a RunProgress", progress
        )
        display = progress if isinstance(progress, RunProgress) else RunProgress()
    if display is None or not display.enabled:
        return _run_checked(spec, plugin_manager, on_estimate)
    pm = plugin_manager or make_plugin_manager()
    pm.register(display)
    try:
        with display:
            return _run_checked(spec, pm, on_estimate)
    finally:
        pm.unregister(display)


def _run_checked(spec: RunSpec, plugin_manager, on_estimate: Callable[[Estimate], None] | None) -> Report:
    """:func:`run` of a checked spec, its progress display registered; the traces, graphs
    and run set apart from the cyclic collector's passes (:func:`.collector.few_passes`)."""
    with few_passes():
        with paused():  # astra's code alone: traces decoded, graphs built
            inputs, pm, registry, info = _prepare(spec, plugin_manager)
        if on_estimate is not None:
            est = _estimate_first(inputs, pm, registry, info, spec)
            if est is not None:
                if est.over_limit:  # the error says the estimate
                    raise WorkLimitExceeded(limit_text(est, spec.backend_config))
                on_estimate(est)
        return _run(inputs, pm, info, spec)


def _schedule_link_changes(backend: Any, name: str, changes: Sequence[LinkChange]) -> None:
    """Have ``backend`` change its links at each change's time. Raises ConfigError for a
    backend that cannot (:class:`~astra_core.backend.LinkChanges`)."""
    change = require_link_changes(backend, name)
    for step in changes:
        backend.schedule(step.at_ns - backend.now(), change, step.bytes_per_ns)


def _run(inputs: RunInputs, pm, info: BackendInfo, spec: RunSpec) -> Report:
    """Build the run of ``inputs`` on backend ``info``, tell the observers, run it with
    its background flows, and return its Report (see :func:`run`)."""
    net, physical, flows = inputs.network, inputs.physical, inputs.flows

    def build_backend():
        return info.build(Topology(net, physical), spec.backend_config)

    sim = Simulation(
        inputs.graphs,
        net,
        inputs.system,
        build_backend(),
        memory=inputs.memory,
        comm_groups=inputs.groups,
        backend_name=info.name,
        symmetry=spec.symmetry and not flows and not inputs.link_changes,
        algorithms=collective_registry(pm),
        fresh_backend=build_backend,
        on_progress=progress_observers(pm),
    )
    view = sim.view
    if flows:
        check_link_sharing(sim.backend, info.name, "--background")
    if inputs.link_changes:
        _schedule_link_changes(sim.backend, info.name, inputs.link_changes)
    notify_run_started(pm, view)  # a failing observer: one line naming the plugin
    finish: list[float | None] = [None] * len(flows)
    if flows:
        start_flows(
            sim.backend, flows, lambda i: finish.__setitem__(i, sim.backend.now()), BACKGROUND_TAG_BASE
        )
    report = Report.of(sim.run(), faults=tuple(inputs.faults))
    if flows:
        assert physical is not None  # _background_flows refused flows without one
        background = flow_results(
            flows, finish, physical, info.name, BACKGROUND_TAG_BASE, backend=sim.backend
        )
        report = Report.of(report, background=background)
    if inputs.iterations != 1:
        report = Report.of(report, iterations=measure_iterations(report, inputs.iterations))
    notify_run_finished(pm, view, report)  # an observer's error is a warning; the result is kept
    return report
