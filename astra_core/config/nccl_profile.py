"""A calibrated NCCL profile: corrections of NCCL's cost model fitted to a user's
nccl-tests measurements (``astra calibrate nccl``), used with system.json's
``"nccl": {"profile": "profile.json"}``.

The file is JSON::

    {
      "format": "astra-nccl-profile/1",
      "nccl-version": "2.24.3",
      "gpu": "H100",
      "launch-us": 4.1,
      "base-latency-us": {"Ring/LL": 7.9, "Ring/Simple": 9.1},
      "hw-latency-us": {"NVLINK": {"Ring/LL": 0.71}, "NET": {"Tree/LL": 5.3}},
      "bw-efficiency": {"one-node": {"NVLS/Simple": 0.97}, "multi-node": {"Ring/Simple": 0.91}},
      "fitted-on": [{"log": "ar_1node.txt", "collective": "all-reduce", "ranks": 8, "nodes": 1,
                     "points": 31, "geomean-error-before": 0.31, "geomean-error-after": 0.06}]
    }

``base-latency-us`` and ``hw-latency-us`` replace the cells of NCCL's
``baseLatencies`` and ``hwLatencies`` tables (µs; links ``NVLINK``, ``PCI``,
``NET``) that the fit could see; ``bw-efficiency`` (above 0, at most
:data:`MAX_BW_EFFICIENCY`) multiplies the bus
bandwidth NCCL's model gives an algorithm and protocol on one node or on
several; ``launch-us`` is the host's time to launch one NCCL call, which no
collective beats (and an nccl-tests thread driving ``g`` GPUs pays ``g`` times
per row). Cells are named
``Algorithm/Protocol`` with NCCL's names (``Ring/LL128``, ``NVLSTree/Simple``).
Anything not named keeps the NCCL version's own value. ``fitted-on`` records
what the profile was fitted on; the model does not read it.

:func:`read_profile` raises :class:`~astra_core.errors.ConfigError` naming
the file and key of anything else.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from astra_core.config.files import read_json, source_name
from astra_core.config.issues import Problems, show
from astra_core.config.limits import MAX_DELAY_NS
from astra_core.config.nccl_env import ALGO_NAMES, PROTO_NAMES

FORMAT = "astra-nccl-profile/1"
LINKS = ("NVLINK", "PCI", "NET")
SCOPES = ("one-node", "multi-node")
#: The most a ``bw-efficiency`` may be. It multiplies the bus bandwidth of NCCL's
#: cost model (tuning.py ``_entry``: ``bus *= c.bw_efficiency[...]``; model.py
#: ``_nvls_gbps``), which NCCL builds from ceilings: its topology search's rating
#: of the links and the per-channel maxima (``llMaxBws``, ``perChMaxRingLL128Bws``,
#: ``perChMaxTreeBws``). A profile may say a machine reaches less than that, not
#: more: each collective of the public H100 logs (tests/data/nccl_tests) fits 0.88
#: to 0.98 alone. (Whatever a profile says, the NCCL model keeps every collective
#: above its links' line rate: ``astra_core.system.collectives.nccl.bus_bound``.)
MAX_BW_EFFICIENCY = 1.0

#: (algorithm index, protocol index) of a cell name such as ``Ring/LL128``.
Cell = tuple[int, int]


@dataclass(frozen=True)
class NcclProfile:
    """A profile as the NCCL model applies it (see the module docstring);
    cells are ``(algorithm, protocol)`` indices in NCCL's order
    (:data:`~astra_core.config.nccl_env.ALGO_NAMES`, ``PROTO_NAMES``)."""

    source: str = "<python>"
    nccl_version: str | None = None
    gpu: str | None = None
    launch_us: float | None = None
    base_latency_us: dict[Cell, float] = field(default_factory=dict)
    hw_latency_us: dict[tuple[int, int, int], float] = field(default_factory=dict)
    bw_efficiency: dict[tuple[int, int, int], float] = field(default_factory=dict)
    fitted_on: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The profile as its file holds it."""

        def cells(values: dict[Cell, float]) -> dict[str, float]:
            return {cell_name(cell): round(value, 6) for cell, value in sorted(values.items())}

        def nested(values: dict[tuple[int, int, int], float], names: tuple[str, ...]) -> dict:
            out: dict[str, dict[str, float]] = {}
            for (outer, algo, proto), value in sorted(values.items()):
                out.setdefault(names[outer], {})[cell_name((algo, proto))] = round(value, 6)
            return out

        return {
            "format": FORMAT,
            "nccl-version": self.nccl_version,
            "gpu": self.gpu,
            "launch-us": None if self.launch_us is None else round(self.launch_us, 6),
            "base-latency-us": cells(self.base_latency_us),
            "hw-latency-us": nested(self.hw_latency_us, LINKS),
            "bw-efficiency": nested(self.bw_efficiency, SCOPES),
            "fitted-on": list(self.fitted_on),
        }


