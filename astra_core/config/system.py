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

Checks: :class:`SystemConfig` is a pydantic model through
:mod:`astra_core.config.model`, one field per key (the key is its alias), so
every problem of a file is one line ``system.json: key: message``
(``all-reduce-implementation[1]: ...`` for a list entry, ``nccl.gpu: ...``
in the NCCL section); a key written ``null`` is an error, not a default.

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
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from typing import Annotated, Any

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    InstanceOf,
    ValidationInfo,
    model_validator,
)

from astra_core.config.collective_impl import NCCL, CollectiveAlgorithm, as_algorithm
from astra_core.config.files import read_json, source_name
from astra_core.config.issues import (
    PYTHON_SOURCE,
    ConfigWarning,
    Problems,
    as_flag,
    as_number,
    as_str,
    show,
)
from astra_core.config.limits import MAX_CHUNKS, MAX_INT32, MAX_RATE, MIN_RATE, as_delay, as_int_delay
from astra_core.config.model import (
    ConfigModel,
    Flag,
    checked,
    int_in,
    one_of,
    raise_problems,
    source_of,
    validate_mapping,
)
from astra_core.config.nccl import NcclConfig

#: TFLOP/s -> FLOP/s (upstream Sys.cc: ``peak_perf * 1000000000000``).
FLOPS_PER_TFLOPS = 1e12
#: GB/s -> B/s for local-mem-bw (upstream Sys.cc: ``local_mem_bw * 1000000000``).
BYTES_PER_GB_LOCAL = 1e9


class SchedulingPolicy(str, Enum):
    """scheduling-policy: which waiting collective a queue serves first."""

    LIFO = "LIFO"
    FIFO = "FIFO"
    EXPLICIT = "EXPLICIT"

    def __str__(self) -> str:
        return self.value


class CollectiveOptimization(str, Enum):
    """collective-optimization: localBWAware runs a multi-dimension all-reduce
    as reduce-scatters, an all-reduce on the last dimension, then all-gathers."""

    BASELINE = "baseline"
    LOCAL_BW_AWARE = "localBWAware"

    def __str__(self) -> str:
        return self.value


#: The four collectives that have an ``<name>-implementation`` key.
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")

#: Keys only ASTRA-sim 1.0 read; upstream 2.0 ignores them (Sys::Sys hard-codes
#: intra-dimension FIFO and inter-dimension ascending scheduling).  Accepted so
#: that existing files load, with 1.0's values (Sys::parse_var); no effect.
LEGACY_KEYS = (
    "boost-mode",
    "intra-dimension-scheduling",
    "inter-dimension-scheduling",
    "seprate-log",  # sic, 1.0's spelling
    "gap-denominator",
)

#: Legacy values that mean what 2.0 does anyway (Sys::Sys: intra-dimension
#: FIFO, inter-dimension ascending, no boost mode); others draw a warning.
_LEGACY_AS_2_0 = {
    "boost-mode": (False,),
    "intra-dimension-scheduling": ("FIFO",),
    "inter-dimension-scheduling": ("baseline", "ascending"),
}

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

Check = Callable[[Any], tuple[Any, str | None]]


def _rate(unit: str) -> BeforeValidator:
    """0 (unset, upstream's default) or a rate in [MIN_RATE, MAX_RATE] ``unit``."""

    def check(value: Any) -> tuple[float | None, str | None]:
        rate, err = as_number(value, minimum=0, maximum=MAX_RATE)
        if rate is not None and 0 < rate < MIN_RATE:  # (None exactly when err is not)
            return None, f"must be 0 (unset) or >= {MIN_RATE:g} {unit}, got {show(value)}"
        return rate, err

    return checked(check)


def _off_only(key: str, check: Check) -> BeforeValidator:
    """``check``, then refuse any value that switches on an :data:`UNSUPPORTED` feature."""
    feature, instead = UNSUPPORTED[key]

    def refuse(value: Any) -> tuple[Any, str | None]:
        typed, err = check(value)
        if typed:  # True, or a YAML path
            shown = show(int(value) if isinstance(value, bool) else value)
            return None, f"{shown} is not supported by astra ({feature}); {instead}"
        return typed, err

    return checked(refuse)


