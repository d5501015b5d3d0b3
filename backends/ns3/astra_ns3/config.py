"""The ns-3 backend's configuration file (TOML or YAML) and its defaults.

Every key is optional; unknown keys are errors. Defaults and their sources:

Top level
    ``cc``: congestion control, ``"dcqcn"`` (default), ``"hpcc"``,
    ``"hpcc-pint"``, ``"timely"``, ``"dctcp"`` or ``"none"`` (line rate, no
    reaction); upstream's ``CC_MODE`` numbers 1 (DCQCN), 3 (HPCC), 7
    (TIMELY), 8 (DCTCP) and 10 (HPCC-PINT) are accepted too, as the value of
    ``cc`` or of an upstream-style ``CC_MODE`` key. ``seed`` (1): drives ECN marking; the same seed
    gives the same result. ``payload_bytes`` (4096, the RoCE path MTU most
    deployments use; upstream's ``PACKET_PAYLOAD_SIZE``): payload per data
    packet. ``buffer_bytes`` (32 MiB, upstream's ``BUFFER_SIZE 32``): the
    shared buffer of every node. ``ack_interval`` (1, upstream's
    ``L2_ACK_INTERVAL``): ACK every n in-order packets. ``rto_us`` (1000):
    retransmission timeout of go-back-N. ``fast_forward`` (true; 0/1 also
    taken): steady-state fast-forward, skipping the packets of flows whose
    rates and queues hold still until the next change (``cpp/fastforward.cc``;
    false simulates every packet, exactly as before the option existed).
    ``fast_forward_tolerance`` (0.01, in (0, 0.5]): how far (relative) rates and
    queue depths may move between two measurement windows and still count as
    steady; smaller is stricter and fast-forwards less.
``[ecn]``
    ``enabled`` (true). ``kmin_kb``, ``kmax_kb``, ``pmax``: per link speed in
    Gbps, upstream's ``KMIN_MAP``/``KMAX_MAP``/``PMAX_MAP`` (KB = 1000 B):
    Kmin 100/200/400/600/800 KB, Kmax 400/800/1600/2400/3200 KB and Pmax 0.2 at
    25/40/100/200/400 Gbps (the HPCC artifact's DCQCN settings, i.e. 100 KB and
    400 KB per 25 Gbps). A speed not in a map scales the closest entry
    linearly with bandwidth.
``[pfc]``
    ``enabled`` (true). ``alpha`` (1/8, upstream's dynamic threshold shift 3):
    XOFF when an ingress port holds more than alpha x the free shared buffer.
    ``xoff_bytes`` (0 = that dynamic threshold; else a static one).
    ``headroom_bytes`` (0 = per cable: 2 x delay x rate + 5 frames).
    ``xon_delta_bytes`` (0 = two frames): XON once this far below XOFF.
``[dcqcn]`` (Zhu et al., SIGCOMM'15)
    ``g`` (1/256), ``cnp_interval_us`` (4: at most one CNP, hence one rate
    cut, per 4 us per queue pair, as NVIDIA ConnectX firmware's
    ``rate_reduce_monitor_period``; the paper's notification point uses 50,
    which converges to fairness several times slower), ``alpha_timer_us`` (55),
    ``rate_increase_timer_us`` (55), ``byte_counter_bytes`` (10 MB),
    ``fast_recovery_steps`` (5), ``rate_ai_mbps`` (40), ``rate_hai_mbps``
    (50), ``min_rate_mbps`` (100, upstream's ``MIN_RATE``),
    ``clamp_target_rate`` (false, upstream's ``CLAMP_TARGET_RATE 0``).
    ``min_rate_mbps`` is also the floor of TIMELY's and DCTCP's rates.
``[hpcc]`` (Li et al., SIGCOMM'19)
    ``eta`` (0.95, paper and upstream's ``U_TARGET``), ``max_stage`` (0,
    upstream's ``MI_THRESH``), ``rate_ai_mbps`` (50, upstream's ``RATE_AI``;
    W_AI = rate_ai x base RTT).
``[hpcc_pint]`` (Ben Basat et al., SIGCOMM'20; HPCC-PINT artifact defaults)
    ``log_base`` (1.05: a 1-byte digest, ``pint.cc`` and ``mix/config.txt``),
    ``probability`` (1.0, ``pint_prob``: the fraction of ACKs whose digest the
    sender uses). The window rule takes ``[hpcc]``'s ``eta``, ``max_stage``
    and ``rate_ai_mbps``.
``[timely]`` (Mittal et al., SIGCOMM'15; HPCC artifact's ``rdma-hw.cc`` defaults)
    ``alpha`` (0.875, EWMA weight of a new RTT difference), ``beta`` (0.8),
    ``t_low_us`` (50), ``t_high_us`` (500), ``min_rtt_us`` (20: normalizes the
    gradient), ``rate_ai_mbps`` (10: delta per 10 Gb/s of line rate, the
    paper's 10 Mb/s at 10 Gb/s, scaled as the artifact's run.py does),
    ``hai_after`` (5 rises in a row before hyper increase), ``hai_factor``
    (5: hyper increase = 5 delta, the artifact's RATE_HAI).
``[dctcp]`` (Alizadeh et al., SIGCOMM'10)
    ``g`` (1/16, the paper's and the artifact's), ``k_kb``: the step-marking
    threshold per link speed in Gbps (KB = 1000 B), marking every packet
    that leaves a queue longer than K (Kmin = Kmax = K, Pmax = 1): 3 KB per
    Gbps, the HPCC artifact's DCTCP setting (75/120/300/600/1200 KB at
    25/40/100/200/400 Gbps). With ``cc = "dctcp"`` it replaces ``[ecn]``'s
    RED maps.
``[monitor]``
    ``interval_us`` (0 = off): sample every port's queue and every flow's
    delivered bytes and rate this often. ``output_dir``: if set, every run
    writes ``queues``, ``flows``, ``flow_samples`` and ``ports`` tables there;
    ``format``: ``"csv"`` (default) or ``"parquet"``.

Ranges. Every number is checked against what the C++ model can represent and
finish with (one line per problem naming the file, key and allowed range):
times become whole picoseconds in ns-3's int64 ``Time`` (resolution 1 ps,
``api.cc``), so timers must not round to 0 ps (a zero timer re-fires at the
same instant forever) and must stay <= 1e12 us so that now + timer cannot
overflow; periodic timers (DCQCN alpha and rate-increase timers, the monitor
interval) are >= 0.1 us and the RTO >= 1 us, since a timer every few
picoseconds per queue pair never lets a run end; ``seed`` is 0 ..
2^32 - 2 (ns-3's ``RngSeedManager::SetSeed`` takes a non-zero uint32, given
seed + 1); byte counts cross to C++ as doubles and are at most 2^53; counts
stored as uint32/int are at most 2^32 - 1 / 2^31 - 1; rates at most 1e9 Mbps
(1 Pb/s); ``g`` and ``eta`` in (0, 1], ``pmax`` in [0, 1]; no key takes inf or NaN.
``watchdog_s`` (60): a worker that makes no progress (simulated time stands
still, or it answers nothing) for this long (wall seconds) is ended with an
error naming the last simulated time. ``max_packet_hops`` (1e10): a run whose
messages would move more packets x hops than this is refused up front with
its estimate (0 = no limit; the model runs ~0.2 M packet-hops per second).
"""

