"""Communicator-group JSON (``--comm-group-configuration``).

Format (ASTRA-sim docs, "Argument {COMM_GROUP_CONFIG}")::

    {"<group id>": [npu ids], ...}      e.g. {"1": [0, 1, 2, 3], "2": [4, 5, 6, 7]}

Semantics (upstream ``Workload::initialize_comm_groups`` /
``Workload::extract_comm_group`` since astra-sim PR #319, and
``CommunicatorGroup``):

* A collective ET node names its group with the string attribute ``pg_name``
  (PyTorch's process-group name); upstream ``stoi``\\ s it and looks the group
  up by id, so group ids are decimal integers.  A node without ``pg_name``
  (or with ``pg_name`` "0", PyTorch's default group) runs over all NPUs.
  A ``pg_name`` that names no group is a fatal error upstream.
* Group id 0 is therefore reserved: upstream asserts ``id > 0`` when it builds
  a group and treats ``pg_name`` "0" as "all NPUs", so a group "0" here is an
  error rather than silently ignored.
* An NPU may belong to several groups (e.g. tensor- and data-parallel).
* A group of all NPUs uses the configured per-dimension algorithms; any smaller
  group runs every collective as one ring over its members, in the order
  listed here (upstream ``CommunicatorGroup::get_collective_plan``).  So the
  order of ids is kept, not sorted.
* Upstream treats a path containing "empty" as "no groups"; that is the
  caller's business, not this loader's.
* Without a file given, a run reads ``PREFIX.comm_groups.json`` beside its traces
  when there is one (:func:`groups_beside`): ``astra gen llm`` writes it there.

Validation (:class:`CommGroups`, a pydantic root model; one
:class:`~astra_core.errors.ConfigError` line per problem, named by group):

=========================== ==============================================================
group id (key)              decimal, 1 .. 2,147,483,647 (upstream ``stoi`` into an int);
                            "07" is group 7, and two keys naming one id are an error
members (value)             a non-empty list of NPU ids, each an integer in
                            0 .. npus_count - 1 (the network's NPUs), none twice
=========================== ==============================================================

e.g. ``comm_group.json: group 1[2]: NPU 0 listed twice``,
``comm_group.json: group 'tp': group id must be a non-negative decimal integer (...)``.
An NPU listed twice and an id defined twice are checked once every id and
NPU id is valid.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import ConfigDict, RootModel, create_model, model_validator

from astra_core.config.files import read_json, source_name
from astra_core.config.issues import PYTHON_SOURCE, Problems, show
from astra_core.config.limits import MAX_INT32
from astra_core.config.model import checked, raise_problems, validate_mapping

_GROUP_ID = re.compile(r"[0-9]+\Z")

#: pg_name values that mean "all NPUs" (upstream extract_comm_group).
DEFAULT_GROUP_NAMES = ("", "0")


def _too_large(key: str) -> bool:
    """A decimal group id past upstream's int (``int()`` refuses > 4300 digits)."""
    return len(key.lstrip("0")) > 10 or int(key) > MAX_INT32


def _group_name(key: Any) -> str:
    """How messages name a group: ``group 7``, ``group 'tp'``, ``group 111111111111...``."""
    text = str(key)
    if not _GROUP_ID.match(text):
        return f"group {show(text)}"
    if _too_large(text) and len(text) > 12:
        return f"group {text[:12]}..."
    return f"group {text}"


def _as_group_id(value: Any) -> tuple[str | None, str | None]:
    """A group id as written (a key of the file): decimal, > 0, within upstream's int."""
    key = str(value)
    if not _GROUP_ID.match(key):
        return None, (
            "group id must be a non-negative decimal integer "
            "(collective nodes name it in their pg_name attribute)"
        )
    if _too_large(key):
        return None, f"group id must be <= {MAX_INT32:,} (upstream reads it with stoi into an int)"
    if int(key) == 0:
        return None, (
            "group id 0 is reserved for the default group of all NPUs "
            "(pg_name '0' is PyTorch's default process group; upstream asserts id > 0)"
        )
    return key, None


def _as_members(value: Any) -> tuple[list[Any] | None, str | None]:
    """A group's members: a non-empty list (its items are checked as NPU ids)."""
    if not isinstance(value, list):
        return None, f"expected a list of NPU ids, got {show(value)}"
    if not value:
        return None, "group is empty (expected at least one NPU id)"
    return value, None


