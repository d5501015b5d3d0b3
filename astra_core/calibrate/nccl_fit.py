"""Fitting a calibrated NCCL profile to a user's nccl-tests logs.

For every row of every log the NCCL model decides what NCCL would run (the
algorithm, protocol and channels, from NCCL's own tables, as NCCL decides at
run time: those of the release the log's header names where astra models it,
else system.json's ``nccl.version``); the fit changes only what those choices
cost. The profile's cells are absolute values, the newest release's times the
fitted factors. Its parameters are
few and shared, so that a profile says something about the rows it was not
fitted on (another collective, another node count):

* per protocol (LL, LL128, Simple), a factor on the latencies inside a node:
  every algorithm's base latency (NCCL's ``baseLatencies``) and its NVLink and
  PCI step latencies (``hwLatencies``) with that protocol;
* per protocol, a factor on the network step latencies (``hwLatencies[NET]``),
  when a log spans several nodes;
* per scope (one node, several nodes), an efficiency on the bus bandwidth
  NCCL's model gives every algorithm and protocol;
* the host's time to launch one NCCL call (µs), when a log's thread drives
  several GPUs (``-g 8``): nccl-tests times ``iters`` iterations back to back
  and divides, so a row costs at least the ``g`` launches of an iteration
  (the floor of small sizes).

A parameter no row depends on is left out (a one-node log leaves the network
latencies and the several-node efficiency at NCCL's values). The residual of
a row is ``log(predicted / measured)`` (a row of 8 B weighs as much as one of
8 GiB); a prior adds ``prior x log(factor)`` per factor and ``prior x
(launch - NCCL's) / 10 µs``, so that what the rows cannot tell apart stays near NCCL's
values. Solved with ``scipy.optimize.least_squares`` (trust-region
reflective), each latency factor between 1/20 and 20, each efficiency
between 1/20 and 1 (:data:`~astra_core.config.nccl_profile.MAX_BW_EFFICIENCY`),
the launch time between 0 and 100 µs; a parameter the rows push against its bound is a warning
(:class:`~astra_core.config.issues.ConfigWarning`) naming it, and a row more
than :data:`ABSURD` times from NCCL's own time for it is refused naming its
file and line. The profile lists every table cell a factor changed.

Predicted times are the NCCL model's (:meth:`NcclModel.choose`; NCCL's
``p2p`` cost of the slowest pair for ``sendrecv_perf``), which is what astra
reports on a fabric as fast as NCCL's rating.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from astra_core.calibrate.nccl_tests import NcclTestsLog
from astra_core.config.issues import ConfigWarning
from astra_core.config.nccl import nccl_release
from astra_core.config.nccl_env import PROTO_NAMES
from astra_core.config.nccl_profile import MAX_BW_EFFICIENCY, SCOPES, NcclProfile
from astra_core.config.network import NetworkConfig
from astra_core.config.system import SystemConfig
from astra_core.errors import ConfigError
from astra_core.system.collectives.nccl.model import P2P_LL_THRESHOLD, NcclModel
from astra_core.system.collectives.nccl.tuning import (
    DEFAULT_CONSTANTS,
    Algo,
    Proto,
    constants_for,
    with_profile,
)
from astra_core.system.comm_types import CommType

_COMM_TYPES = {
    "all-reduce": CommType.ALL_REDUCE,
    "all-gather": CommType.ALL_GATHER,
    "reduce-scatter": CommType.REDUCE_SCATTER,
    "all-to-all": CommType.ALL_TO_ALL,
}
NVLINK, PCI, NET = 0, 1, 2
#: Each parameter stays within this factor of NCCL's value.
BOUND = 20.0
#: A row more than this factor away from NCCL's own time for it on the machine (its
#: latency plus its bytes at NCCL's rating of the links) is refused: the fit reaches
#: BOUND (20x) either way, so a row 1000x off is 50x past anything a profile could
#: say, the mark of a broken measurement (a garbage value, a hung iteration averaged
#: in, a log of another machine), not of a slow one.
ABSURD = 1000.0

#: A parameter: ("lat", proto), ("net", proto), ("eff", scope) or ("launch",).
Param = tuple[Any, ...]


@dataclass(frozen=True)
class FitRow:
    """One log row (``log``: the log's label): measured and predicted time (µs)
    before and after the fit,
    and what NCCL runs (``Ring/LL``; ``p2p/Simple`` for send/receive rows)."""

    log: str
    size_bytes: int
    measured_us: float
    before_us: float
    after_us: float
    choice: str


@dataclass(frozen=True)
class FitResult:
    """The fitted profile and every row's times."""

    profile: NcclProfile
    rows: tuple[FitRow, ...]

    def geomean_error(self, log: str | None = None, *, after: bool = True) -> float:
        """Geometric mean of ``|predicted / measured - 1|`` over the rows (of the log
        labelled ``log``)."""
        rows = [r for r in self.rows if log is None or r.log == log]
        errors = [abs((r.after_us if after else r.before_us) / r.measured_us - 1) for r in rows]
        return math.exp(sum(math.log(max(e, 1e-9)) for e in errors) / len(errors))


def log_machine(log: NcclTestsLog, system: SystemConfig, network: NetworkConfig) -> NetworkConfig:
    """The part of ``network`` the log ran on: one node's dimension 0 cut to the
    log's GPUs, or ``nodes`` of dimension 0's nodes, each cut to the log's GPUs per
    node with their NICs (NCCL's topology of such a communicator holds those GPUs
    and the NICs nearest them). ConfigError naming the log when the network cannot
    hold it."""
    data = network.to_dict()
    per_node = data["npus_count"][0]
    if log.gpus_per_node > per_node:
        raise ConfigError(f"{log.path}: {log.gpus_per_node} GPUs on one host, but a node has {per_node}")
    if log.nodes == 1:
        data = {key: value[:1] for key, value in data.items()}
        data["npus_count"] = [log.ranks]
    else:
        if len(data["npus_count"]) < 2:
            raise ConfigError(
                f"{log.path}: {log.nodes} nodes of {log.gpus_per_node} GPUs; the network needs "
                f"a dimension 1 of NICs (it has {data['npus_count']})"
            )
        data = {key: value[:2] for key, value in data.items()}
        data["npus_count"] = [log.gpus_per_node, log.nodes]
        if log.gpus_per_node == 1:  # no NVSwitch: the nodes' NICs alone
            data = {key: value[1:] for key, value in data.items()}
    if system.nccl is None:
        raise ConfigError(f'{system.source}: calibrating NCCL needs an "nccl" section naming the GPU')
    return NetworkConfig.from_dict(data, source=f"the network of {log.path}")


def predict_us(model: NcclModel, log: NcclTestsLog, size: int) -> tuple[float, str]:
    """The model's time of one row (µs) and what NCCL runs for it: at least the
    launches of the calls the log's thread makes per iteration."""
    floor = log.gpus_per_thread * model.constants.launch_us
    time_us, choice = _kernel_us(model, log, size)
    return max(floor, time_us), choice


def _kernel_us(model: NcclModel, log: NcclTestsLog, size: int) -> tuple[float, str]:
    n = log.ranks
    if log.collective == "send-recv":  # rank r sends to r + 1 and receives from r - 1
        ll = size <= P2P_LL_THRESHOLD
        worst = max(model.p2p_ns(r, (r + 1) % n, size) for r in range(n))
        return worst / 1000.0, "p2p/LL" if ll else "p2p/SIMPLE"
    comm_type = _COMM_TYPES[log.collective]
    per_rank = size // n if comm_type is CommType.ALL_GATHER else size
    algo, proto, _, time_us, _ = model.choose(comm_type, tuple(range(n)), max(per_rank, 1))
    if comm_type is CommType.ALL_TO_ALL:
        return time_us, "p2p/SIMPLE"
    return time_us, f"{Algo(algo).name}/{Proto(proto).name}"


def _cell(choice: str) -> tuple[int, int]:
    algo, proto = choice.split("/")
    return (Algo.RING if algo == "p2p" else Algo[algo]), Proto[proto]


#: The launch parameter is in units of this many µs (the prior's scale).
LAUNCH_SCALE_US = 10.0


def _profile(params: Sequence[Param], x: np.ndarray, gpu: str, version: str | None) -> NcclProfile:
    """The profile of parameter values ``x`` (log factors; the launch time's
    change in units of :data:`LAUNCH_SCALE_US`), every affected cell listed."""
    base: dict[tuple[int, int], float] = {}
    hw: dict[tuple[int, int, int], float] = {}
    eff: dict[tuple[int, int, int], float] = {}
    launch = None
    c = DEFAULT_CONSTANTS
    for param, value in zip(params, x, strict=True):
        if param[0] == "launch":
            launch = c.launch_us + float(value) * LAUNCH_SCALE_US
            continue
        factor = math.exp(float(value))
        for algo in Algo:
            if param[0] == "eff":
                for proto in Proto:
                    eff[(param[1], algo, proto)] = factor
                continue
            proto = param[1]
            links = (NVLINK, PCI) if param[0] == "lat" else (NET,)
            if param[0] == "lat" and c.base_latency_us[algo][proto]:
                base[(algo, proto)] = c.base_latency_us[algo][proto] * factor
            for link in links:
                if c.hw_latency_us[link][algo][proto]:
                    hw[(link, algo, proto)] = c.hw_latency_us[link][algo][proto] * factor
    return NcclProfile(
        gpu=gpu,
        nccl_version=version,
        launch_us=launch,
        base_latency_us=base,
        hw_latency_us=hw,
        bw_efficiency=eff,
    )


def _check_device(log: NcclTestsLog, gpu: str) -> None:
    """ConfigError naming the log when the GPU its rank lines name is not the system's
    ``nccl.gpu`` (the preset's name is not a word of the device's: ``H100`` is one of
    ``NVIDIA H100 80GB HBM3``, ``B200`` is not one of ``NVIDIA GB200``)."""
    if log.device is None or re.search(rf"(?<![A-Za-z0-9]){re.escape(gpu)}(?![A-Za-z0-9])", log.device, re.I):
        return
    raise ConfigError(
        f"{log.path}: ran on {log.device}, but the system's nccl.gpu is {gpu}: "
        "fit on logs of the machine the system describes"
    )


class _Problem:
    """The logs with their machines, and the rows' predictions for a parameter vector."""

    def __init__(self, logs: Sequence[NcclTestsLog], system: SystemConfig, network: NetworkConfig):
        self.logs = logs
        self.system = system
        self.machines = [log_machine(log, system, network) for log in logs]
        self.per_node = network.dims[0].npus
        assert system.nccl is not None
        self.gpu = system.nccl.gpu
        for log in logs:
            _check_device(log, self.gpu)
        versions = {log.nccl_version for log in logs if log.nccl_version}
        self.version = versions.pop() if len(versions) == 1 else None
        assert system.nccl is not None
        self.releases = [self._release(log, system.nccl.version) for log in logs]

    @staticmethod
    def _release(log: NcclTestsLog, configured: str | None) -> str | None:
        """The NCCL release whose tables choose for ``log``: the one its header
        names where astra models it, else system.json's ``nccl.version``."""
        if log.nccl_version is not None:
            release, _ = nccl_release(log.nccl_version)
            if release is not None:
                return release
        return configured

    def _node(self, log: NcclTestsLog) -> dict[str, int | None]:
        """The log's GPUs per node and the NICs they hold of a node of ``network``."""
        assert self.system.nccl is not None
        nics = self.system.nccl.nics_per_node
        if nics is not None:
            nics = max(1, nics * log.gpus_per_node // self.per_node)
        return {"gpus_per_node": log.gpus_per_node, "nics_per_node": nics}

    def predict(self, profile: NcclProfile | None) -> list[tuple[float, str]]:
        assert self.system.nccl is not None
        out: list[tuple[float, str]] = []
        for log, net, release in zip(self.logs, self.machines, self.releases, strict=True):
            config = self.system.nccl.model_copy(update={"version": release, **self._node(log)})
            constants = constants_for(release)
            if profile is not None:
                constants = with_profile(constants, profile)
            model = NcclModel(config, net, self.system.source, constants)
            out.extend(predict_us(model, log, point.size_bytes) for point in log.points)
        return out

    def check_rows(self, before: list[tuple[float, str]]) -> None:
        """ConfigError naming the file and line of a row whose time is more than
        :data:`ABSURD` times from ``before``, NCCL's own time for it (µs)."""
        rows = [(log, point) for log in self.logs for point in log.points]
        for (log, point), (nccl_us, choice) in zip(rows, before, strict=True):
            if not 1 / ABSURD <= point.time_us / nccl_us <= ABSURD:
                raise ConfigError(
                    f"{log.path}:{point.line}: time: more than {ABSURD:g}x from the {nccl_us:.3g} µs "
                    f"NCCL's model gives {point.size_bytes} bytes of {log.collective} ({choice}) on "
                    f"the machine of --system and --network: not a measurement of it, got {point.time_us:g}"
                )

    def candidates(self, choices: list[str]) -> list[Param]:
        """Every parameter some row's cost could depend on."""
        found: list[Param] = [("launch",)]
        rows = [(log, point) for log in self.logs for point in log.points]
        for (log, _), choice in zip(rows, choices, strict=True):
            proto = _cell(choice)[1]
            scope = 0 if log.nodes == 1 else 1
            for param in (("lat", proto), ("net", proto), ("eff", scope)):
                if param not in found and not (param[0] == "net" and scope == 0):
                    found.append(param)
        return found


def fit(
    logs: Sequence[NcclTestsLog], system: SystemConfig, network: NetworkConfig, prior: float = 0.1
) -> FitResult:
    """Fit a profile to ``logs`` on the machine of ``system`` (its ``nccl``
    section) and ``network`` (see the module docstring). ConfigError naming a
    log that does not fit the machine."""
    problem = _Problem(logs, system, network)
    measured = np.array([point.time_us for log in logs for point in log.points])
    before = problem.predict(None)
    problem.check_rows(before)
    choices = [choice for _, choice in before]
    params = problem.candidates(choices)
    # keep the parameters some row's time moves with
    base_times = np.array([t for t, _ in before])
    kept = []
    for k, param in enumerate(params):
        u = np.zeros(len(params))
        u[k] = 0.05
        moved = np.array([t for t, _ in problem.predict(_profile(params, u, problem.gpu, None))])
        if np.any(np.abs(moved / base_times - 1) > 1e-9):
            kept.append(param)

    def residuals(x: np.ndarray) -> np.ndarray:
        times = np.array([t for t, _ in problem.predict(_profile(kept, x, problem.gpu, None))])
        return np.concatenate([np.log(times / measured), prior * x])

    bound = math.log(BOUND)
    launch = DEFAULT_CONSTANTS.launch_us / LAUNCH_SCALE_US
    low = [-launch if p[0] == "launch" else -bound for p in kept]
    top = {"launch": 100.0 / LAUNCH_SCALE_US - launch, "eff": math.log(MAX_BW_EFFICIENCY)}
    high = [top.get(p[0], bound) for p in kept]
    # NCCL's values, but the efficiencies inside their bound of 1: trust-region reflective
    # moves a start off its bound by 1e-10 and takes that as its first trust radius
    start = np.array([math.log(START_EFFICIENCY) if p[0] == "eff" else 0.0 for p in kept])
    solution = least_squares(residuals, start, jac=_jacobian(residuals, high), bounds=(low, high))
    _warn_at_bounds(kept, solution, low, high)
    profile = _profile(kept, solution.x, problem.gpu, problem.version)
    result = _compare(problem, profile, before)
    fitted_on = tuple(
        {
            "log": log.path,
            "collective": log.collective,
            "ranks": log.ranks,
            "nodes": log.nodes,
            "points": len(log.points),
            "geomean-error-before": round(result.geomean_error(log.label, after=False), 4),
            "geomean-error-after": round(result.geomean_error(log.label), 4),
        }
        for log in logs
    )
    return replace(result, profile=replace(profile, fitted_on=fitted_on))


#: Where the fit starts the efficiencies (they may not pass 1, NCCL's own figure).
START_EFFICIENCY = 0.95
#: The finite-difference step of the fit's Jacobian, in the parameters' units.
DIFF_STEP = 1e-4


def _jacobian(residuals: Any, high: Sequence[float]) -> Any:
    """The Jacobian of ``residuals`` by forward differences of :data:`DIFF_STEP`,
    backward where that would pass ``high``. An absolute step: scipy's relative one
    (``diff_step`` x |x|) is about 1e-27 for a parameter 1e-23 from NCCL's value,
    where trust-region reflective puts one that starts on its bound, and moves no
    row: the parameter's column was 0 and the fit stopped there."""

    def jacobian(x: np.ndarray) -> np.ndarray:
        f0 = residuals(x)
        columns = []
        for k in range(len(x)):
            step = DIFF_STEP if x[k] + DIFF_STEP <= high[k] else -DIFF_STEP
            moved = x.copy()
            moved[k] += step
            columns.append((residuals(moved) - f0) / step)
        return np.array(columns).T

    return jacobian


def _param_name(param: Param, value: float) -> str:
    """A parameter and its value (``x`` a log factor; the launch's change in
    :data:`LAUNCH_SCALE_US`) as the profile's keys name them."""
    if param[0] == "launch":
        return f"launch-us {DEFAULT_CONSTANTS.launch_us + value * LAUNCH_SCALE_US:g}"
    factor = f"{math.exp(value):.3g}"
    if param[0] == "eff":
        return f"bw-efficiency {SCOPES[param[1]]} {factor}"
    proto = PROTO_NAMES[param[1]]
    if param[0] == "lat":
        return f"{proto} latencies in a node (base-latency-us, hw-latency-us NVLINK and PCI) x{factor}"
    return f"{proto} network latencies (hw-latency-us NET) x{factor}"


#: A parameter this close to a bound (its units: 0.1 % of a factor) is on it ...
AT_BOUND = 1e-3
#: ... when the cost's gradient wants it past the bound by more than this.
PUSH = 1e-6


def _warn_at_bounds(
    params: Sequence[Param], solution: Any, low: Sequence[float], high: Sequence[float]
) -> None:
    """One warning naming every parameter the fit left on a bound (within
    :data:`AT_BOUND`) that the rows push it past (the cost's gradient, beyond
    :data:`PUSH`): the profile then holds the bound, not what the rows say."""
    stuck = []
    for param, x, grad, lo, hi in zip(params, solution.x, solution.grad, low, high, strict=True):
        if x >= hi - AT_BOUND and grad < -PUSH:
            stuck.append(f"{_param_name(param, float(x))} (its upper bound)")
        elif x <= lo + AT_BOUND and grad > PUSH:
            stuck.append(f"{_param_name(param, float(x))} (its lower bound)")
    if stuck:
        warnings.warn(
            f"calibrate nccl: the fit stopped at a bound: {'; '.join(stuck)}: the logs ask for more than "
            "a profile may correct NCCL's model by; check that --system and --network describe the "
            "machine the logs ran on",
            ConfigWarning,
            stacklevel=3,
        )


def compare(
    logs: Sequence[NcclTestsLog], system: SystemConfig, network: NetworkConfig, profile: NcclProfile
) -> FitResult:
    """Every row of ``logs`` predicted with NCCL's own constants (``before_us``)
    and with ``profile`` (``after_us``): how well a profile predicts logs it was
    not fitted on."""
    problem = _Problem(logs, system, network)
    before = problem.predict(None)
    problem.check_rows(before)
    return _compare(problem, profile, before)


def _compare(problem: _Problem, profile: NcclProfile, before: list[tuple[float, str]]) -> FitResult:
    after = problem.predict(profile)
    rows = [
        FitRow(log.label, point.size_bytes, point.time_us, old[0], new[0], old[1])
        for (log, point), old, new in zip(
            [(log, point) for log in problem.logs for point in log.points], before, after, strict=True
        )
    ]
    return FitResult(profile, tuple(rows))
