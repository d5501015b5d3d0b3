"""Parse ASTRA-sim 1.0 text workloads.

Format (ASTRA-sim 1.0 ``Workload::initialize_workload``; Chakra's text
converter reads the same files)::

    PARALLELISM [options...]
    NUMBER_OF_LAYERS
    name reserved fwd_compute fwd_comm_type fwd_comm_bytes ig_compute ig_comm_type
         ig_comm_bytes wg_compute wg_comm_type wg_comm_bytes update_delay [layer_parallelism]

* PARALLELISM: ``DATA``, ``MODEL``, ``HYBRID_DATA_MODEL``, ``HYBRID_MODEL_DATA``,
  ``HYBRID_DLRM`` / ``HYBRID_DLRM_ENHANCED`` (option: index of the last bottom
  MLP layer), ``HYBRID_TRANSFORMER`` (options ``model_parallel_NPU_group: M``),
  ``HYBRID_TRANSFORMER_FWD_IN_BCKWD`` (also ``checkpoints: n l1..ln
  checkpoint_initiates: n l1..ln``), ``HYBRID_CUSTOMIZED`` (each layer line ends
  with its own parallelism), ``MICRO``.
* compute values are integers that Chakra's converter copies into
  ``duration_micros`` (upstream then replays them as microseconds);
* comm types ``NONE``, ``ALLREDUCE``, ``ALLGATHER``, ``REDUCESCATTER``,
  ``ALLTOALL``; sizes in bytes.

Errors are :class:`~astra_core.errors.ConfigError` naming the file and line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from astra_core.config.issues import show
from astra_core.errors import ConfigError

__all__ = [
    "COMM_TYPES",
    "PARALLELISMS",
    "TextLayer",
    "TextWorkload",
    "parse_text_workload",
    "read_text_workload",
]

#: Text comm type -> Chakra CollectiveCommType name (None: no collective).
COMM_TYPES = {
    "NONE": None,
    "ALLREDUCE": "ALL_REDUCE",
    "ALLGATHER": "ALL_GATHER",
    "REDUCESCATTER": "REDUCE_SCATTER",
    "ALLTOALL": "ALL_TO_ALL",
}

PARALLELISMS = (
    "DATA",
    "MODEL",
    "HYBRID_DATA_MODEL",
    "HYBRID_MODEL_DATA",
    "HYBRID_DLRM",
    "HYBRID_DLRM_ENHANCED",
    "HYBRID_TRANSFORMER",
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
    "HYBRID_CUSTOMIZED",
    "MICRO",
)

#: What each numeric column of a layer line means (0-based column index).
_COLUMNS = {
    2: "forward compute",
    4: "forward comm bytes",
    5: "input-gradient compute",
    7: "input-gradient comm bytes",
    8: "weight-gradient compute",
    10: "weight-gradient comm bytes",
}
#: The Chakra field each column becomes and the most it holds: compute times go to
#: ``duration_micros`` (uint64), sizes to ``comm_size`` (int64), as Chakra's converter writes.
_FIELDS = {
    col: ("int64 comm_size", 2**63 - 1) if "bytes" in what else ("uint64 duration_micros", 2**64 - 1)
    for col, what in _COLUMNS.items()
}

#: Parallelisms a HYBRID_CUSTOMIZED layer may name (ASTRA-sim 1.0 decode_parallelsim).
LAYER_PARALLELISMS = ("DATA", "MODEL", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA")


@dataclass
class TextLayer:
    """One layer line. Compute values as written (Chakra: microseconds); sizes in bytes.

    ``*_comm`` is a text comm type (``"ALLREDUCE"``, ``"NONE"``, ...);
    ``parallelism`` is the per-layer parallelism of HYBRID_CUSTOMIZED, else None.
    """

    name: str
    fwd_compute: int
    fwd_comm: str
    fwd_bytes: int
    ig_compute: int
    ig_comm: str
    ig_bytes: int
    wg_compute: int
    wg_comm: str
    wg_bytes: int
    update_delay: int
    parallelism: str | None = None
    line: int = 0


@dataclass
class TextWorkload:
    """A parsed text workload.

    ``model_parallel_npus`` comes from ``model_parallel_NPU_group:`` (transformer
    headers), ``last_bottom_layer`` from a DLRM header, ``checkpoints`` and
    ``checkpoint_initiates`` (layer indices) from a FWD_IN_BCKWD header;
    ``text`` is the file content (Chakra stores it in the trace metadata).
    """

    parallelism: str
    layers: list[TextLayer]
    source: str = "<text>"
    text: str = ""
    model_parallel_npus: int | None = None
    last_bottom_layer: int | None = None
    checkpoints: list[int] = field(default_factory=list)
    checkpoint_initiates: list[int] = field(default_factory=list)


def read_text_workload(path: str | os.PathLike) -> TextWorkload:
    """Read and parse a text workload file (see :func:`parse_text_workload`)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file") from None
    return parse_text_workload(text, str(path))


def _int(token: str, where: str, what: str) -> int:
    try:
        return int(token)
    except ValueError:
        raise ConfigError(f"{where}: {what}: expected an integer, got '{token}'") from None


