"""Reading nccl-tests output: the text ``all_reduce_perf`` and its siblings print.

nccl-tests (github.com/NVIDIA/nccl-tests, ``src/common.cu``) prints a header
of ``#`` lines and one row per size. The lines read here:

* ``# nccl-tests version 2.17.9 nccl-headers=22403 nccl-library=22403``: the
  NCCL version the test ran with (``NCCL_VERSION_CODE`` 22403 = 2.24.3; older
  tests print none);
* ``# Collective test starting: all_reduce_perf``: the collective (older
  tests print none; the file name then tells, e.g. ``all_gather_perf.log``);
* ``# nThread 1 nGpus 8 minBytes 8 ... graph: 0``: ``nGpus`` GPUs per thread
  (``-g``: one thread launches that many calls per iteration); ``graph: N`` > 0
  means CUDA graphs (``-G``), which take the launch cost out;
* ``#  Rank  0 Group  0 Pid 1234 on host-a device  0 [0x18] NVIDIA H100 80GB
  HBM3``: one line per rank, giving the ranks, the nodes (distinct hosts) and
  the GPU;
* rows ``size count type [redop root] time algbw busbw #wrong time algbw
  busbw #wrong``: out-of-place, then in-place; sizes in bytes, times in µs,
  bandwidths in GB/s (1 GB = 1e9 B). ``-C`` (cputime) and ``-a`` change what
  the time means, not the layout.

Raises :class:`~astra_core.errors.ConfigError` naming the file and line for
what cannot be read: no rows, a row whose numbers do not parse or whose
time (out-of-place or in-place) is not a finite number above 0 µs, no rank
lines (unless ranks and nodes are given), no way to tell the collective. A
size printed twice (``-N`` prints the table once per cycle) is two rows.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from astra_core.errors import ConfigError

#: nccl-tests binary name -> astra's collective name.
PERF_BINARIES = {
    "all_reduce_perf": "all-reduce",
    "all_gather_perf": "all-gather",
    "reduce_scatter_perf": "reduce-scatter",
    "alltoall_perf": "all-to-all",
    "sendrecv_perf": "send-recv",
}

_VERSION = re.compile(r"nccl-tests version (\S+)(?:.*?nccl-library=(\d+))?")
_STARTING = re.compile(r"Collective test starting:\s*(\w+)")
_GRAPH = re.compile(r"\bgraph:\s*(\d+)")
_GPUS = re.compile(r"\bnGpus\s+(\d+)")
_RANK = re.compile(r"#\s*Rank\s+(\d+)\b.*?\bon\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(.+?)\s*$")


@dataclass(frozen=True)
class NcclTestsPoint:
    """One row: ``size_bytes`` (nccl-tests' size: the whole buffer of an
    all-reduce, the gathered output of an all-gather, the input of a
    reduce-scatter), out-of-place ``time_us``, ``busbw_gbps``, the
    in-place time (None where the test printed none) and the row's ``line``
    in its file (1 is the first; 0: not read from a file)."""

    size_bytes: int
    time_us: float
    busbw_gbps: float
    in_place_time_us: float | None
    line: int = 0


@dataclass(frozen=True)
class NcclTestsLog:
    """One nccl-tests run: where it came from, the machine it ran on and its rows.

    ``collective``: ``all-reduce``, ``all-gather``, ``reduce-scatter``,
    ``all-to-all`` or ``send-recv``; ``ranks`` and ``nodes``: GPUs and hosts;
    ``device``: the GPU name of rank 0's line (None if unknown);
    ``nccl_version``: e.g. ``2.24.3`` (None if the test did not say);
    ``cuda_graph``: the run timed CUDA graphs (``-G``); ``gpus_per_thread``:
    ``-g`` (NCCL calls one thread launches per timed iteration).
    """

    path: str
    collective: str
    ranks: int
    nodes: int
    device: str | None
    nccl_version: str | None
    tests_version: str | None
    cuda_graph: bool
    gpus_per_thread: int
    points: tuple[NcclTestsPoint, ...]

    @property
    def label(self) -> str:
        """``PATH:collective``: one test of a file that may hold several."""
        return f"{self.path}:{self.collective}"

    @property
    def gpus_per_node(self) -> int:
        """GPUs per host (the ranks spread evenly, as nccl-tests runs them)."""
        return self.ranks // self.nodes


def nccl_version(code: int) -> str:
    """``NCCL_VERSION_CODE`` as a version: 22403 -> ``2.24.3`` (codes from 2.9 on:
    major x 10000 + minor x 100 + patch; before, major x 1000 + minor x 100 + patch)."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def _number(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def _row(tokens: list[str], path: Path, line: int) -> NcclTestsPoint:
    """A table row: size, count, type, then (redop, root,) 8 or more values."""
    where = f"{path}:{line}"
    size = int(tokens[0])
    values = tokens[3:]
    if len(values) >= 2 and _number(values[0]) is None:  # redop, then root
        values = values[2:]
    numbers = [_number(v) for v in values]
    if len(numbers) < 3 or any(x is None for x in numbers[:3]):
        raise ConfigError(f"{where}: a row needs time, algbw and busbw after size, count and type")
    time_us, _, busbw = numbers[0], numbers[1], numbers[2]
    assert time_us is not None and busbw is not None
    _check_time(time_us, values[0], "time", where)
    in_place = numbers[4] if len(numbers) >= 8 else None
    if in_place is not None:
        _check_time(in_place, values[4], "in-place time", where)
    return NcclTestsPoint(size, time_us, busbw, in_place, line)