from __future__ import annotations

import warnings
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ValidationInfo, field_validator, model_validator

from astra.plugin import (
    PYTHON_SOURCE,
    STRICT,
    ConfigWarning,
    Flag,
    between,
    load_model,
    raise_problems,
    source_of,
    validate_mapping,
)

#: Upstream CC_MODE numbers (astra-sim's ns-3 config.txt) and what they name.
CC_MODES = {1: "dcqcn", 3: "hpcc", 7: "timely", 8: "dctcp", 10: "hpcc-pint"}
#: Internal codes the C++ library uses (upstream's numbers; 0 for none).
CC_CODES = {"none": 0, "dcqcn": 1, "hpcc": 3, "timely": 7, "dctcp": 8, "hpcc-pint": 10}

#: Longest time (us): 1e18 ps leaves ns-3's int64 picoseconds (9.22e18) room for now + timer.
MAX_TIME_US = 1e12
#: Shortest periodic timer (us); below ~1e-6 us (ns-3's 1 ps resolution) it would round to 0.
MIN_TIMER_US = 0.1
#: Shortest retransmission timeout (us): below any RDMA fabric's round trip.
MIN_RTO_US = 1.0
#: Largest byte count: exact in the double that carries it to C++ (astra_ns3_set).
MAX_BYTES = 2**53
UINT32_MAX = 2**32 - 1
INT32_MAX = 2**31 - 1
#: Largest seed: RngSeedManager::SetSeed takes a non-zero uint32 (api.cc gives it seed + 1).
MAX_SEED = 2**32 - 2
#: Largest rate (Mbps): 1 Pb/s, above every link.
MAX_RATE_MBPS = 1e9
#: Default limit on the work of one run, packets x hops (~14 h at 0.2 M packet-hops/s).
MAX_PACKET_HOPS = 10**10
#: Largest fast_forward_tolerance: rates or queues moving by half between two windows are
#: not a steady state.
MAX_FF_TOLERANCE = 0.5
#: The algorithm sections each ``cc`` reads (C++ roce: PINT's window rule is HPCC's;
#: TIMELY and DCTCP floor their rates at [dcqcn]'s min_rate_mbps, and only that key).
CC_SECTIONS = {
    "none": (),
    "dcqcn": ("dcqcn",),
    "hpcc": ("hpcc",),
    "hpcc-pint": ("hpcc_pint", "hpcc"),
    "timely": ("timely", "dcqcn.min_rate_mbps"),
    "dctcp": ("dctcp", "dcqcn.min_rate_mbps"),
}

