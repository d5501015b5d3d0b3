"""Configuration of the garnetlike backend: keys, documented defaults, one loader.

A config is a TOML or YAML file (or a mapping) of flat keys, read into the
pydantic model :class:`GarnetConfig` (through :mod:`astra_core.config.model`).
Every key is optional, an unknown key is an error (with a suggestion for a
misspelling), and all problems are reported at once, one line each naming the
file and key::

    garnet.toml: vcs_per_vnet: must be in [1, 64], got 0
    garnet.toml: unknown key 'flit_byte'; did you mean 'flit_bytes'?

=============================  ===========  ============================================================
key                            default      meaning
=============================  ===========  ============================================================
``clock_ghz``                  1.0          router clock; one cycle is ``1 / clock_ghz`` ns (rounded to
                                            a whole ps)
``flit_bytes``                 256          bytes per flit, the unit of buffering, credits and switch
                                            allocation
``packet_bytes``               65536        largest payload of one packet: a message of B bytes is
                                            ``ceil(B / packet_bytes)`` packets (at least one), a packet of
                                            p bytes is ``ceil(p / flit_bytes)`` flits (at least one: a
                                            head-tail flit)
``virtual_networks``           1            virtual networks (vnets); a message travels on vnet
                                            ``tag % virtual_networks``
``vcs_per_vnet``               4            virtual channels per vnet at every router input port
                                            (Garnet's default); wrap-around dimensions split them into
                                            two dateline classes, so they need >= 2
``buffer_depth_flits``         4            flits of buffer per VC (Garnet's ``buffers_per_data_vc``)
``buffers_cover_round_trip``   true         deepen each link's VC buffers to its credit round trip
                                            (flit time + 2 x link latency + pipeline + credit delay) so
                                            one VC can keep a long link busy
``router_pipeline_cycles``     1            cycles from a flit's arrival in an input buffer until it can
                                            win switch allocation (Garnet 2.0's ``router_latency``)
``credit_delay_cycles``        1            cycles from a flit leaving a buffer until its credit leaves
                                            for the upstream router (plus the link latency back)
``atomic_vc_allocation``       false        true: a VC takes a new packet only once empty, i.e. once the
                                            previous tail's credit is back (Garnet; ``astra noc``'s
                                            default); false: the next packet may follow the previous
                                            tail into the VC (virtual cut-through style FIFO VCs, as on
                                            long inter-NPU links, where waiting a round trip per packet
                                            would idle the link)
``ni_ports``                   per_link     ``per_link``: an NPU's NI has an injection and an ejection
                                            port per link, so it can send and receive on all its links
                                            at once (a multi-port NIC, DMA engines per link);
                                            ``single``: one of each (Garnet's NI, ``astra noc``'s
                                            default), at most one flit per link flit time in and out
``routing``                    auto         ``auto``, ``dimension_order``, ``table`` or ``up_down``
                                            (:mod:`astra_garnetlike.routing`)
``deadlock_avoidance``         dateline     ``dateline`` (VC classes on wrap-around links) or ``none``
``deadlock_threshold_cycles``  50000        no flit moving for this long (at least 4 round trips of
                                            the slowest link) while flits wait is a deadlock (Garnet's
                                            ``garnet_deadlock_threshold``)
``up_down_root``               (none)       root node of up*/down* routing (default: the switch with
                                            the most links, lowest id first)
``max_flit_hops``              10000000000  refuse a run whose messages would move more flits x links
                                            than this, before simulating it, with the estimate and its
                                            projected wall time (0: no limit); the model moves about
                                            0.4 M flit-hops per second
=============================  ===========  ============================================================

Ranges of the numbers (an error names the file, the key and the range): the
clock 1e-6 .. 1000 GHz (a cycle of 1 ms .. 1 ps: time is whole ps); flits of
1 .. 2^30 bytes; packets of 1 .. 2^40 bytes and at most 65536 flits (an
injection VC holds a whole packet, one entry per flit; checked once every
key is valid); 1 .. 64 virtual networks and VCs per vnet (every input port
builds each VC); VC buffers of 1 .. 2^31 - 1 flits; a router pipeline of
1 .. 10^6 cycles and a credit delay of 0 .. 10^6 (no router is slower); a
deadlock threshold of 1 .. 10^12 cycles; an up*/down* root of 0 .. 2^31 - 1;
a work limit of 0 .. 10^18 flit-hops. Integers may be written ``64.0``; the
switches are TOML/YAML booleans (``true``/``false``, not 1/0); the names are
case-sensitive.

Flit and packet sizes trade fidelity for speed: the model's cost is one event
per flit per hop, so a message of B bytes costs about ``B / flit_bytes x
(hops + 1)`` events. Larger flits coarsen buffering, credits and arbitration
(each hop adds one flit's serialization to the zero-load latency and
contention is resolved per flit); larger packets hold VCs longer (wormhole
blocking) but make long links easier to fill. Realistic on-chip values are
16-32 B flits and 1-5 flit packets (``astra noc``'s defaults); the defaults here
suit inter-NPU links of tens of GB/s and 100s of ns at about 20 k flit-hops
per MiB.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict, StrictBool, model_validator

from astra.plugin import (
    PYTHON_SOURCE,
    ConfigError,
    ConfigModel,
    Problems,
    as_choice,
    as_int,
    as_number,
    checked,
    expect_mapping,
    load_model,
    raise_problems,
    read_toml,
    read_yaml,
    show,
    source_name,
    validate_mapping,
)

ROUTING = ("auto", "dimension_order", "table", "up_down")
NI_PORTS = ("per_link", "single")
DEADLOCK_AVOIDANCE = ("dateline", "none")
#: Default work limit (flit-hops): ~7 h at the model's ~0.4 M flit-hops per second.
MAX_FLIT_HOPS = 10**10
#: The model's typical speed, flit-hops per wall second (benchmarks/garnet_noc.py).
FLIT_HOPS_PER_S = 4e5
#: Most flits in one packet: an injection VC holds a whole packet, one entry per flit.
MAX_PACKET_FLITS = 65536


def _range_text(low: float, high: float) -> str:
    """``[1, 2^30]``, ``[0, 10^6]``, ``[1e-06, 1000]``: a range as the module docstring writes it."""

    def show_bound(x: float) -> str:
        if x >= 1e6 and float(x).is_integer():
            exponent = round(math.log2(x + 1))
            if 2**exponent - 1 == x:
                return f"2^{exponent} - 1"
            exponent = round(math.log2(x))
            if 2**exponent == x:
                return f"2^{exponent}"
            return f"10^{round(math.log10(x))}"
        return f"{x:g}"

    return f"[{show_bound(low)}, {show_bound(high)}]"


def _within(kind: type, low: float, high: float) -> BeforeValidator:
    """A pydantic check: an integer (``kind`` int: ``10`` or ``10.0``) or a finite
    number (``kind`` float), never a boolean or a string, in [low, high]. A value
    out of range, or not finite, is ``must be in [low, high], got ...``."""
    parse = as_int if kind is int else as_number

    def check(value: Any) -> tuple[Any, str | None]:
        number, error = parse(value)
        if number is not None and low <= number <= high:
            return number, None
        if number is not None or (error or "").startswith("expected a finite number"):
            return None, f"must be in {_range_text(low, high)}, got {show(value)}"
        return None, error

    return checked(check)


def _one_of(names: tuple[str, ...]) -> BeforeValidator:
    """A pydantic check: one of ``names`` (case-sensitive; another case gets a hint)."""
    return checked(lambda value: as_choice(value, names))


class GarnetConfig(ConfigModel):
    """Parameters of the garnetlike model; see the module docstring for each key,
    its unit and range. Immutable (hashable); :meth:`replace` makes a changed copy.

    Build it with :func:`load_config` (errors are one
    :class:`~astra_core.errors.ConfigError`); ``GarnetConfig(**keys)`` validates
    too, but raises pydantic's ``ValidationError``. :attr:`source` is the file
    it was read from (``"<python>"`` for a mapping).
    """

    model_config = ConfigDict(frozen=True, validate_assignment=False)

    clock_ghz: Annotated[float, _within(float, 1e-6, 1000)] = 1.0
    flit_bytes: Annotated[int, _within(int, 1, 2**30)] = 256
    packet_bytes: Annotated[int, _within(int, 1, 2**40)] = 65536
    virtual_networks: Annotated[int, _within(int, 1, 64)] = 1
    vcs_per_vnet: Annotated[int, _within(int, 1, 64)] = 4
    buffer_depth_flits: Annotated[int, _within(int, 1, 2**31 - 1)] = 4
    buffers_cover_round_trip: StrictBool = True
    router_pipeline_cycles: Annotated[int, _within(int, 1, 10**6)] = 1
    credit_delay_cycles: Annotated[int, _within(int, 0, 10**6)] = 1
    atomic_vc_allocation: StrictBool = False
    ni_ports: Annotated[str, _one_of(NI_PORTS)] = "per_link"
    routing: Annotated[str, _one_of(ROUTING)] = "auto"
    deadlock_avoidance: Annotated[str, _one_of(DEADLOCK_AVOIDANCE)] = "dateline"
    deadlock_threshold_cycles: Annotated[int, _within(int, 1, 10**12)] = 50000
    up_down_root: Annotated[int, _within(int, 0, 2**31 - 1)] | None = None
    max_flit_hops: Annotated[int, _within(int, 0, 10**18)] = MAX_FLIT_HOPS

    @model_validator(mode="after")
    def _packet_fits_a_vc(self) -> GarnetConfig:
        """An injection VC holds a whole packet: at most MAX_PACKET_FLITS flits."""
        flits = -(-self.packet_bytes // self.flit_bytes)
        if flits > MAX_PACKET_FLITS:
            raise_problems(
                [
                    (
                        "packet_bytes",
                        f"{self.packet_bytes} bytes is {flits} flits of {self.flit_bytes} bytes; "
                        f"at most {MAX_PACKET_FLITS} flits per packet",
                    )
                ]
            )
        return self

    @property
    def cycle_ps(self) -> int:
        """One clock cycle in whole ps."""
        return max(1, round(1000.0 / self.clock_ghz))

    def as_dict(self) -> dict[str, Any]:
        """The keys and values as a config file would hold them (every key, in :data:`KEYS` order)."""
        return self.model_dump()

    def replace(self, **changes: Any) -> GarnetConfig:
        """A copy with some keys changed, validated like a file (same :attr:`source`).
        Raises ConfigError naming the source and key."""
        return load_config({**self.as_dict(), **changes}, source=self.source)


#: Every key of a config file, in the module docstring's order.
KEYS = tuple(GarnetConfig.model_fields)


def load_config(config: Any = None, *, source: str | None = None) -> GarnetConfig:
    """A :class:`GarnetConfig` from None (defaults), a GarnetConfig, a mapping or a file path.

    Files: ``.toml`` (TOML) or ``.yml``/``.yaml`` (YAML), flat keys; a mapping's
    messages name ``source`` (default ``<python>``). Raises
    :class:`~astra_core.errors.ConfigError` listing every problem, each line
    naming the file and key.
    """
    if isinstance(config, (str, os.PathLike)):
        config, source = read_config_file(config), source_name(config)
    if isinstance(config, Mapping):
        return validate_mapping(GarnetConfig, dict(config), source or PYTHON_SOURCE)
    return load_model(GarnetConfig, config, "garnetlike config")


def read_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """The raw keys of a TOML or YAML config file (unchecked: ``astra noc`` lays
    them over its own defaults). Raises ConfigError naming the file."""
    name = source_name(path)
    suffix = Path(path).suffix.lower()
    problems = Problems(name)
    if suffix == ".toml":
        data = read_toml(path)
    elif suffix in (".yml", ".yaml"):
        data = read_yaml(path, problems)
    else:
        raise ConfigError(f"{name}: garnetlike config must be TOML (.toml) or YAML (.yml, .yaml)")
    mapping = expect_mapping(data, problems)
    problems.raise_if_any()
    return dict(mapping or {})