def cell_name(cell: Cell) -> str:
    """``(1, 0)`` -> ``Ring/LL``."""
    return f"{ALGO_NAMES[cell[0]]}/{PROTO_NAMES[cell[1]]}"


def _cell(name: Any, where: str, problems: Problems) -> Cell | None:
    algo, _, proto = str(name).partition("/")
    if algo in ALGO_NAMES and proto in PROTO_NAMES:
        return ALGO_NAMES.index(algo), PROTO_NAMES.index(proto)
    problems.add(
        where,
        f"unknown cell {show(name)}: Algorithm/Protocol with NCCL's names "
        f"({', '.join(ALGO_NAMES)} / {', '.join(PROTO_NAMES)})",
    )
    return None


def _value(
    value: Any, where: str, problems: Problems, *, zero_ok: bool, at_most: float | None = None
) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        problems.add(where, f"expected a finite number, got {show(value)}")
        return None
    if value < 0 or (value == 0 and not zero_ok):
        problems.add(where, f"must be {'>= 0' if zero_ok else '> 0'}, got {show(value)}")
        return None
    if at_most is not None and value > at_most:
        problems.add(
            where,
            f"must be <= {at_most:g} (a share of the bus bandwidth NCCL's model gives), got {show(value)}",
        )
        return None
    if at_most is None and value > MAX_DELAY_NS / 1e3:  # a latency [us]
        problems.add(
            where, f"must be <= {MAX_DELAY_NS / 1e3:g} us (one delay of at most 1000 s), got {show(value)}"
        )
        return None
    return float(value)


def _cells(
    data: Any, key: str, problems: Problems, *, zero_ok: bool, at_most: float | None = None
) -> dict[Cell, float]:
    out: dict[Cell, float] = {}
    if not isinstance(data, dict):
        problems.add(key, f"expected a mapping of Algorithm/Protocol to numbers, got {show(data)}")
        return out
    for name, value in data.items():
        cell = _cell(name, f"{key}.{name}", problems)
        number = _value(value, f"{key}.{name}", problems, zero_ok=zero_ok, at_most=at_most)
        if cell is not None and number is not None:
            out[cell] = number
    return out


def _nested(
    data: Any,
    key: str,
    names: tuple[str, ...],
    problems: Problems,
    *,
    zero_ok: bool,
    at_most: float | None = None,
) -> dict[tuple[int, int, int], float]:
    out: dict[tuple[int, int, int], float] = {}
    if not isinstance(data, dict):
        problems.add(key, f"expected a mapping with keys {', '.join(names)}, got {show(data)}")
        return out
    for outer, cells in data.items():
        if outer not in names:
            problems.add(f"{key}.{outer}", f"unknown key (one of {', '.join(names)})")
            continue
        for cell, value in _cells(
            cells, f"{key}.{outer}", problems, zero_ok=zero_ok, at_most=at_most
        ).items():
            out[(names.index(outer), cell[0], cell[1])] = value
    return out


def find_profile(entry: str, system_source: str | os.PathLike[str]) -> Path | None:
    """The file a system.json's ``nccl.profile`` entry names: ``entry`` from the working
    directory, else (a relative path) from the folder of ``system_source``, the
    system.json; None when neither is a file."""
    candidates = [Path(entry)]
    if not Path(entry).is_absolute():
        candidates.append(Path(system_source).parent / entry)
    return next((c for c in candidates if c.is_file()), None)


def read_profile(path: str | os.PathLike[str]) -> NcclProfile:
    """Read and check a profile file (see the module docstring)."""
    problems = Problems(source_name(path))
    data = read_json(path, problems)
    if not isinstance(data, dict):
        problems.add(None, f"expected a JSON object, got {show(data)}")
        problems.raise_if_any()
    known = {"format", "nccl-version", "gpu", "launch-us", "base-latency-us", "hw-latency-us"}
    known |= {"bw-efficiency", "fitted-on"}
    for key in data:
        if key not in known:
            problems.unknown(key, sorted(known))
    if data.get("format") != FORMAT:
        problems.add("format", f"expected {FORMAT!r}, got {show(data.get('format'))}")
    launch = data.get("launch-us")
    launch = None if launch is None else _value(launch, "launch-us", problems, zero_ok=True)
    fitted = data.get("fitted-on", [])
    profile = NcclProfile(
        source=problems.source,
        nccl_version=data.get("nccl-version"),
        gpu=data.get("gpu"),
        launch_us=launch,
        base_latency_us=_cells(data.get("base-latency-us", {}), "base-latency-us", problems, zero_ok=True),
        hw_latency_us=_nested(data.get("hw-latency-us", {}), "hw-latency-us", LINKS, problems, zero_ok=True),
        bw_efficiency=_nested(
            data.get("bw-efficiency", {}),
            "bw-efficiency",
            SCOPES,
            problems,
            zero_ok=False,
            at_most=MAX_BW_EFFICIENCY,
        ),
        fitted_on=tuple(fitted) if isinstance(fitted, list) else (),
    )
    problems.raise_if_any()
    return profile
