"""Measured GEMM times (CSV) in place of the GEMM model.

The file has a header row with the columns ``m``, ``n``, ``k`` and ``time_us``
(the kernel's measured time in microseconds, e.g. from ``torch.cuda.Event``
timing or Nsight), and optionally ``batch`` (products per kernel, default 1),
``precision`` (``bf16``, ``fp16`` or ``fp8``; a table without the column
describes every precision) and ``pass`` (``fprop``, ``dgrad`` or ``wgrad``: the
training pass whose operand layout and accumulation the kernel ran with;
without the column, any pass; a pass the table lacks takes the other gradient
pass's rows, then the forward pass's).

A GEMM ``batch x (m x k) @ (k x n)`` of a measured shape, precision and pass
takes the measured time. Any other shape runs at a throughput (FLOP/ns)
interpolated from the products measured in its precision and pass: linearly in
``log m``, ``log n`` and ``log k`` between the measured values that bracket the
shape on each axis (clamped to the measured range), over the bracketing
corners the table holds, their weights renormalised; with no bracketing corner
measured, the throughput of the nearest measured product (by the sum of
``|log(x / x_measured)|``). On a table measured on a grid this reproduces the
products it holds and follows their efficiency curve between them (tile and
wave effects of the shapes between grid points are not seen). A batch of ``B``
products takes ``B`` times one product's time: Transformer Engine runs a grouped
linear layer (the experts of a mixture-of-experts layer) as one GEMM per group.
"""

from __future__ import annotations

import bisect
import csv
import math
import os
from functools import lru_cache
from pathlib import Path

from astra_core.errors import ConfigError

__all__ = ["PASSES", "GemmTable", "load_gemm_table"]

#: The training passes a row may name: forward, input (data) gradient, weight gradient.
PASSES = ("fprop", "dgrad", "wgrad")
_PRECISIONS = ("bf16", "fp16", "fp8")
_ANY = ""
#: The gradient passes stand for each other: in Transformer Engine both run FP8 GEMMs in
#: one layout with split accumulation (the forward pass with fast accumulation).
_OTHER_GRADIENT = {"dgrad": "wgrad", "wgrad": "dgrad"}


class _Products:
    """The single products of one (precision, pass): log throughput by shape, axis values."""

    def __init__(self, rows: list[tuple[float, float, float, float]]):
        self.rate = {(m, n, k): math.log(2.0 * m * n * k / ns) for m, n, k, ns in rows}
        self.axes = [sorted({shape[i] for shape in self.rate}) for i in range(3)]
        self._known: dict[tuple[float, float, float], float] = {}

    def flops_per_ns(self, m: float, n: float, k: float) -> float:
        """The throughput [FLOP/ns] of one ``(m x k) @ (k x n)`` product (module
        docstring), worked out once per shape: a plan's search asks for the same
        few hundred shapes in every layout it bounds."""
        found = self._known.get((m, n, k))
        if found is None:
            found = self._known[(m, n, k)] = self._interpolated(m, n, k)
        return found

    def _interpolated(self, m: float, n: float, k: float) -> float:
        corners = [_bracket(values, x) for values, x in zip(self.axes, (m, n, k))]
        total = weights = 0.0
        for vm, wm in corners[0]:
            for vn, wn in corners[1]:
                for vk, wk in corners[2]:
                    rate = self.rate.get((vm, vn, vk))
                    if rate is not None and wm * wn * wk > 0:
                        total += wm * wn * wk * rate
                        weights += wm * wn * wk
        if weights > 0:
            return math.exp(total / weights)
        lm, ln, lk = math.log(m), math.log(n), math.log(k)
        nearest = min(
            self.rate,
            key=lambda s: abs(lm - math.log(s[0])) + abs(ln - math.log(s[1])) + abs(lk - math.log(s[2])),
        )
        return math.exp(self.rate[nearest])


def _bracket(values: list[float], x: float) -> list[tuple[float, float]]:
    """The measured values either side of ``x`` with their log-linear weights."""
    if x <= values[0]:
        return [(values[0], 1.0)]
    if x >= values[-1]:
        return [(values[-1], 1.0)]
    i = bisect.bisect_right(values, x)
    lo, hi = values[i - 1], values[i]
    w = math.log(x / lo) / math.log(hi / lo)
    return [(lo, 1.0 - w), (hi, w)]