Bytes = Annotated[int, between(0, MAX_BYTES, " bytes")]
#: A link speed as a key of a per-speed table (TOML's keys are strings: "100").
Gbps = Annotated[float, between(0, MAX_RATE_MBPS / 1000, " Gbps", low_open=True, text_ok=True)]
PositiveBytes = Annotated[int, between(1, MAX_BYTES, " bytes")]
RateMbps = Annotated[float, between(0, MAX_RATE_MBPS, " Mbps")]
Ratio = Annotated[float, between(0, 1, low_open=True)]
Timer = Annotated[float, between(MIN_TIMER_US, MAX_TIME_US, " us")]


class EcnConfig(BaseModel):
    """ECN marking at switch egress (RED on the instantaneous queue)."""

    model_config = STRICT
    enabled: bool = True
    kmin_kb: dict[
        Gbps,
        Annotated[float, between(0, MAX_BYTES / 1000, " KB")],
    ] = {25: 100, 40: 200, 100: 400, 200: 600, 400: 800}
    kmax_kb: dict[
        Gbps,
        Annotated[float, between(0, MAX_BYTES / 1000, " KB")],
    ] = {25: 400, 40: 800, 100: 1600, 200: 2400, 400: 3200}
    pmax: dict[
        Gbps,
        Annotated[float, between(0, 1)],
    ] = {25: 0.2, 40: 0.2, 100: 0.2, 200: 0.2, 400: 0.2}

    def thresholds(self, gbps: float) -> tuple[float, float, float]:
        """(Kmin bytes, Kmax bytes, Pmax) for a link of ``gbps``; (0, 0, 0) if disabled."""
        if not self.enabled:
            return 0.0, 0.0, 0.0
        return (
            _per_speed(self.kmin_kb, gbps, True) * 1000,
            _per_speed(self.kmax_kb, gbps, True) * 1000,
            _per_speed(self.pmax, gbps, False),
        )