def _as_npu_id(value: Any, npus_count: int) -> tuple[int | None, str | None]:
    """An NPU id of a network of ``npus_count`` NPUs: an integer in [0, npus_count)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None, f"expected an NPU id (an integer), got {show(value)}"
    if not 0 <= value < npus_count:
        return None, f"NPU id {value} out of range (the network has NPUs 0..{npus_count - 1})"
    return value, None


#: A key of the file: a group id as written (see :class:`CommGroups`).
GroupId = Annotated[str, checked(_as_group_id)]


class CommGroups(RootModel[dict[str, tuple[int, ...]]]):
    """A comm-group file: ``{group id: (NPU ids...)}``, ids as written, in file order.

    Build it with :func:`parse_comm_groups` / :func:`load_comm_groups` (or
    ``comm_groups_model(npus_count)``), which check each NPU id against the
    network; :attr:`groups` has the ids normalised. Messages name a group
    ``group <id>`` and a member ``group <id>[<index>]``.
    """

    model_config = ConfigDict(frozen=True)

    @classmethod
    def config_key(cls, loc: tuple[int | str, ...]) -> str | None:
        """``('1', 2)`` -> ``group 1[2]``; a bad id (``('tp', '[key]')``) -> ``group 'tp'``."""
        if not loc:
            return None
        return _group_name(loc[0]) + "".join(f"[{part}]" for part in loc[1:] if part != "[key]")

    @model_validator(mode="after")
    def _each_npu_and_id_once(self) -> CommGroups:
        problems: list[tuple[str | None, str]] = []
        ids: set[str] = set()
        for key, members in self.root.items():
            where = _group_name(key)
            seen: set[int] = set()
            for index, npu in enumerate(members):
                if npu in seen:
                    problems.append((f"{where}[{index}]", f"NPU {npu} listed twice"))
                seen.add(npu)
            group_id = str(int(key))  # upstream stoi: "07" is group 7
            if group_id in ids:
                problems.append((where, f"group id {group_id} defined twice"))
            ids.add(group_id)
        raise_problems(problems)
        return self

    @property
    def groups(self) -> dict[str, tuple[int, ...]]:
        """``{group id: (NPU ids...)}`` in file order, ids as plain decimals ("07" -> "7")."""
        return {str(int(key)): members for key, members in self.root.items()}


@functools.lru_cache(maxsize=16)
def comm_groups_model(npus_count: int) -> type[CommGroups]:
    """:class:`CommGroups` of a network of ``npus_count`` NPUs (NPU ids below it)."""
    npu_id = Annotated[int, checked(functools.partial(_as_npu_id, npus_count=npus_count))]
    members = Annotated[tuple[npu_id, ...], checked(_as_members)]
    return create_model(f"CommGroups{npus_count}", __base__=CommGroups, root=(dict[GroupId, members], ...))


def parse_comm_groups(data: Any, npus_count: int, source: str = PYTHON_SOURCE) -> dict[str, tuple[int, ...]]:
    """Validate a comm-group mapping (shaped like the file) for a network of
    ``npus_count`` NPUs: ``{group id: (npu ids...)}`` as :attr:`CommGroups.groups`.
    Raises one ConfigError, one line per problem, each naming ``source``."""
    return validate_mapping(comm_groups_model(npus_count), data, source).groups


def groups_beside(workload: Any) -> str | None:
    """``PREFIX.comm_groups.json`` when the trace prefix ``workload`` has one beside
    its traces (as ``astra gen llm --output PREFIX`` writes it), else None."""
    if not isinstance(workload, (str, os.PathLike)):
        return None
    path = f"{os.fspath(workload)}.comm_groups.json"
    return path if os.path.isfile(path) else None


def load_comm_groups(path: str | os.PathLike[str], npus_count: int) -> dict[str, tuple[int, ...]]:
    """Read a comm-group JSON: ``{group id: (npu ids...)}`` in file order.

    Group ids are normalised to plain decimal strings ("07" -> "7").
    ``npus_count`` is the network's NPU count (ids must be below it).
    Raises ConfigError naming the file: unreadable or invalid JSON, duplicate
    keys, then one line per problem of the groups.
    """
    problems = Problems(source_name(path))
    data = read_json(path, problems)
    problems.raise_if_any()
    return parse_comm_groups(data, npus_count, source_name(path))


def group_members(
    groups: Mapping[str, tuple[int, ...]], pg_name: str | None, npus_count: int
) -> tuple[int, ...] | None:
    """The NPUs of the group a collective node's ``pg_name`` selects.

    No ``pg_name`` (None or "") or "0" -> all NPUs; a known id -> its members;
    an unknown id -> None (upstream aborts: "communicator group ... not found").
    """
    if pg_name is None or pg_name in DEFAULT_GROUP_NAMES:
        return tuple(range(npus_count))
    key = pg_name.strip()
    if _GROUP_ID.match(key):
        key = str(int(key))  # stoi("07") == 7
    return groups.get(key)