def _parse_header(tokens: list[str], wl: TextWorkload, where: str) -> None:
    kind = wl.parallelism
    rest = tokens[1:]
    if kind in ("HYBRID_DLRM", "HYBRID_DLRM_ENHANCED"):
        if not rest:
            raise ConfigError(f"{where}: {kind} needs the index of the last bottom layer after it")
        wl.last_bottom_layer = _int(rest[0], where, "last bottom layer")
        rest = rest[1:]
    i = 0
    while i < len(rest):
        key = rest[i]
        if key == "model_parallel_NPU_group:" and kind.startswith("HYBRID_TRANSFORMER"):
            if i + 1 >= len(rest):
                raise ConfigError(f"{where}: {key} needs a value")
            wl.model_parallel_npus = _int(rest[i + 1], where, key)
            if wl.model_parallel_npus < 1:
                raise ConfigError(f"{where}: {key} must be >= 1, got {wl.model_parallel_npus}")
            i += 2
        elif key in ("checkpoints:", "checkpoint_initiates:") and kind == "HYBRID_TRANSFORMER_FWD_IN_BCKWD":
            if i + 1 >= len(rest):
                raise ConfigError(f"{where}: {key} needs a count")
            count = _int(rest[i + 1], where, key)
            values = rest[i + 2 : i + 2 + count]
            if count < 0 or len(values) != count:
                raise ConfigError(f"{where}: {key} announces {count} layers, found {len(values)}")
            layers = [_int(v, where, key) for v in values]
            if key == "checkpoints:":
                wl.checkpoints = layers
            else:
                wl.checkpoint_initiates = layers
            i += 2 + count
        else:
            raise ConfigError(f"{where}: unexpected '{key}' after {kind}")
    if kind.startswith("HYBRID_TRANSFORMER") and wl.model_parallel_npus is None:
        raise ConfigError(f"{where}: {kind} needs 'model_parallel_NPU_group: M' on its first line")


def parse_text_workload(text: str, source: str = "<text>") -> TextWorkload:
    """Parse the text of an ASTRA-sim 1.0 workload into a :class:`TextWorkload`.

    Blank lines are ignored. Raises ConfigError naming ``source`` and the line
    for an unknown parallelism or comm type, a wrong column count, a
    non-integer value, or a layer count that differs from line 2.
    """
    lines = [(n, line.split()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise ConfigError(f"{source}: empty workload file")
    (n1, header), rest = lines[0], lines[1:]
    kind = header[0]
    if kind not in PARALLELISMS:
        raise ConfigError(
            f"{source}:{n1}: unknown parallelism '{kind}' (expected one of {', '.join(PARALLELISMS)})"
        )
    wl = TextWorkload(kind, [], source, text)
    _parse_header(header, wl, f"{source}:{n1}")
    if not rest:
        raise ConfigError(f"{source}: missing the number of layers (line 2)")
    n2, count_tokens = rest[0]
    if len(count_tokens) != 1:
        raise ConfigError(
            f"{source}:{n2}: expected the number of layers alone, got '{' '.join(count_tokens)}'"
        )
    count = _int(count_tokens[0], f"{source}:{n2}", "number of layers")
    columns = 13 if kind == "HYBRID_CUSTOMIZED" else 12
    for n, tokens in rest[1:]:
        wl.layers.append(_parse_layer(tokens, n, f"{source}:{n}", kind, columns))
    _check_layer_count(wl, count, f"{source}:{n1}", f"{source}:{n2}")
    return wl


def _parse_layer(tokens: list[str], line: int, where: str, kind: str, columns: int) -> TextLayer:
    """One layer line, checked column by column."""
    if len(tokens) != columns:
        raise ConfigError(f"{where}: expected {columns} columns for {kind}, got {len(tokens)}")
    for col in (3, 6, 9):
        if tokens[col] not in COMM_TYPES:
            raise ConfigError(
                f"{where}: layer {tokens[0]}: unknown comm type '{tokens[col]}' "
                f"(expected one of {', '.join(COMM_TYPES)})"
            )
    nums = {
        col: _int(tokens[col], where, f"layer {tokens[0]} column {col + 1}")
        for col in (2, 4, 5, 7, 8, 10, 11)
    }
    for col in (2, 4, 5, 7, 8, 10):
        if nums[col] < 0:
            raise ConfigError(f"{where}: layer {tokens[0]} column {col + 1}: must be >= 0, got {nums[col]}")
        field, most = _FIELDS[col]
        if nums[col] > most:
            raise ConfigError(
                f"{where}: layer {tokens[0]} column {col + 1} ({_COLUMNS[col]}): {show(nums[col])} "
                f"is more than a Chakra {field} holds ({most:,})"
            )
    parallelism = None
    if columns == 13:
        parallelism = tokens[12]
        if parallelism not in LAYER_PARALLELISMS:
            raise ConfigError(
                f"{where}: layer {tokens[0]}: unknown layer parallelism '{parallelism}' "
                f"(expected one of {', '.join(LAYER_PARALLELISMS)})"
            )
    return TextLayer(
        tokens[0],
        nums[2],
        tokens[3],
        nums[4],
        nums[5],
        tokens[6],
        nums[7],
        nums[8],
        tokens[9],
        nums[10],
        nums[11],
        parallelism,
        line,
    )


def _check_layer_count(wl: TextWorkload, count: int, header_where: str, count_where: str) -> None:
    """The layers against line 2's count, and the header's layer indices against the layers."""
    if len(wl.layers) != count:
        raise ConfigError(f"{count_where}: announces {count} layers, the file has {len(wl.layers)}")
    if count == 0:
        raise ConfigError(f"{count_where}: a workload needs at least one layer")
    if wl.last_bottom_layer is not None and not 0 <= wl.last_bottom_layer < count - 1:
        raise ConfigError(
            f"{header_where}: last bottom layer {wl.last_bottom_layer} out of range (0..{count - 2})"
        )
    for index in wl.checkpoints + wl.checkpoint_initiates:
        if not 0 <= index < count:
            raise ConfigError(f"{header_where}: checkpoint layer {index} out of range (0..{count - 1})")
    for index in wl.checkpoint_initiates:
        if not any(c <= index for c in wl.checkpoints):
            raise ConfigError(
                f"{header_where}: layer {index} initiates a forward re-computation "
                f"but no checkpoint layer is at or below it"
            )
