"""Request traces of a serving run: read from a file or generated.

A request is its arrival time [ns from the run's start], its prompt length and the
output length it will generate [tokens], and optionally the id of a prefix it shares
with other requests (for prefix caching: requests with one ``prefix_id`` share their
first ``prefix_tokens`` prompt tokens).

**Files** (:func:`read_requests`): CSV with a header, or JSON Lines (``.jsonl``), one
request per row, columns ``arrival_s`` (or ``arrival_ns``), ``prompt_tokens``,
``output_tokens`` and optionally ``prefix_id`` and ``prefix_tokens``. Rows may come in
any order; requests are sorted by arrival (ties keep the file's order).

**Generated** (:func:`generate_requests`): ``count`` requests whose gaps are
exponential (Poisson arrivals at ``rate`` per second) or gamma-distributed with the
same mean and coefficient of variation ``cv`` (bursty for ``cv`` > 1, as the
request-rate sweeps of vLLM's ``benchmark_serving.py --burstiness`` draw them), and
whose lengths are fixed or drawn from a named public trace's recorded (prompt, output)
pairs (:data:`LENGTH_DISTRIBUTIONS`: the Azure LLM inference traces of 2023). One
``seed`` gives one trace.

Errors are one-line :class:`~astra_core.errors.ConfigError` naming the file, the row
and the column, or the key of a generator setting.
"""

from __future__ import annotations

import csv
import functools
import gzip
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from astra_core.errors import ConfigError

__all__ = ["LENGTH_DISTRIBUTIONS", "LengthDistribution", "Request", "generate_requests", "read_requests"]

NS_PER_S = 1_000_000_000
#: The most tokens one request may name (prompt or output): 2^24, far past any model's
#: context, so that a typo (an extra digit) is an error rather than a run that never ends.
MAX_TOKENS = 1 << 24


@dataclass(frozen=True)
class Request:
    """One request: ``arrival_ns`` [ns], ``prompt_tokens`` and ``output_tokens`` (>= 1),
    ``prefix_id`` (None: shares nothing) and ``prefix_tokens`` (the shared prefix's length,
    at most the prompt)."""

    id: int
    arrival_ns: int
    prompt_tokens: int
    output_tokens: int
    prefix_id: str | None = None
    prefix_tokens: int = 0


@dataclass(frozen=True)
class LengthDistribution:
    """A public trace's (prompt, output) length pairs [tokens], drawn from as they were
    recorded (the joint distribution, pairs drawn uniformly with replacement). ``file``:
    the pairs shipped with astra (``astra_core/serve/data``); ``source``: the trace."""

    name: str
    file: str
    source: str

    def pairs(self) -> np.ndarray:
        """The trace's pairs, shape ``(n, 2)``: prompt and output tokens."""
        return _pairs(self.file)

    def draw(self, rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
        """``count`` (prompt, output) lengths [tokens]."""
        pairs = self.pairs()
        chosen = pairs[rng.integers(0, len(pairs), count)]
        return chosen[:, 0], chosen[:, 1]


@functools.cache
def _pairs(file: str) -> np.ndarray:
    with gzip.open(Path(__file__).with_name("data") / file, "rt", encoding="utf-8") as text:
        return np.loadtxt(text, delimiter=",", skiprows=1, dtype=np.int64, ndmin=2)


_AZURE = (
    "Azure LLM inference trace 2023 (Azure/AzurePublicDataset, data/AzureLLMInferenceTrace_{}.csv, "
    "CC-BY 4.0; Patel et al., Splitwise, ISCA 2024): {} requests of one hour of a production {} service"
)
#: Named length distributions (``lengths: NAME``), each a public trace's recorded pairs.
LENGTH_DISTRIBUTIONS: dict[str, LengthDistribution] = {
    "azure-code-2023": LengthDistribution(
        "azure-code-2023", "azure_llm_2023_code.csv.gz", _AZURE.format("code", "8,819", "coding")
    ),
    "azure-conv-2023": LengthDistribution(
        "azure-conv-2023", "azure_llm_2023_conv.csv.gz", _AZURE.format("conv", "19,366", "conversation")
    ),
}


def _where(source: str, row: int | None, column: str) -> str:
    return f"{source}: row {row}: {column}" if row is not None else f"{source}: {column}"


def _int_field(value: Any, source: str, row: int | None, column: str, low: int = 1) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{_where(source, row, column)}: expected a whole number, got {value!r}") from None
    if not number.is_integer() or not low <= number <= MAX_TOKENS:
        raise ConfigError(
            f"{_where(source, row, column)}: must be a whole number in [{low}, {MAX_TOKENS}], got {value!r}"
        )
    return int(number)


def _arrival_ns(record: Mapping[str, Any], source: str, row: int) -> int:
    if "arrival_ns" in record and record["arrival_ns"] not in (None, ""):
        column, scale = "arrival_ns", 1.0
    elif "arrival_s" in record and record["arrival_s"] not in (None, ""):
        column, scale = "arrival_s", float(NS_PER_S)
    else:
        raise ConfigError(f"{source}: row {row}: no arrival_s or arrival_ns")
    try:
        value = float(record[column]) * scale
    except (TypeError, ValueError):
        raise ConfigError(
            f"{source}: row {row}: {column}: expected a number, got {record[column]!r}"
        ) from None
    if not math.isfinite(value) or value < 0 or value > 1e18:
        raise ConfigError(
            f"{source}: row {row}: {column}: must be a time in [0, 1e9 s], got {record[column]!r}"
        )
    return round(value)


def _request(record: Mapping[str, Any], source: str, row: int, index: int) -> Request:
    prompt = _int_field(record.get("prompt_tokens"), source, row, "prompt_tokens")
    output = _int_field(record.get("output_tokens"), source, row, "output_tokens")
    prefix_id = record.get("prefix_id")
    prefix_id = None if prefix_id in (None, "") else str(prefix_id)
    prefix = 0
    if prefix_id is not None:
        prefix = _int_field(record.get("prefix_tokens", prompt), source, row, "prefix_tokens", low=0)
        if prefix > prompt:
            raise ConfigError(
                f"{source}: row {row}: prefix_tokens: {prefix} is more than the prompt's {prompt}"
            )
    return Request(index, _arrival_ns(record, source, row), prompt, output, prefix_id, prefix)


def _records(path: Path) -> Iterable[tuple[int, Mapping[str, Any]]]:
    """(row number, record) of a CSV (row 1: the first after the header) or JSON Lines file."""
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        for row, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path}: row {row}: not JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise ConfigError(f"{path}: row {row}: expected an object, got {type(record).__name__}")
            yield row, record
        return
    reader = csv.DictReader(text.splitlines())
    if not reader.fieldnames or "prompt_tokens" not in reader.fieldnames:
        raise ConfigError(f"{path}: expected a CSV header with prompt_tokens, output_tokens and arrival_s")
    yield from enumerate(reader, 1)