class GemmTable:
    """Measured GEMMs: ``rows`` of ``(batch, m, n, k, precision, pass, ns per product)``
    (precision and pass ``""``: any)."""

    def __init__(self, rows: list[tuple[float, float, float, float, str, str, float]], source: str):
        self.rows = rows
        self.source = source
        # a shape's time per product, from its single product where the table has one
        self._exact = {row[1:6]: row[6] for row in sorted(rows, key=lambda row: row[0] == 1)}
        groups: dict[tuple[str, str], list] = {}
        for (m, n, k, precision, pass_), ns in self._exact.items():
            groups.setdefault((precision, pass_), []).append((m, n, k, ns))
        self._products = {key: _Products(value) for key, value in groups.items()}

    def _key(self, precision: str, pass_: str) -> tuple[str, str] | None:
        """The (precision, pass) of the rows that describe a ``precision`` GEMM of
        ``pass_``, or None when the table has none of that precision."""
        for p in (precision, _ANY) + (("bf16",) if precision == "fp16" else ()):
            for candidate in (pass_, _OTHER_GRADIENT.get(pass_, pass_), "fprop", _ANY):
                if (p, candidate) in self._products:
                    return p, candidate
            passes = sorted(q for r, q in self._products if r == p)
            if passes:
                return p, passes[0]
        return None

    def time_ns(
        self, batch: float, m: float, n: float, k: float, precision: str = "bf16", pass_: str = "fprop"
    ) -> float | None:
        """Time [ns] of ``batch`` products ``(m x k) @ (k x n)`` in ``precision`` in the
        training pass ``pass_`` (:data:`PASSES`); None when the table has no row of that
        precision (the GEMM model times it then)."""
        key = self._key(precision, pass_)
        if key is None:
            return None
        exact = self._exact.get((m, n, k, *key))
        if exact is not None:
            return batch * exact
        return 2.0 * batch * m * n * k / self._products[key].flops_per_ns(m, n, k)


def _row(path: Path, line: int, row: dict) -> tuple[float, float, float, float, str, str, float]:
    try:
        m, n, k = (float(row[c]) for c in ("m", "n", "k"))
        batch = float(row.get("batch") or 1)
        us = float(row["time_us"])
    except (TypeError, ValueError):
        raise ConfigError(f"{path}: row {line}: m, n, k, batch and time_us must be numbers") from None
    if not all(math.isfinite(v) and v > 0 for v in (m, n, k, batch, us)):
        raise ConfigError(f"{path}: row {line}: m, n, k, batch and time_us must be positive")
    precision = (row.get("precision") or _ANY).strip().lower()
    pass_ = (row.get("pass") or _ANY).strip().lower()
    if precision not in (_ANY, *_PRECISIONS):
        raise ConfigError(
            f"{path}: row {line}: precision must be one of {', '.join(_PRECISIONS)}, got {precision!r}"
        )
    if pass_ not in (_ANY, *PASSES):
        raise ConfigError(f"{path}: row {line}: pass must be one of {', '.join(PASSES)}, got {pass_!r}")
    return batch, m, n, k, precision, pass_, us * 1e3 / batch


def load_gemm_table(path: str | os.PathLike) -> GemmTable:
    """Read a GEMM table (see the module docstring), once per version of the file. Raises
    ConfigError naming the file and row."""
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the GEMM table: {exc.strerror or exc}") from None
    return _load(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=8)
def _load(name: str, mtime_ns: int, size: int) -> GemmTable:
    path = Path(name)
    try:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            header = [c.strip() for c in reader.fieldnames or []]
            missing = [c for c in ("m", "n", "k", "time_us") if c not in header]
            if missing:
                raise ConfigError(f"{path}: missing column(s) {', '.join(missing)} (need m, n, k, time_us)")
            rows = [
                _row(path, line, {key.strip(): value for key, value in raw.items() if key})
                for line, raw in enumerate(reader, start=2)
            ]
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the GEMM table: {exc.strerror or exc}") from None
    except (csv.Error, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not a CSV GEMM table: {exc}") from None
    if not rows:
        raise ConfigError(f"{path}: the GEMM table has no rows")
    return GemmTable(rows, str(path))
