"""Ranges of numeric config values: what astra accepts, and why.

Every number in network.yml, system.json and the remote-memory JSON is
range-checked against these bounds when the file is read, so that no value can
overflow the arithmetic a run does with it (``1e308`` GB/s is ``inf`` bytes/ns;
a 400-digit latency cannot become a float clock) and no size can make a run
hang before it starts.  The bounds are far outside any real system, so they
only ever reject typing mistakes and unit slips.

Why these numbers:

* Simulated time is a float count of ns.  Floats hold every integer up to
  2^53 ns (about 104 days) exactly, and upstream's results are whole ns, so a
  single delay stays at or below :data:`MAX_DELAY_NS` (1e12 ns = 1000 s):
  thousands of the longest delays in a row still add up exactly.
* Rates (GB/s, TFLOP/s) live in ``[MIN_RATE, MAX_RATE]`` = ``[1e-6, 1e12]``:
  1e-6 GB/s is about 1 kB/s, 1e12 GB/s is 1 ZB/s (today's links are ~1e3
  GB/s; tests use 1e9 for an "ideal" link).  Bytes / rate and rate * 2^30 then
  stay finite and non-zero for every message size up to 2^64 bytes.
* :data:`MAX_NPUS` = 2^20 NPUs: astra reads one trace file per NPU and runs
  one rank engine per NPU (rank classes aside), whose logical rings list
  their members (measured: ~24 bytes x NPUs per rank without rank classes,
  1.7 GB at 4096 NPUs); a million-rank run is already at the edge.  Asking
  for more is a mistake in ``npus_count``, refused before any file is read.
* :data:`MAX_CHUNKS` = 2^20 chunks per collective (``preferred-dataset-splits``):
  each chunk is a stream with its own messages per phase.
* :data:`MAX_INT32` = 2^31 - 1 for counts upstream keeps in a C ``int``.
"""

from __future__ import annotations

from typing import Any

from astra_core.config.issues import as_int, as_number

#: Longest single delay (latency, endpoint delay, LogGP parameter), ns.
MAX_DELAY_NS = 1e12
#: Smallest positive rate (GB/s or TFLOP/s) accepted.
MIN_RATE = 1e-6
#: Largest rate (GB/s or TFLOP/s) accepted.
MAX_RATE = 1e12
#: Largest total NPU count of a network (product of network.yml's npus_count).
MAX_NPUS = 1 << 20
#: Largest preferred-dataset-splits (chunks per collective).
MAX_CHUNKS = 1 << 20
#: Upstream's C ``int`` range, for counts it stores as int.
MAX_INT32 = (1 << 31) - 1
#: The latest instant an input may name [us] (a job's start, a fault's start or end):
#: times are float ns, whole up to 2^53 ns (about 104 days); a later instant would
#: round a run's own times away.
MAX_INSTANT_US = 2**53 // 1000


def npus_limit_message(npus: int) -> str:
    """Why ``npus`` NPUs are refused: the count, the limit and what it would take."""
    return (
        f"{npus:,} NPUs, more than astra's limit of {MAX_NPUS:,} (2^20); that run would "
        f"read {npus:,} trace files and keep a rank engine for each"
    )


def as_delay(value: Any) -> tuple[float | None, str | None]:
    """A delay in ns (or ns per byte): finite, in [0, :data:`MAX_DELAY_NS`]."""
    return as_number(value, minimum=0, maximum=MAX_DELAY_NS)


def as_int_delay(value: Any) -> tuple[int | None, str | None]:
    """A whole-ns delay (upstream stores these as int ticks), in [0, :data:`MAX_DELAY_NS`]."""
    return as_int(value, minimum=0, maximum=int(MAX_DELAY_NS))
