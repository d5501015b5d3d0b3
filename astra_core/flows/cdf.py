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
    """A piecewise-linear flow-size CDF: ``sizes`` (bytes) at ``percents`` (0..100)."""

    sizes: tuple[float, ...]
    percents: tuple[float, ...]
    source: str = "cdf"

    def __post_init__(self) -> None:
        s, p, where = self.sizes, self.percents, self.source
        if len(s) != len(p) or len(s) < 2:
            raise ConfigError(f"{where}: a CDF needs at least two points of <bytes> <percent>")
        if p[0] != 0 or p[-1] != 100:
            raise ConfigError(f"{where}: the first percent must be 0 and the last 100, got "
                              f"{p[0]:g} and {p[-1]:g}")
        for k in range(1, len(s)):
            if not (s[k] > s[k - 1] and p[k] > p[k - 1]):
                raise ConfigError(f"{where}: line {k + 1}: sizes and percents must both rise "
                                  f"strictly ({s[k - 1]:g} {p[k - 1]:g} then {s[k]:g} {p[k]:g})")
        if s[0] < 0:
            raise ConfigError(f"{where}: line 1: a flow size cannot be negative ({s[0]:g})")

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
    sizes, percents = [], []
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
    return FlowSizeCdf(tuple(sizes), tuple(percents), source)


def load_cdf(name_or_path: str | os.PathLike) -> FlowSizeCdf:
    """A shipped distribution by name (``websearch``, ``hadoop``) or a CDF file.

    Raises ConfigError for an unknown name, an unreadable file or a bad CDF."""
    path = BUILTIN.get(str(name_or_path))
    if path is None:
        path = Path(name_or_path)
        if not path.is_file():
            raise ConfigError(f"--cdf: {name_or_path} is neither a shipped distribution "
                              f"({', '.join(BUILTIN)}) nor a file")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the CDF: {exc}") from None
    return parse_cdf(text, str(path))