def _per_speed(table: dict[float, float], gbps: float, scale: bool) -> float:
    """The entry for ``gbps``, else the closest one (scaled with bandwidth if ``scale``)."""
    for speed, value in table.items():
        if abs(speed - gbps) <= 1e-9 * gbps:
            return value
    speed = min(table, key=lambda s: abs(s - gbps))
    return table[speed] * gbps / speed if scale else table[speed]


class PfcConfig(BaseModel):
    """Priority flow control (IEEE 802.1Qbb) per ingress port."""

    model_config = STRICT
    enabled: bool = True
    alpha: Annotated[float, between(0, 1e6, low_open=True)] = 0.125
    xoff_bytes: Bytes = 0
    headroom_bytes: Bytes = 0
    xon_delta_bytes: Bytes = 0


class DcqcnConfig(BaseModel):
    """DCQCN reaction and notification points."""

    model_config = STRICT
    g: Ratio = 1 / 256
    cnp_interval_us: Annotated[float, between(0, MAX_TIME_US, " us")] = 4.0
    alpha_timer_us: Timer = 55.0
    rate_increase_timer_us: Timer = 55.0
    byte_counter_bytes: PositiveBytes = 10_000_000
    fast_recovery_steps: Annotated[int, between(0, INT32_MAX)] = 5
    rate_ai_mbps: RateMbps = 40.0
    rate_hai_mbps: RateMbps = 50.0
    min_rate_mbps: Annotated[float, between(0, MAX_RATE_MBPS, " Mbps", low_open=True)] = 100.0
    clamp_target_rate: bool = False


class HpccConfig(BaseModel):
    """HPCC window control from INT."""

    model_config = STRICT
    eta: Ratio = 0.95
    max_stage: Annotated[int, between(0, INT32_MAX)] = 0
    rate_ai_mbps: RateMbps = 50.0


class PintConfig(BaseModel):
    """HPCC-PINT's digest (the window rule is [hpcc]'s)."""

    model_config = STRICT
    log_base: Annotated[float, between(1.0001, 2.0)] = 1.05
    probability: Ratio = 1.0


class TimelyConfig(BaseModel):
    """TIMELY's RTT-gradient rate control."""

    model_config = STRICT
    alpha: Ratio = 0.875
    beta: Ratio = 0.8
    t_low_us: Annotated[float, between(0, MAX_TIME_US, " us")] = 50.0
    t_high_us: Annotated[float, between(0, MAX_TIME_US, " us", low_open=True)] = 500.0
    min_rtt_us: Annotated[float, between(0, MAX_TIME_US, " us", low_open=True)] = 20.0
    rate_ai_mbps: RateMbps = 10.0
    hai_after: Annotated[int, between(0, INT32_MAX)] = 5
    hai_factor: Annotated[float, between(0, 1e6)] = 5.0


class DctcpConfig(BaseModel):
    """DCTCP's ECN-fraction window control and its step marking."""

    model_config = STRICT
    g: Ratio = 1 / 16
    k_kb: dict[
        Gbps,
        Annotated[float, between(0, MAX_BYTES / 1000, " KB")],
    ] = {25: 75, 40: 120, 100: 300, 200: 600, 400: 1200}

    def thresholds(self, gbps: float) -> tuple[float, float, float]:
        """(K bytes, K bytes, 1.0): mark every packet above K."""
        k = _per_speed(self.k_kb, gbps, True) * 1000
        return k, k, 1.0


class MonitorConfig(BaseModel):
    """Queue and flow sampling for studies."""

    model_config = STRICT
    interval_us: Annotated[float, between(MIN_TIMER_US, MAX_TIME_US, " us", zero_ok=True)] = 0.0
    output_dir: str | None = None
    format: Literal["csv", "parquet"] = "csv"