def _as_algorithm_list(value: Any) -> tuple[Any, str | None]:
    """The shape of an ``*-implementation`` list; its entries are then checked
    one by one (``all-reduce-implementation[1]: ...``)."""
    if not isinstance(value, (list, tuple)):
        return None, f"expected a list of algorithm names (one per dimension), got {show(value)}"
    if not value:
        return None, "needs at least one algorithm name (one per dimension)"
    parsed = [as_algorithm(item)[0] for item in value]
    spanning = [a for a in parsed if a is not None and a.kind.spans_all_dims]
    if spanning and len(value) > 1 and None not in parsed:
        # Upstream builds one all-NPU dimension for a one* entry and stops
        # reading the list there, so anything else in it is silently unused.
        return None, (
            f"{str(spanning[0])!r} spans all dimensions and must be the only entry, got {len(value)} entries"
        )
    return value, None


def _as_custom(value: Any) -> tuple[str | None, str | None]:
    """A one-entry list naming a Chakra ET prefix (or an MSCCL .xml file); a
    bare string is that entry."""
    # Upstream: "There should be 1 Chakra ET only. In multi-dim collectives,
    # that 1 ET file covers all dimensions" (CollectiveImplLookup.cc).
    entries = [value] if isinstance(value, str) else value
    if not isinstance(entries, (list, tuple)) or len(entries) != 1:
        got = f"{len(entries)} entries" if isinstance(entries, (list, tuple)) else show(value)
        return None, f"expected a list with exactly one Chakra ET prefix, got {got}"
    return as_str(entries[0])


def _as_nccl(value: Any) -> tuple[Any, str | None]:
    """The ``nccl`` section is a mapping (its keys are NcclConfig's to check)."""
    if isinstance(value, (dict, NcclConfig)):
        return value, None
    return None, f"expected a mapping of NCCL settings, got {show(value)}"


#: One ``*-implementation`` list: an algorithm per dimension.
Algorithms = Annotated[
    tuple[Annotated[InstanceOf[CollectiveAlgorithm], checked(as_algorithm)], ...],
    checked(_as_algorithm_list),
]
#: One ``*-implementation-custom`` entry (None: absent).
Custom = Annotated[str | None, checked(_as_custom)]
#: A LogGP bus parameter, ns (or ns per byte).
Delay = Annotated[float, checked(as_delay)]
#: A 0/1 switch of an ASTRA-sim 1.0 key (None: absent).
LegacyFlag = Annotated[bool | None, checked(as_flag)]

#: The three values ``SystemConfig(...)`` takes positionally (upstream's required keys).
_POSITIONAL = ("scheduling_policy", "collective_optimization", "preferred_dataset_splits")