def _check_time(time_us: float, token: str, column: str, where: str) -> None:
    """ConfigError naming ``where`` (file:line) and the column for a time (µs) that
    is not a finite positive number (nccl-tests prints ``nan`` or ``inf`` when a
    timer or a division went wrong)."""
    if not math.isfinite(time_us):
        raise ConfigError(f"{where}: {column}: expected a finite number of µs, got {token}")
    if time_us <= 0:
        raise ConfigError(f"{where}: {column}: must be > 0 µs, got {token}")


_TAG = re.compile(r"\[\d+,\d+\]<std(?:out|err)>:")


@dataclass
class _Section:
    """What one test's lines said so far."""

    starting: str | None = None
    tests_version: str | None = None
    library: str | None = None
    graph: bool = False
    gpus: int = 1
    hosts: dict[int, str] = field(default_factory=dict)
    device: str | None = None
    points: list[NcclTestsPoint] = field(default_factory=list)


def read_logs(
    path: str | Path, collective: str | None = None, ranks: int | None = None, nodes: int | None = None
) -> list[NcclTestsLog]:
    """Parse one nccl-tests output file into one log per test it holds (a
    script often runs several binaries into one file; each starts with
    ``# Collective test starting`` or ``# nccl-tests version``). See the module
    docstring.

    ``collective`` selects that test where the file holds several and names
    the test where the file does not say; ``ranks`` and ``nodes`` replace what
    the file says (or supply what it does not). Rows of size 0 are skipped, as
    are lines that are
    not nccl-tests' (an MPI launcher's, NCCL_DEBUG's); ``mpirun
    --tag-output`` tags (``[1,0]<stdout>:``) are removed first.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    sections = [_Section()]
    empty_rows = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = _TAG.sub("", raw).strip()
        current = sections[-1]
        if line.startswith("#"):
            version, starting = _VERSION.search(line), _STARTING.search(line)
            if (version or starting) and (current.points or (starting and current.starting)):
                current = _Section(tests_version=current.tests_version, library=current.library)
                sections.append(current)
            _header(line, current, version, starting)
            continue
        tokens = line.split()
        if len(tokens) >= 6 and tokens[0].isdigit() and tokens[1].isdigit():
            if int(tokens[0]) == 0:  # nothing moved: no time to fit (nor to check)
                empty_rows += 1
                continue
            current.points.append(_row(tokens, path, number))
    logs = [_log(path, section, collective, ranks, nodes, sections) for section in sections if section.points]
    if not logs:
        more = " of more than 0 bytes" if empty_rows else ""
        raise ConfigError(f"{path}: no nccl-tests rows (size count type ... time algbw busbw){more}")
    if collective is not None:
        logs = [log for log in logs if log.collective == collective]
        if not logs:
            raise ConfigError(f"{path}: no {collective} test")
    return logs


def _header(line: str, section: _Section, version: re.Match | None, starting: re.Match | None) -> None:
    """Note what a ``#`` line says about the test."""
    if version:
        section.tests_version, section.library = version.group(1), version.group(2) or section.library
    if starting:
        section.starting = starting.group(1)
    if match := _GRAPH.search(line):
        section.graph = int(match.group(1)) > 0
    if match := _GPUS.search(line):
        section.gpus = int(match.group(1))
    if match := _RANK.search(line):
        section.hosts[int(match.group(1))] = match.group(2)
        section.device = section.device or match.group(3)


def _log(
    path: Path,
    section: _Section,
    collective: str | None,
    ranks: int | None,
    nodes: int | None,
    sections: list[_Section],
) -> NcclTestsLog:
    """One test's log; rank lines missing from a later test are the file's first's."""
    hosts = section.hosts or next((s.hosts for s in sections if s.hosts), {})
    device = section.device or next((s.device for s in sections if s.device), None)
    name = _collective(section.starting, path) if section.starting or collective is None else collective
    if ranks is None and not hosts:
        raise ConfigError(f"{path}: no '#  Rank N ... on HOST device' lines: give the ranks and nodes")
    total = ranks or len(hosts)
    machines = nodes or len(set(hosts.values())) or 1
    if total % machines:
        raise ConfigError(f"{path}: {total} ranks do not spread evenly over {machines} nodes")
    return NcclTestsLog(
        str(path),
        name,
        total,
        machines,
        device,
        nccl_version(int(section.library)) if section.library else None,
        section.tests_version,
        section.graph,
        section.gpus,
        tuple(section.points),
    )


def _collective(starting: str | None, path: Path) -> str:
    """The collective from the 'test starting' line, else from the file name."""
    if starting in PERF_BINARIES:
        return PERF_BINARIES[starting]
    squeezed = path.name.lower().replace("_", "").replace("-", "")
    for binary, name in PERF_BINARIES.items():
        if binary.removesuffix("_perf").replace("_", "") in squeezed:
            return name
    raise ConfigError(
        f"{path}: cannot tell the collective (no 'Collective test starting' line, no "
        f"{'/'.join(PERF_BINARIES)} in the file name): give it"
    )
