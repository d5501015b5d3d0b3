"""system.json: the system layer's knobs, with upstream's keys, units and defaults.

Upstream source: ``Sys::Sys`` (defaults) and ``Sys::initialize_sys`` in
astra-sim/system/Sys.cc, plus ``CollectiveImplLookup::setup_collective_impl_from_config``
(astraccl/CollectiveImplLookup.cc) for the ``*-implementation*`` keys.  Upstream
reads each key with ``j.contains(key)`` and silently ignores every other key;
here unknown keys are errors, and keys that only ASTRA-sim 1.0 read are
accepted but marked as having no effect (see ``LEGACY_KEYS``).  Upstream
features astra does not model are refused when switched on (see
``UNSUPPORTED``): their default (off) values load, anything else is a
one-line error naming the key, never a silently different result.

=============================  ===========  =============================================
key                            default      meaning (unit)
=============================  ===========  =============================================
scheduling-policy              required*    LIFO | FIFO | EXPLICIT: order of collectives
                                            waiting for a queue (LIFO: later first; FIFO:
                                            earlier first; EXPLICIT: the ET node's
                                            comm_priority, higher first, ties in issue
                                            order; upstream Sys::get_priority)
collective-optimization        required*    baseline | localBWAware (multi-dim all-reduce
                                            as RS..., AR on last dim, ...AG)
endpoint-delay                 10           ns (= cycles at upstream's 1 GHz) an NPU spends
                                            on each received message; upstream multiplies
                                            it by the frontend's injection scale (1)
local-reduction-delay          1            ns per 100 B reduced, read only by upstream's
                                            LogGP bus (model-shared-bus 1): no effect
active-chunks-per-dimension    1            chunks in flight per dimension (>= 1)
preferred-dataset-splits       required*    chunks per collective (1 .. 2^20); upstream
                                            default 0 divides by zero on the first
                                            collective
all-reduce-implementation      (none)       algorithm per dimension, see collective_impl
all-gather-implementation      (none)       "
reduce-scatter-implementation  (none)       "
all-to-all-implementation      (none)       "
nccl                           (none)       the NCCL model's machine and settings, needed
                                            by a ["nccl"] implementation (astra's
                                            extension; see astra_core.config.nccl)
<coll>-implementation-custom   (none)       [one Chakra ET prefix, or an MSCCL .xml file]
                                            replacing the native algorithm on all
                                            dimensions (astra_core.system.collectives.custom)
per-node-custom-implementation (none)       path of a YAML {ET node id: ET prefix}:
                                            NOT SUPPORTED
roofline-enabled               0            1: compute time from the roofline model
peak-perf                      0            TFLOP/s (upstream multiplies by 1e12)
local-mem-bw                   0            GB/s with 1 GB = 1e9 B (upstream * 1e9);
                                            note network.yml uses 2^30
model-shared-bus               0            1: model the NPU-memory bus with LogGP:
                                            NOT SUPPORTED (only 0)
L, o, g                        0            LogGP latency / overhead / gap of the bus, ns;
                                            read only with model-shared-bus 1: no effect
G                              0            LogGP gap per byte, ns/B; likewise
trace-enabled                  0            1: debug-log every issued/finished ET node:
                                            NOT SUPPORTED (only 0; use --timeline)
replay-only                    0            1: every node, whatever its type, takes its
                                            recorded duration (at least 1 ns) and counts
                                            as compute (upstream Workload::issue_replay)
track-local-mem                0            1: record local memory usage: NOT SUPPORTED
                                            (only 0)
local-mem-trace-filename       local_mem_trace  output name for track-local-mem; no
                                            effect while it is 0
=============================  ===========  =============================================

(*) upstream leaves ``scheduling_policy`` and ``collectiveOptimization``
uninitialised and ``preferred_dataset_splits`` at 0 when the key is absent,
which is undefined behaviour or a division by zero, so they are required here.

Ranges (:mod:`astra_core.config.limits`): delays (endpoint-delay,
local-reduction-delay, L, o, g, G) at most 1e12 ns; peak-perf and
local-mem-bw 0 (unset) or in [1e-6, 1e12]; active-chunks-per-dimension at most
2^31 - 1 (upstream's int).

A collective whose ``<coll>-implementation`` is absent fails when a trace
first issues it (upstream ``CollectiveImplLookup::get_collective_impl``
throws "No collective implementation found"), naming the rank and ET node.

Roofline (upstream Roofline.cc and ``Workload::issue_comp``): a compute node of
``num_ops`` FLOPs and ``tensor_size`` bytes takes
``num_ops / min(local_mem_bw_Bps * num_ops / tensor_size, peak_perf_FLOPs)``
seconds; hence roofline-enabled needs peak-perf > 0 and local-mem-bw > 0.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any

from astra_core.config.collective_impl import CollectiveAlgorithm
from astra_core.config.files import expect_mapping, read_json, source_name
from astra_core.config.issues import (
    PYTHON_SOURCE,
    ConfigWarning,
    Problems,
    as_choice,
    as_flag,
    as_int,
    as_number,
    as_str,
    show,
)
from astra_core.config.limits import MAX_CHUNKS, MAX_INT32, MAX_RATE, MIN_RATE, as_delay, as_int_delay
from astra_core.config.nccl import NcclConfig, parse_nccl

#: TFLOP/s -> FLOP/s (upstream Sys.cc: ``peak_perf * 1000000000000``).
FLOPS_PER_TFLOPS = 1e12
#: GB/s -> B/s for local-mem-bw (upstream Sys.cc: ``local_mem_bw * 1000000000``).
BYTES_PER_GB_LOCAL = 1e9


class SchedulingPolicy(str, Enum):
    LIFO = "LIFO"
    FIFO = "FIFO"
    EXPLICIT = "EXPLICIT"

    def __str__(self) -> str:
        return self.value


class CollectiveOptimization(str, Enum):
    BASELINE = "baseline"
    LOCAL_BW_AWARE = "localBWAware"

    def __str__(self) -> str:
        return self.value


#: The four collectives that have an ``<name>-implementation`` key.
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")

_INVALID = object()
Parser = Callable[[str, Any, Problems], Any]


def _checked(check: Callable[[Any], tuple[Any, str | None]]) -> Parser:
    def parse(key: str, raw: Any, problems: Problems) -> Any:
        value, err = check(raw)
        if err:
            problems.add(key, err)
            return _INVALID
        return value

    return parse


def _enum(enum: type[Enum]) -> Parser:
    def parse(key: str, raw: Any, problems: Problems) -> Any:
        value, err = as_choice(raw, [e.value for e in enum])
        if err:
            problems.add(key, err)
            return _INVALID
        return enum(value)

    return parse


def _algorithms(key: str, raw: Any, problems: Problems) -> Any:
    if not isinstance(raw, (list, tuple)):
        problems.add(key, f"expected a list of algorithm names (one per dimension), got {show(raw)}")
        return _INVALID
    if not raw:
        problems.add(key, "needs at least one algorithm name (one per dimension)")
        return _INVALID
    algorithms = []
    for index, item in enumerate(raw):
        try:
            algorithms.append(CollectiveAlgorithm(item))
        except ValueError as exc:
            problems.add(f"{key}[{index}]", str(exc))
            return _INVALID
    spanning = [a for a in algorithms if a.kind.spans_all_dims]
    if spanning and len(algorithms) > 1:
        # Upstream builds one all-NPU dimension for a one* entry and stops
        # reading the list there, so anything else in it is silently unused.
        problems.add(
            key,
            f"{str(spanning[0])!r} spans all dimensions and must be the only entry, got {len(algorithms)} entries",
        )
        return _INVALID
    return tuple(algorithms)


def _custom(key: str, raw: Any, problems: Problems) -> Any:
    # Upstream: "There should be 1 Chakra ET only. In multi-dim collectives,
    # that 1 ET file covers all dimensions" (CollectiveImplLookup.cc).
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, (list, tuple)) or len(raw) != 1:
        got = f"{len(raw)} entries" if isinstance(raw, (list, tuple)) else show(raw)
        problems.add(key, f"expected a list with exactly one Chakra ET prefix, got {got}")
        return _INVALID
    value, err = as_str(raw[0])
    if err:
        problems.add(f"{key}[0]", err)
        return _INVALID
    return value


#: Keys only ASTRA-sim 1.0 read; upstream 2.0 ignores them (Sys::Sys hard-codes
#: intra-dimension FIFO and inter-dimension ascending scheduling).  Accepted so
#: that existing files load, with 1.0's values (Sys::parse_var); no effect.
LEGACY_KEYS: dict[str, Parser] = {
    "boost-mode": _checked(as_flag),
    "intra-dimension-scheduling": _checked(
        lambda v: as_choice(v, ("FIFO", "RG", "SCF", "smallestFirst", "lessRemainingPhaseFirst"))
    ),
    "inter-dimension-scheduling": _checked(
        lambda v: as_choice(
            v,
            (
                "baseline",
                "ascending",
                "themis",
                "offlineGreedy",
                "themisFlex",
                "offlineGreedyFlex",
                "roundRobin",
            ),
        )
    ),
    "seprate-log": _checked(as_flag),  # sic, 1.0's spelling
    "gap-denominator": _checked(lambda v: as_int(v, minimum=1, maximum=MAX_INT32)),
}


def _rate(unit: str) -> Callable[[Any], tuple[float | None, str | None]]:
    """0 (unset, upstream's default) or a rate in [MIN_RATE, MAX_RATE] ``unit``."""

    def check(value: Any) -> tuple[float | None, str | None]:
        rate, err = as_number(value, minimum=0, maximum=MAX_RATE)
        if rate is not None and 0 < rate < MIN_RATE:  # (None exactly when err is not)
            return None, f"must be 0 (unset) or >= {MIN_RATE:g} {unit}, got {show(value)}"
        return rate, err

    return check


#: Upstream features astra does not model: key -> (what it is upstream, what
#: to do instead).  The key's default value (0 / absent) loads; any other
#: value is refused, because a run without the feature would differ silently.
UNSUPPORTED: dict[str, tuple[str, str]] = {
    "per-node-custom-implementation": (
        "upstream's per-ET-node custom collectives",
        "remove the key and use the *-implementation lists",
    ),
    "model-shared-bus": ("upstream's LogGP NPU-memory bus model", "remove the key or set 0"),
    "trace-enabled": ("upstream's per-node debug log", "set 0 and use --timeline for a per-node trace"),
    "track-local-mem": ("upstream's local memory usage tracker", "remove the key or set 0"),
}


#: Legacy values that mean what 2.0 does anyway (Sys::Sys: intra-dimension
#: FIFO, inter-dimension ascending, no boost mode); others draw a warning.
_LEGACY_AS_2_0 = {
    "boost-mode": (False,),
    "intra-dimension-scheduling": ("FIFO",),
    "inter-dimension-scheduling": ("baseline", "ascending"),
}


@dataclass(frozen=True)
class _Key:
    name: str  # system.json key
    attr: str  # SystemConfig attribute
    parse: Parser


_KEYS: tuple[_Key, ...] = (
    _Key("scheduling-policy", "scheduling_policy", _enum(SchedulingPolicy)),
    _Key("collective-optimization", "collective_optimization", _enum(CollectiveOptimization)),
    _Key(
        "preferred-dataset-splits",
        "preferred_dataset_splits",
        _checked(lambda v: as_int(v, minimum=1, maximum=MAX_CHUNKS)),
    ),
    _Key("endpoint-delay", "endpoint_delay_ns", _checked(as_int_delay)),
    _Key("local-reduction-delay", "local_reduction_delay_ns", _checked(as_int_delay)),
    _Key(
        "active-chunks-per-dimension",
        "active_chunks_per_dimension",
        _checked(lambda v: as_int(v, minimum=1, maximum=MAX_INT32)),
    ),
    *(_Key(f"{c}-implementation", f"{c.replace('-', '_')}_implementation", _algorithms) for c in COLLECTIVES),
    *(
        _Key(f"{c}-implementation-custom", f"{c.replace('-', '_')}_implementation_custom", _custom)
        for c in COLLECTIVES
    ),
    _Key("nccl", "nccl", parse_nccl),
    _Key("per-node-custom-implementation", "per_node_custom_implementation", _checked(as_str)),
    _Key("roofline-enabled", "roofline_enabled", _checked(as_flag)),
    _Key("peak-perf", "peak_perf_tflops", _checked(_rate("TFLOP/s"))),
    _Key("local-mem-bw", "local_mem_bw_gbps", _checked(_rate("GB/s"))),
    _Key("model-shared-bus", "model_shared_bus", _checked(as_flag)),
    _Key("L", "L", _checked(as_delay)),
    _Key("o", "o", _checked(as_delay)),
    _Key("g", "g", _checked(as_delay)),
    _Key("G", "G", _checked(as_delay)),
    _Key("trace-enabled", "trace_enabled", _checked(as_flag)),
    _Key("replay-only", "replay_only", _checked(as_flag)),
    _Key("track-local-mem", "track_local_mem", _checked(as_flag)),
    _Key("local-mem-trace-filename", "local_mem_trace_filename", _checked(as_str)),
)
_BY_NAME = {k.name: k for k in _KEYS}
_REQUIRED = ("scheduling-policy", "collective-optimization", "preferred-dataset-splits")
KNOWN_KEYS = tuple(_BY_NAME) + tuple(LEGACY_KEYS)


@dataclass(frozen=True)
class SystemConfig:
    """The parsed system.json.  Attribute names carry their unit.

    Algorithm lists are tuples of :class:`CollectiveAlgorithm` (strings with
    ``.kind`` and ``.window``); an empty tuple means the key was absent, and a
    collective of that type then has no native implementation (upstream fails
    when such a collective is issued).  ``legacy`` holds the ASTRA-sim 1.0
    keys that were present, as ``(key, value)`` pairs; they have no effect.
    Construct from a file (:func:`load_system`), a dict (:meth:`from_dict`) or
    directly; strings are accepted for the enums and algorithm names.
    """

    scheduling_policy: SchedulingPolicy
    collective_optimization: CollectiveOptimization
    preferred_dataset_splits: int
    endpoint_delay_ns: int = 10  # Sys::Sys: communication_delay = 10
    local_reduction_delay_ns: int = 1  # Sys::Sys: local_reduction_delay = 1
    active_chunks_per_dimension: int = 1  # Sys::Sys
    all_reduce_implementation: tuple[CollectiveAlgorithm, ...] = ()
    all_gather_implementation: tuple[CollectiveAlgorithm, ...] = ()
    reduce_scatter_implementation: tuple[CollectiveAlgorithm, ...] = ()
    all_to_all_implementation: tuple[CollectiveAlgorithm, ...] = ()
    all_reduce_implementation_custom: str | None = None  # Chakra ET prefix
    all_gather_implementation_custom: str | None = None
    reduce_scatter_implementation_custom: str | None = None
    all_to_all_implementation_custom: str | None = None
    per_node_custom_implementation: str | None = None  # YAML path
    nccl: NcclConfig | None = None  # the NCCL model's section
    roofline_enabled: bool = False
    peak_perf_tflops: float = 0.0  # Sys::Sys: peak_perf = 0
    local_mem_bw_gbps: float = 0.0  # Sys::Sys: local_mem_bw = 0; 1 GB = 1e9 B
    model_shared_bus: bool = False
    L: float = 0.0  # ns
    o: float = 0.0  # ns
    g: float = 0.0  # ns
    G: float = 0.0  # ns per byte
    trace_enabled: bool = False
    replay_only: bool = False
    track_local_mem: bool = False
    local_mem_trace_filename: str = "local_mem_trace"
    legacy: tuple[tuple[str, Any], ...] = ()
    source: str = field(default=PYTHON_SOURCE, compare=False)

    def __post_init__(self) -> None:
        for f in fields(self):
            if isinstance(getattr(self, f.name), list):
                object.__setattr__(self, f.name, tuple(getattr(self, f.name)))
        problems = Problems(self.source)
        raw: dict[str, Any] = {}
        for key in _KEYS:
            value = getattr(self, key.attr)
            if value is None or (isinstance(value, (tuple, list)) and not value):
                continue  # absent key (empty algorithm list, no custom path)
            raw[key.name] = _to_raw(value)
        legacy = dict(self.legacy.items() if isinstance(self.legacy, Mapping) else self.legacy)
        for name in legacy:
            if name not in LEGACY_KEYS:
                problems.unknown(str(name), KNOWN_KEYS)
        raw.update({k: v for k, v in legacy.items() if k in LEGACY_KEYS})
        typed = _check(raw, problems)
        problems.raise_if_any()
        for key in _KEYS:
            if key.name in typed:
                object.__setattr__(self, key.attr, typed[key.name])
        object.__setattr__(self, "legacy", tuple((k, typed[k]) for k in LEGACY_KEYS if k in typed))
        for line in self._no_effect():
            warnings.warn(line, ConfigWarning, stacklevel=3)

    def _no_effect(self) -> list[str]:
        """Lines for values that are valid but change nothing, as upstream 2.0:
        the LogGP bus parameters and local-reduction-delay (read only by the
        bus model, model-shared-bus 1), a memory-trace name without
        track-local-mem, and ASTRA-sim 1.0 scheduling choices."""
        lines = []
        bus = [name for name in ("L", "o", "g", "G") if getattr(self, name)]
        if self.local_reduction_delay_ns != 1:  # Sys::Sys default
            bus.append("local-reduction-delay")
        if bus:
            lines.append(
                f"{self.source}: {', '.join(bus)}: no effect; upstream reads "
                f"{'it' if len(bus) == 1 else 'them'} only in its LogGP bus model "
                "(model-shared-bus 1), which astra does not model"
            )
        if self.local_mem_trace_filename != "local_mem_trace" and not self.track_local_mem:
            lines.append(f"{self.source}: local-mem-trace-filename: no effect without track-local-mem 1")
        legacy = dict(self.legacy)
        changed = [
            name for name, same in _LEGACY_AS_2_0.items() if name in legacy and legacy[name] not in same
        ]
        if changed:
            lines.append(
                f"{self.source}: {', '.join(changed)}: no effect; ASTRA-sim 2.0 "
                "schedules FIFO within and in ascending order across dimensions, "
                "without boost mode"
            )
        return lines

    # -- queries ------------------------------------------------------------
    def algorithms(self, collective: str) -> tuple[CollectiveAlgorithm, ...]:
        """Per-dimension algorithms of 'all-reduce', 'all-gather', 'reduce-scatter'
        or 'all-to-all' (empty if not configured)."""
        if collective not in COLLECTIVES:
            raise ValueError(f"unknown collective {collective!r}; expected one of {', '.join(COLLECTIVES)}")
        return getattr(self, f"{collective.replace('-', '_')}_implementation")

    def custom_implementation(self, collective: str) -> str | None:
        """The Chakra ET prefix replacing the native algorithm, if configured."""
        if collective not in COLLECTIVES:
            raise ValueError(f"unknown collective {collective!r}; expected one of {', '.join(COLLECTIVES)}")
        return getattr(self, f"{collective.replace('-', '_')}_implementation_custom")

    @property
    def peak_perf_flops(self) -> float:
        """Peak compute in FLOP/s (peak-perf * 1e12, as upstream)."""
        return self.peak_perf_tflops * FLOPS_PER_TFLOPS

    @property
    def local_mem_bw_bytes_per_s(self) -> float:
        """Local memory bandwidth in B/s (local-mem-bw * 1e9, as upstream)."""
        return self.local_mem_bw_gbps * BYTES_PER_GB_LOCAL

    def roofline_time_ns(self, num_ops: float, tensor_size_bytes: float) -> int:
        """Upstream roofline duration of a compute node, truncated to whole ns.

        perf = min(local_mem_bw_Bps * num_ops / tensor_size, peak_perf_FLOPs);
        time = num_ops / perf seconds (Roofline::get_perf, Workload::issue_comp).
        """
        intensity = num_ops / tensor_size_bytes
        perf = min(self.local_mem_bw_bytes_per_s * intensity, self.peak_perf_flops)
        return int(num_ops / perf * 1e9)

    def check_dims(self, dims_count: int) -> None:
        """Check the algorithm lists against the network's dimension count.

        Each non-empty list needs one entry per dimension, except a sole
        ``one*`` entry, which spans all dimensions.  Upstream asserts
        ``len <= dims`` and silently accepts a shorter list (collectives then
        use only the first dimensions); both are errors here.
        """
        problems = Problems(self.source)
        problems.extend(_dims_problems(self, dims_count))
        problems.raise_if_any()

    def to_dict(self) -> dict[str, Any]:
        """The system.json mapping: required keys plus every non-default value."""
        out: dict[str, Any] = {}
        defaults = {f.name: f.default for f in fields(self)}
        for key in _KEYS:
            value = getattr(self, key.attr)
            if key.name in _REQUIRED or value != defaults[key.attr]:
                raw = _to_raw(value)
                if isinstance(value, bool):
                    raw = int(value)  # upstream's 0/1 form
                elif key.parse is _custom:
                    raw = [raw]  # upstream reads a one-entry list
                out[key.name] = raw
        for name, value in self.legacy:
            out[name] = int(value) if isinstance(value, bool) else value
        return out

    @classmethod
    def from_dict(cls, data: Any, source: str = PYTHON_SOURCE, *, dims: int | None = None) -> SystemConfig:
        """Validate a system.json-shaped mapping; raise one ConfigError if bad.

        With ``dims``, also check the algorithm lists (see :meth:`check_dims`).
        """
        problems = Problems(source)
        config = _parse(data, problems, dims)
        problems.raise_if_any()
        assert config is not None
        return config


def _to_raw(value: Any) -> Any:
    """A typed attribute back in system.json form (for shared validation)."""
    if isinstance(value, NcclConfig):
        return value.to_dict()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [str(v) if isinstance(v, str) else v for v in value]
    return value


def _check(raw: Mapping[str, Any], problems: Problems) -> dict[str, Any]:
    """Parse every known key of ``raw`` and run the cross-key checks."""
    typed: dict[str, Any] = {}
    for name, value in raw.items():
        parser = _BY_NAME[name].parse if name in _BY_NAME else LEGACY_KEYS[name]
        parsed = parser(name, value, problems)
        if parsed is not _INVALID:
            typed[name] = parsed
    for name, (feature, instead) in UNSUPPORTED.items():
        if typed.get(name):  # True, or a custom path / YAML name
            value = raw[name]
            shown = show(int(value) if isinstance(value, bool) else value)
            problems.add(name, f"{shown} is not supported by astra ({feature}); {instead}")
    uses_nccl = [
        f"{c}-implementation"
        for c in COLLECTIVES
        if any(str(a) == "nccl" for a in typed.get(f"{c}-implementation", ()))
    ]
    if uses_nccl and "nccl" not in raw:
        problems.add(
            uses_nccl[0], '"nccl" needs a "nccl" section naming the machine, e.g. "nccl": {"gpu": "H100"}'
        )
    if typed.get("roofline-enabled"):
        for name, unit in (("peak-perf", "TFLOP/s"), ("local-mem-bw", "GB/s")):
            if name in raw and name not in typed:
                continue  # already reported
            if not typed.get(name):
                got = show(raw[name]) if name in raw else "nothing"
                problems.add(name, f"must be > 0 ({unit}) when roofline-enabled is 1, got {got}")
    return typed


def _parse(data: Any, problems: Problems, dims: int | None) -> SystemConfig | None:
    mapping = expect_mapping(data, problems)
    if mapping is None:
        return None
    raw: dict[str, Any] = {}
    for name, value in mapping.items():
        if name in _BY_NAME or name in LEGACY_KEYS:
            raw[name] = value
        else:
            problems.unknown(str(name), KNOWN_KEYS)
    for name in _REQUIRED:
        if name not in mapping:
            problems.missing(name)
    typed = _check(raw, problems)
    if problems:
        return None
    kwargs = {_BY_NAME[k].attr: v for k, v in typed.items() if k in _BY_NAME}
    legacy = tuple((k, typed[k]) for k in LEGACY_KEYS if k in typed)
    config = SystemConfig(**kwargs, legacy=legacy, source=problems.source)
    if dims is not None:
        problems.extend(_dims_problems(config, dims))
    return None if problems else config


def _dims_problems(config: SystemConfig, dims_count: int) -> list[tuple[str, str]]:
    out = []
    for collective in COLLECTIVES:
        algorithms = config.algorithms(collective)
        if not algorithms or algorithms[0].kind.spans_all_dims:
            continue
        if len(algorithms) != dims_count:
            out.append(
                (
                    f"{collective}-implementation",
                    f"expected {dims_count} entries (one per dimension), got {len(algorithms)}",
                )
            )
    return out


def load_system(path: str | os.PathLike[str], *, dims: int | None = None) -> SystemConfig:
    """Read and validate a system.json; raise one ConfigError naming the file.

    ``dims`` (the network's dimension count), if given, also checks that each
    algorithm list has one entry per dimension.
    """
    problems = Problems(source_name(path))
    data = read_json(path, problems)
    config = _parse(data, problems, dims)
    problems.raise_if_any()
    assert config is not None
    return config


def upstream_system(algorithm: str, dims: int) -> dict[str, Any]:
    """The system.json of upstream's examples, as a dict, with ``algorithm`` on each of
    ``dims`` dimensions for every collective: LIFO scheduling, localBWAware, 4 chunks
    per collective, one active chunk per dimension, 10 ns endpoint delay, 1600 GB/s
    local memory (upstream's ``examples/system/native_collectives``). ``simulate``
    takes it as ``system``; ``json.dumps`` of it is a valid system.json."""
    return {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 10,
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 4,
        "collective-optimization": "localBWAware",
        "local-mem-bw": 1600,
        **{
            f"{c}-implementation": [algorithm] * dims
            for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
        },
    }