def read_requests(path: str | Path) -> list[Request]:
    """The requests of a CSV or JSON Lines file (module docstring), sorted by arrival.
    Raises ConfigError naming the file, row and column of a bad value, or an empty file."""
    source = Path(path)
    try:
        records = list(_records(source))
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read the requests ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: not a text file") from None
    if not records:
        raise ConfigError(f"{source}: no requests")
    requests = [_request(record, str(source), row, i) for i, (row, record) in enumerate(records)]
    return _numbered(sorted(requests, key=lambda r: r.arrival_ns))


def _numbered(requests: list[Request]) -> list[Request]:
    """The requests renumbered 0.. in the order given."""
    return [
        Request(i, r.arrival_ns, r.prompt_tokens, r.output_tokens, r.prefix_id, r.prefix_tokens)
        for i, r in enumerate(requests)
    ]


def _gaps_s(rng: np.random.Generator, count: int, rate: float, cv: float) -> np.ndarray:
    """Gaps between arrivals [s]: exponential at ``rate``/s (cv 1), else gamma with mean
    ``1/rate`` and coefficient of variation ``cv`` (shape ``1/cv^2``)."""
    if cv == 1.0:
        return rng.exponential(1.0 / rate, count)
    shape = 1.0 / (cv * cv)
    return rng.gamma(shape, 1.0 / (rate * shape), count)


def generate_requests(
    count: int,
    rate: float | None,
    lengths: str | tuple[int, int],
    *,
    cv: float = 1.0,
    seed: int = 0,
) -> list[Request]:
    """``count`` requests arriving at ``rate`` per second (Poisson; gamma gaps of
    coefficient of variation ``cv`` otherwise), the first at time 0 plus its gap, with
    ``lengths`` a name of :data:`LENGTH_DISTRIBUTIONS` or a fixed ``(prompt, output)``;
    ``rate`` None: all at time 0 (for a client that keeps a number in flight).
    Raises ConfigError naming the setting (``count``, ``rate``, ``cv``, ``lengths``)."""
    if not isinstance(count, int) or not 1 <= count <= 100_000_000:
        raise ConfigError(f"requests: count: must be a whole number in [1, 1e8], got {count!r}")
    if rate is not None and not (isinstance(rate, (int, float)) and math.isfinite(rate) and 0 < rate <= 1e9):
        raise ConfigError(
            f"requests: rate: must be a number of requests per second in (0, 1e9], got {rate!r}"
        )
    if not (isinstance(cv, (int, float)) and math.isfinite(cv) and 0 < cv <= 100):
        raise ConfigError(f"requests: cv: must be in (0, 100], got {cv!r}")
    rng = np.random.default_rng(seed)
    if rate is None:
        arrivals_ns = np.zeros(count, dtype=np.int64)
    else:
        arrivals_ns = np.rint(np.cumsum(_gaps_s(rng, count, float(rate), float(cv))) * NS_PER_S).astype(
            np.int64
        )
    if isinstance(lengths, str):
        if lengths not in LENGTH_DISTRIBUTIONS:
            known = ", ".join(sorted(LENGTH_DISTRIBUTIONS)) or "none"
            raise ConfigError(f"requests: lengths: unknown distribution {lengths!r}; known: {known}")
        prompts, outputs = LENGTH_DISTRIBUTIONS[lengths].draw(rng, count)
    else:
        prompt, output = (_int_field(v, "requests", None, f"lengths[{i}]") for i, v in enumerate(lengths))
        prompts, outputs = np.full(count, prompt), np.full(count, output)
    return [Request(i, int(arrivals_ns[i]), int(prompts[i]), int(outputs[i])) for i in range(count)]
