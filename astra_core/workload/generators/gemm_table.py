"""A user's measured GEMM times (CSV) in place of the GEMM model.

The file has a header row with the columns ``m``, ``n``, ``k`` and
``time_us`` (the kernel's measured time in microseconds, e.g. from
``torch.cuda.Event`` timing or Nsight), and optionally ``batch`` (products per
kernel, default 1). A GEMM of a measured shape takes the measured time per
product; any other shape runs at the throughput (FLOP/ns) of the nearest
measured shape, nearest by the sum of ``|log(x / x_measured)|`` over m, n and
k, so the table's own efficiency curve carries over to shapes close to it.
"""

from __future__ import annotations

import csv
import math
import os
from functools import lru_cache
from pathlib import Path

from astra_core.errors import ConfigError

__all__ = ["GemmTable", "load_gemm_table"]


class GemmTable:
    """Measured GEMMs: ``rows`` of ``(m, n, k, ns per product)``."""

    def __init__(self, rows: list[tuple[float, float, float, float]], source: str):
        self.rows = rows
        self.source = source
        self._exact = {(m, n, k): ns for m, n, k, ns in rows}
        self._logs = [(math.log(m), math.log(n), math.log(k), 2.0 * m * n * k / ns) for m, n, k, ns in rows]

    def time_ns(self, batch: float, m: float, n: float, k: float) -> float:
        """Time [ns] of ``batch`` products ``(m x k) @ (k x n)``."""
        exact = self._exact.get((m, n, k))
        if exact is not None:
            return batch * exact
        lm, ln, lk = math.log(m), math.log(n), math.log(k)
        rate = min(self._logs, key=lambda r: abs(lm - r[0]) + abs(ln - r[1]) + abs(lk - r[2]))[3]
        return 2.0 * batch * m * n * k / rate


@lru_cache(maxsize=8)
def load_gemm_table(path: str | os.PathLike) -> GemmTable:
    """Read a GEMM table (see the module docstring). Raises ConfigError naming the file and row."""
    path = Path(path)
    try:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            header = [c.strip() for c in reader.fieldnames or []]
            missing = [c for c in ("m", "n", "k", "time_us") if c not in header]
            if missing:
                raise ConfigError(f"{path}: missing column(s) {', '.join(missing)} (need m, n, k, time_us)")
            rows = []
            for line, raw in enumerate(reader, start=2):
                row = {key.strip(): value for key, value in raw.items() if key}
                try:
                    m, n, k = (float(row[c]) for c in ("m", "n", "k"))
                    batch = float(row.get("batch") or 1)
                    us = float(row["time_us"])
                except (TypeError, ValueError):
                    raise ConfigError(
                        f"{path}: row {line}: m, n, k, batch and time_us must be numbers"
                    ) from None
                if not all(math.isfinite(v) and v > 0 for v in (m, n, k, batch, us)):
                    raise ConfigError(f"{path}: row {line}: m, n, k, batch and time_us must be positive")
                rows.append((m, n, k, us * 1e3 / batch))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the GEMM table: {exc.strerror or exc}") from None
    except (csv.Error, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not a CSV GEMM table: {exc}") from None
    if not rows:
        raise ConfigError(f"{path}: the GEMM table has no rows")
    return GemmTable(rows, str(path))