class Ns3Config(BaseModel):
    """The whole backend configuration (see the module docstring for every default)."""

    model_config = STRICT
    cc: Literal["dcqcn", "hpcc", "hpcc-pint", "timely", "dctcp", "none"] = "dcqcn"
    seed: Annotated[int, between(0, MAX_SEED)] = 1
    payload_bytes: Annotated[int, between(64, 65000, " bytes")] = 4096
    buffer_bytes: PositiveBytes = 32 << 20
    ack_interval: Annotated[int, between(1, UINT32_MAX)] = 1
    rto_us: Annotated[float, between(MIN_RTO_US, MAX_TIME_US, " us")] = 1000.0
    watchdog_s: Annotated[float, between(1, 1e6, " s")] = 60.0
    max_packet_hops: Annotated[int, between(0, 1e18)] = MAX_PACKET_HOPS
    fast_forward: Flag = True
    fast_forward_tolerance: Annotated[float, between(0, MAX_FF_TOLERANCE, low_open=True)] = 0.01
    ecn: EcnConfig = EcnConfig()
    pfc: PfcConfig = PfcConfig()
    dcqcn: DcqcnConfig = DcqcnConfig()
    hpcc: HpccConfig = HpccConfig()
    hpcc_pint: PintConfig = PintConfig()
    timely: TimelyConfig = TimelyConfig()
    dctcp: DctcpConfig = DctcpConfig()
    monitor: MonitorConfig = MonitorConfig()

    @model_validator(mode="before")
    @classmethod
    def _upstream_key(cls, data: Any) -> Any:
        """Upstream's ``CC_MODE`` key stands for ``cc``."""
        if isinstance(data, dict) and "CC_MODE" in data:
            if "cc" in data:
                raise ValueError("give cc or CC_MODE, not both")
            data = {("cc" if k == "CC_MODE" else k): v for k, v in data.items()}
        return data

    @model_validator(mode="after")
    def _check_across_keys(self, info: ValidationInfo) -> Ns3Config:
        """Refuse inverted pairs (TIMELY's t_low_us above t_high_us, ECN's Kmin above
        Kmax at a link speed), one line each naming both keys; then warn (one line) about
        algorithm sections the selected ``cc`` does not read (:meth:`unused_sections`)."""
        problems: list[tuple[str | None, str]] = []
        t = self.timely
        if t.t_low_us > t.t_high_us:
            problems.append(
                ("timely.t_low_us", f"{t.t_low_us:g} us is above timely.t_high_us {t.t_high_us:g} us")
            )
        ecn = self.ecn
        for gbps in sorted(set(ecn.kmin_kb) & set(ecn.kmax_kb)):  # the speeds both name
            kmin, kmax = _per_speed(ecn.kmin_kb, gbps, True), _per_speed(ecn.kmax_kb, gbps, True)
            if kmin > kmax:
                problems.append(
                    ("ecn.kmin_kb", f"{kmin:g} KB at {gbps:g} Gbps is above ecn.kmax_kb's {kmax:g} KB there")
                )
        raise_problems(problems)
        unused = self.unused_sections()
        if unused:
            used = [s if "." in s else f"[{s}]" for s in CC_SECTIONS[self.cc]]
            warnings.warn(
                f"{source_of(info)}: {', '.join(unused)} not used with cc = {self.cc!r} "
                f"(it reads {', '.join(used) if used else 'no algorithm section'})",
                ConfigWarning,
                stacklevel=2,
            )
        return self

    def unused_sections(self) -> list[str]:
        """The algorithm sections (``[timely]``) or keys (``dcqcn.g``) that the config
        sets to other than their defaults but the selected ``cc`` does not read
        (:data:`CC_SECTIONS`); a section that restates the defaults changes nothing
        either way (so one file may list every algorithm's section)."""
        reads = CC_SECTIONS[self.cc]
        unused = []
        for name in ("dcqcn", "hpcc", "hpcc_pint", "timely", "dctcp"):
            if name in reads:
                continue
            section = getattr(self, name)
            fields = type(section).model_fields
            changed = [
                k for k in sorted(section.model_fields_set) if getattr(section, k) != fields[k].default
            ]
            ignored = [k for k in changed if f"{name}.{k}" not in reads]
            if not ignored:
                continue
            if any(f"{name}.{k}" in reads for k in fields):  # a section partly read: name the keys
                unused += [f"{name}.{k}" for k in ignored]
            else:
                unused.append(f"[{name}]")
        return unused

    def marking(self, gbps: float) -> tuple[float, float, float]:
        """(Kmin bytes, Kmax bytes, Pmax) of ECN marking on a link of ``gbps``: DCTCP's
        step at K under ``cc = "dctcp"``, else [ecn]'s RED maps; (0, 0, 0) if disabled."""
        if self.cc == "dctcp" and self.ecn.enabled:
            return self.dctcp.thresholds(gbps)
        return self.ecn.thresholds(gbps)

    @field_validator("cc", mode="before")
    @classmethod
    def _cc_mode(cls, value: Any) -> Any:
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float)) and float(value).is_integer():
            name = CC_MODES.get(int(value))
            if name in CC_CODES:
                return name
            raise ValueError(
                f"CC_MODE {int(value)} is not an upstream congestion control; use "
                "1 (DCQCN), 3 (HPCC), 7 (TIMELY), 8 (DCTCP) or 10 (HPCC-PINT)"
            )
        if isinstance(value, str):
            return value.lower()
        return value

    @property
    def fast_forwards(self) -> bool:
        """Whether the model fast-forwards: ``fast_forward`` on and no monitor sampling
        (a monitor gets every packet: cpp/fabric.cc)."""
        return bool(self.fast_forward) and not self.monitor.interval_us

    def native_settings(self) -> dict[str, float]:
        """Key -> value for the C++ library (``astra_ns3_set``), in its units."""
        d, h, p, t = self.dcqcn, self.hpcc, self.pfc, self.timely
        return {
            "cc": CC_CODES[self.cc],
            "payload": self.payload_bytes,
            "buffer": self.buffer_bytes,
            "pfc": p.enabled,
            "pfc_alpha": p.alpha,
            "pfc_xoff": p.xoff_bytes,
            "pfc_headroom": p.headroom_bytes,
            "pfc_xon_delta": p.xon_delta_bytes,
            "ecn": self.ecn.enabled,
            "ack_interval": self.ack_interval,
            "rto_us": self.rto_us,
            "seed": self.seed,
            "dcqcn_g": d.g,
            "cnp_interval_us": d.cnp_interval_us,
            "alpha_timer_us": d.alpha_timer_us,
            "rate_timer_us": d.rate_increase_timer_us,
            "byte_counter": d.byte_counter_bytes,
            "fast_recovery": d.fast_recovery_steps,
            "rate_ai": d.rate_ai_mbps * 1e6,
            "rate_hai": d.rate_hai_mbps * 1e6,
            "min_rate": d.min_rate_mbps * 1e6,
            "clamp_target": d.clamp_target_rate,
            "hpcc_eta": h.eta,
            "hpcc_max_stage": h.max_stage,
            "hpcc_rate_ai": h.rate_ai_mbps * 1e6,
            "pint_log_base": self.hpcc_pint.log_base,
            "pint_prob": self.hpcc_pint.probability,
            "timely_alpha": t.alpha,
            "timely_beta": t.beta,
            "timely_t_low_us": t.t_low_us,
            "timely_t_high_us": t.t_high_us,
            "timely_min_rtt_us": t.min_rtt_us,
            "timely_rate_ai": t.rate_ai_mbps * 1e6,
            "timely_hai_after": t.hai_after,
            "timely_hai_factor": t.hai_factor,
            "dctcp_g": self.dctcp.g,
            "monitor_interval_us": self.monitor.interval_us,
            "fast_forward": 1.0 if self.fast_forward else 0.0,
            "ff_tolerance": self.fast_forward_tolerance,
        }


def config_from_dict(data: Any, source: str = PYTHON_SOURCE) -> Ns3Config:
    """Validate a mapping shaped like the config file. Raises ConfigError (one line per problem)."""
    return validate_mapping(Ns3Config, data, source)


def load_config(config: Any) -> Ns3Config:
    """The backend config from None (defaults), an Ns3Config, a dict, or a TOML/YAML path."""
    return load_model(Ns3Config, config, "ns3 backend config")