class SystemConfig(ConfigModel):
    """The parsed system.json.  Attribute names carry their unit; the module
    docstring gives each key's default and meaning.

    Algorithm lists are tuples of :class:`CollectiveAlgorithm` (strings with
    ``.kind`` and ``.window``); an empty tuple means the key was absent, and a
    collective of that type then has no native implementation (upstream fails
    when such a collective is issued).  The ASTRA-sim 1.0 keys (boost_mode,
    ...: None when absent) have no effect; :attr:`legacy` lists those present.

    Built from a file (:func:`load_system`), a system.json-shaped mapping
    (:meth:`from_dict`) or directly, with attribute names: the three required
    values may be positional, strings are accepted for the enums and algorithm
    names, lists for tuples, and ``legacy`` takes ``(key, value)`` pairs or a
    mapping of the 1.0 keys.  Each way checks everything and raises one
    :class:`~astra_core.errors.ConfigError` naming the file (``<python>`` when
    built directly) and the system.json key of each problem; values that
    change nothing are one :class:`ConfigWarning` line each.  Frozen; two
    configs are equal when their values are, wherever they came from.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)  # STRICT, frozen

    scheduling_policy: Annotated[SchedulingPolicy, one_of(*(e.value for e in SchedulingPolicy))] = Field(
        alias="scheduling-policy"
    )
    collective_optimization: Annotated[
        CollectiveOptimization, one_of(*(e.value for e in CollectiveOptimization))
    ] = Field(alias="collective-optimization")
    preferred_dataset_splits: Annotated[int, int_in(1, MAX_CHUNKS)] = Field(alias="preferred-dataset-splits")
    # Sys::Sys: communication_delay = 10, local_reduction_delay = 1, active_chunks_per_dimension = 1
    endpoint_delay_ns: Annotated[int, checked(as_int_delay)] = Field(10, alias="endpoint-delay")
    local_reduction_delay_ns: Annotated[int, checked(as_int_delay)] = Field(1, alias="local-reduction-delay")
    active_chunks_per_dimension: Annotated[int, int_in(1, MAX_INT32)] = Field(
        1, alias="active-chunks-per-dimension"
    )
    all_reduce_implementation: Algorithms = Field((), alias="all-reduce-implementation")
    all_gather_implementation: Algorithms = Field((), alias="all-gather-implementation")
    reduce_scatter_implementation: Algorithms = Field((), alias="reduce-scatter-implementation")
    all_to_all_implementation: Algorithms = Field((), alias="all-to-all-implementation")
    all_reduce_implementation_custom: Custom = Field(None, alias="all-reduce-implementation-custom")
    all_gather_implementation_custom: Custom = Field(None, alias="all-gather-implementation-custom")
    reduce_scatter_implementation_custom: Custom = Field(None, alias="reduce-scatter-implementation-custom")
    all_to_all_implementation_custom: Custom = Field(None, alias="all-to-all-implementation-custom")
    nccl: Annotated[NcclConfig | None, checked(_as_nccl)] = None
    per_node_custom_implementation: Annotated[
        str | None, _off_only("per-node-custom-implementation", as_str)
    ] = Field(None, alias="per-node-custom-implementation")
    roofline_enabled: Flag = Field(False, alias="roofline-enabled")
    peak_perf_tflops: Annotated[float, _rate("TFLOP/s")] = Field(0.0, alias="peak-perf")  # Sys::Sys: 0
    local_mem_bw_gbps: Annotated[float, _rate("GB/s")] = Field(0.0, alias="local-mem-bw")  # 1 GB = 1e9 B
    model_shared_bus: Annotated[bool, _off_only("model-shared-bus", as_flag)] = Field(
        False, alias="model-shared-bus"
    )
    L: Delay = 0.0  # ns
    o: Delay = 0.0  # ns
    g: Delay = 0.0  # ns
    G: Delay = 0.0  # ns per byte
    trace_enabled: Annotated[bool, _off_only("trace-enabled", as_flag)] = Field(False, alias="trace-enabled")
    replay_only: Flag = Field(False, alias="replay-only")
    track_local_mem: Annotated[bool, _off_only("track-local-mem", as_flag)] = Field(
        False, alias="track-local-mem"
    )
    local_mem_trace_filename: Annotated[str, checked(as_str)] = Field(
        "local_mem_trace", alias="local-mem-trace-filename"
    )
    # ASTRA-sim 1.0 (LEGACY_KEYS), with 1.0's values (Sys::parse_var)
    boost_mode: LegacyFlag = Field(None, alias="boost-mode")
    intra_dimension_scheduling: Annotated[
        str | None, one_of("FIFO", "RG", "SCF", "smallestFirst", "lessRemainingPhaseFirst")
    ] = Field(None, alias="intra-dimension-scheduling")
    inter_dimension_scheduling: Annotated[
        str | None,
        one_of(
            "baseline",
            "ascending",
            "themis",
            "offlineGreedy",
            "themisFlex",
            "offlineGreedyFlex",
            "roundRobin",
        ),
    ] = Field(None, alias="inter-dimension-scheduling")
    seprate_log: LegacyFlag = Field(None, alias="seprate-log")
    gap_denominator: Annotated[int | None, int_in(1, MAX_INT32)] = Field(None, alias="gap-denominator")

    def __init__(
        self,
        *args: Any,
        legacy: Mapping[str, Any] | Iterable[tuple[str, Any]] = (),
        **values: Any,
    ) -> None:
        """``SystemConfig(scheduling_policy, collective_optimization,
        preferred_dataset_splits, **attributes, legacy=...)``; raises
        ConfigError (source ``<python>``) naming the system.json key of each
        problem, TypeError for a call Python would refuse."""
        if len(args) > len(_POSITIONAL):
            raise TypeError(
                f"SystemConfig takes at most {len(_POSITIONAL)} positional arguments, got {len(args)}"
            )
        twice = sorted(set(_POSITIONAL[: len(args)]) & set(values))
        if twice:
            raise TypeError(f"SystemConfig got multiple values for {', '.join(twice)}")
        fields = type(self).model_fields
        named = {**dict(zip(_POSITIONAL, args)), **values}
        data = {(fields[name].alias or name) if name in fields else name: v for name, v in named.items()}
        problems = Problems(PYTHON_SOURCE)
        for key, value in legacy.items() if isinstance(legacy, Mapping) else legacy:
            if key in LEGACY_KEYS:
                data[key] = value
            else:
                problems.unknown(str(key), LEGACY_KEYS)
        problems.raise_if_any()
        super().__init__(**data)  # ConfigModel: bad values raise one ConfigError naming <python>

    @model_validator(mode="after")
    def _check_across_keys(self, info: ValidationInfo) -> SystemConfig:
        """The NCCL section when an algorithm list names nccl; peak-perf and
        local-mem-bw for the roofline; then a warning for each value that
        changes nothing."""
        problems: list[tuple[str | None, str]] = []
        uses_nccl = [f"{c}-implementation" for c in COLLECTIVES if "nccl" in self.algorithms(c)]
        if uses_nccl and self.nccl is None:
            problems.append(
                (
                    uses_nccl[0],
                    '"nccl" needs a "nccl" section naming the machine, e.g. "nccl": {"gpu": "H100"}',
                )
            )
        if self.roofline_enabled:
            for name, key, unit in (
                ("peak_perf_tflops", "peak-perf", "TFLOP/s"),
                ("local_mem_bw_gbps", "local-mem-bw", "GB/s"),
            ):
                if not getattr(self, name):
                    got = "0" if name in self.model_fields_set else "nothing"
                    problems.append((key, f"must be > 0 ({unit}) when roofline-enabled is 1, got {got}"))
        raise_problems(problems)
        for line in self._no_effect(source_of(info)):
            warnings.warn(line, ConfigWarning, stacklevel=2)
        return self

    def _no_effect(self, source: str) -> list[str]:
        """Lines for values that are valid but change nothing, as upstream 2.0:
        the LogGP bus parameters and local-reduction-delay (read only by the
        bus model, model-shared-bus 1), a memory-trace name without
        track-local-mem, ASTRA-sim 1.0 scheduling choices, and an ``nccl``
        section that no ``*-implementation`` list uses (only a ``["nccl"]``
        list reads it)."""
        lines = []
        if self.nccl is not None and not any(NCCL in self.algorithms(c) for c in COLLECTIVES):
            lines.append(
                f'{source}: nccl: no effect; no *-implementation list names "nccl", '
                "so no collective runs on the NCCL model"
            )
        bus = [name for name in ("L", "o", "g", "G") if getattr(self, name)]
        if self.local_reduction_delay_ns != 1:  # Sys::Sys default
            bus.append("local-reduction-delay")
        if bus:
            lines.append(
                f"{source}: {', '.join(bus)}: no effect; upstream reads "
                f"{'it' if len(bus) == 1 else 'them'} only in its LogGP bus model "
                "(model-shared-bus 1), which astra does not model"
            )
        if self.local_mem_trace_filename != "local_mem_trace" and not self.track_local_mem:
            lines.append(f"{source}: local-mem-trace-filename: no effect without track-local-mem 1")
        legacy = dict(self.legacy)
        changed = [
            name for name, same in _LEGACY_AS_2_0.items() if name in legacy and legacy[name] not in same
        ]
        if changed:
            lines.append(
                f"{source}: {', '.join(changed)}: no effect; ASTRA-sim 2.0 "
                "schedules FIFO within and in ascending order across dimensions, "
                "without boost mode"
            )
        return lines

    # -- queries ------------------------------------------------------------
    @property
    def legacy(self) -> tuple[tuple[str, Any], ...]:
        """The ASTRA-sim 1.0 keys present, as ``(key, value)`` pairs in
        :data:`LEGACY_KEYS` order; they have no effect."""
        values = (getattr(self, key.replace("-", "_")) for key in LEGACY_KEYS)
        return tuple((key, value) for key, value in zip(LEGACY_KEYS, values) if value is not None)

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
        use only the first dimensions); both are errors here, raised as one
        ConfigError naming :attr:`source`.
        """
        problems = Problems(self.source)
        for collective in COLLECTIVES:
            algorithms = self.algorithms(collective)
            if algorithms and not algorithms[0].kind.spans_all_dims and len(algorithms) != dims_count:
                problems.add(
                    f"{collective}-implementation",
                    f"expected {dims_count} entries (one per dimension), got {len(algorithms)}",
                )
        problems.raise_if_any()

    def to_dict(self) -> dict[str, Any]:
        """The system.json mapping: required keys plus every non-default value,
        written as upstream reads them (switches 0/1, custom entries as one-entry
        lists)."""
        out: dict[str, Any] = {}
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            if not field.is_required() and value == field.default:
                continue
            if isinstance(value, NcclConfig):
                value = value.to_dict()
            elif isinstance(value, Enum):
                value = value.value
            elif isinstance(value, bool):
                value = int(value)  # upstream's 0/1 form
            elif isinstance(value, tuple):
                value = [str(algorithm) for algorithm in value]
            elif name.endswith("_implementation_custom"):
                value = [value]  # upstream reads a one-entry list
            out[field.alias or name] = value
        return out

    @classmethod
    def from_dict(cls, data: Any, source: str = PYTHON_SOURCE, *, dims: int | None = None) -> SystemConfig:
        """Validate a system.json-shaped mapping read from ``source``; raise one
        ConfigError (one line per problem) if bad.

        With ``dims``, also check the algorithm lists (see :meth:`check_dims`).
        """
        config = validate_mapping(cls, data, source)
        if dims is not None:
            config.check_dims(dims)
        return config


#: Every key system.json may have: upstream's and the ASTRA-sim 1.0 ones.
KNOWN_KEYS = tuple(field.alias or name for name, field in SystemConfig.model_fields.items())


def load_system(path: str | os.PathLike[str], *, dims: int | None = None) -> SystemConfig:
    """Read and validate a system.json; raise one ConfigError naming the file.

    ``dims`` (the network's dimension count), if given, also checks that each
    algorithm list has one entry per dimension.
    """
    problems = Problems(source_name(path))
    data = read_json(path, problems)
    problems.raise_if_any()  # duplicate keys
    return SystemConfig.from_dict(data, problems.source, dims=dims)


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


def nccl_system(gpu: str) -> dict[str, Any]:
    """The system.json, as a dict, that runs every collective on the NCCL model of ``gpu``
    (``nccl.gpu``: a preset NCCL knows, e.g. ``H100``), LIFO scheduling, one split per
    collective (NCCL runs it whole). ``simulate`` takes it as ``system``."""
    return {
        "scheduling-policy": "LIFO",
        "collective-optimization": "baseline",
        "preferred-dataset-splits": 1,
        **{
            f"{c}-implementation": ["nccl"]
            for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
        },
        "nccl": {"gpu": gpu},
    }
