"""Flow-size distributions: piecewise-linear CDFs, as congestion-control studies draw them.

A CDF file has one point per line, ``<size in bytes> <cumulative percent>``;
the first point's percent is 0, the last one's 100, and both columns rise
strictly (the format of the HPCC artifact's ``traffic_gen`` folder). Sizes
between two points are spread uniformly, so a draw interpolates linearly at
a uniform percentile, and the mean is the sum over segments of their midpoint
size times their probability.

Shipped distributions (``data/``, copied from the HPCC artifact,
github.com/alibaba-edu/High-Precision-Congestion-Control ``traffic_gen/``,
which used them in the HPCC paper, Li et al., SIGCOMM'19):

* ``websearch``: the web-search workload measured in the DCTCP paper
  (Alizadeh et al., SIGCOMM'10, Fig. 4); mean 1,711,250 bytes;
* ``hadoop``: Facebook's Hadoop cluster (Roy et al., "Inside the Social
  Network's (Datacenter) Network", SIGCOMM'15); mean 120,420.75 bytes.
"""

from __future__ import annotations

import bisect
import math
import os
import random
from dataclasses import dataclass
from pathlib import Path

from astra_core.errors import ConfigError

DATA = Path(__file__).resolve().parent / "data"
#: Shipped distributions by name.
BUILTIN = {"websearch": DATA / "websearch.txt", "hadoop": DATA / "hadoop.txt"}


@dataclass(frozen=True)
class FlowSizeCdf:
    """A piecewise-linear flow-size CDF: ``sizes`` (bytes) at ``percents`` (0..100).

    ``lines`` gives each point's line in its file, for error messages (without
    it, errors name the point's position). Raises ConfigError naming ``source`` and the line for fewer than
    two points, a first percent other than 0 or a last other than 100, a
    negative or non-finite size, or points that do not both rise strictly."""

    sizes: tuple[float, ...]
    percents: tuple[float, ...]
    source: str = "cdf"
    lines: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        s, p, where = self.sizes, self.percents, self.source
        if len(s) != len(p) or len(s) < 2:
            raise ConfigError(f"{where}: a CDF needs at least two points of <bytes> <percent>")
        # Points read from a file are named by their line, others by their position.
        line = [f"line {n}" for n in self.lines] if self.lines else [f"point {k + 1}" for k in range(len(s))]
        for k in range(len(s)):
            if not (math.isfinite(s[k]) and math.isfinite(p[k])):
                raise ConfigError(
                    f"{where}: {line[k]}: sizes and percents must be finite, got {s[k]:g} {p[k]:g}"
                )
        if p[0] != 0:
            raise ConfigError(f"{where}: {line[0]}: the first percent must be 0, got {p[0]:g}")
        if p[-1] != 100:
            raise ConfigError(f"{where}: {line[-1]}: the last percent must be 100, got {p[-1]:g}")
        if s[0] < 0:
            raise ConfigError(f"{where}: {line[0]}: a flow size cannot be negative ({s[0]:g})")
        for k in range(1, len(s)):
            if not (s[k] > s[k - 1] and p[k] > p[k - 1]):
                raise ConfigError(
                    f"{where}: {line[k]}: sizes and percents must both rise "
                    f"strictly ({s[k - 1]:g} {p[k - 1]:g} then {s[k]:g} {p[k]:g})"
                )

    @property
    def mean_bytes(self) -> float:
        """Mean flow size: segment midpoints weighted by their probability."""
        s, p = self.sizes, self.percents
        return sum((s[k] + s[k - 1]) / 2 * (p[k] - p[k - 1]) for k in range(1, len(s))) / 100

    def draw(self, rng: random.Random) -> int:
        """One flow size (bytes, >= 1): linear interpolation at a uniform percentile."""
        s, p = self.sizes, self.percents
        r = rng.random() * 100
        k = max(1, bisect.bisect_left(p, r))
        size = s[k - 1] + (r - p[k - 1]) * (s[k] - s[k - 1]) / (p[k] - p[k - 1])
        return max(1, int(size))


def parse_cdf(text: str, source: str) -> FlowSizeCdf:
    """A CDF from its file text (see the module docstring). Raises ConfigError naming
    ``source`` and the line."""
    sizes, percents, lines = [], [], []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) != 2:
            raise ConfigError(f"{source}: line {number}: expected <bytes> <percent>, got {line!r}")
        try:
            size, percent = float(fields[0]), float(fields[1])
        except ValueError:
            raise ConfigError(f"{source}: line {number}: not numbers: {line!r}") from None
        sizes.append(size)
        percents.append(percent)
        lines.append(number)
    return FlowSizeCdf(tuple(sizes), tuple(percents), source, tuple(lines))


def load_cdf(name_or_path: str | os.PathLike) -> FlowSizeCdf:
    """A shipped distribution by name (``websearch``, ``hadoop``) or a CDF file.

    Raises ConfigError for an unknown name, an unreadable file or a bad CDF."""
    path = BUILTIN.get(str(name_or_path))
    if path is None:
        path = Path(name_or_path)
        if not path.is_file():
            raise ConfigError(
                f"--cdf: {name_or_path} is neither a shipped distribution ({', '.join(BUILTIN)}) nor a file"
            )
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the CDF: {exc}") from None
    return parse_cdf(text, str(path))
