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
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from astra_core.config.files import expect_mapping, read_json, source_name
from astra_core.config.issues import PYTHON_SOURCE, Problems, show
from astra_core.config.limits import MAX_INT32

_GROUP_ID = re.compile(r"[0-9]+\Z")

#: pg_name values that mean "all NPUs" (upstream extract_comm_group).
DEFAULT_GROUP_NAMES = ("", "0")


def parse_comm_groups(data: Any, npus_count: int, source: str = PYTHON_SOURCE) -> dict[str, tuple[int, ...]]:
    """Validate a comm-group mapping; raise one ConfigError listing all problems."""
    problems = Problems(source)
    groups = _parse(data, npus_count, problems)
    problems.raise_if_any()
    return groups


def _parse(data: Any, npus_count: int, problems: Problems) -> dict[str, tuple[int, ...]]:
    mapping = expect_mapping(data, problems)
    if mapping is None:
        return {}
    groups: dict[str, tuple[int, ...]] = {}
    ids_seen: set[str] = set()
    for name, members in mapping.items():
        key = str(name)
        where = f"group {key}" if _GROUP_ID.match(key) else f"group {key!r}"
        if not _GROUP_ID.match(key):
            problems.add(
                where,
                "group id must be a non-negative decimal integer "
                "(collective nodes name it in their pg_name attribute)",
            )
            continue
        if len(key.lstrip("0")) > 10 or int(key) > MAX_INT32:  # int() refuses > 4300 digits
            shown = key if len(key) <= 12 else f"{key[:12]}..."
            problems.add(
                f"group {shown}",
                f"group id must be <= {MAX_INT32:,} (upstream reads it with stoi into an int)",
            )
            continue
        if int(key) == 0:
            problems.add(
                where,
                "group id 0 is reserved for the default group of all NPUs "
                "(pg_name '0' is PyTorch's default process group; upstream asserts id > 0)",
            )
            continue
        if not isinstance(members, list):
            problems.add(where, f"expected a list of NPU ids, got {show(members)}")
            continue
        if not members:
            problems.add(where, "group is empty (expected at least one NPU id)")
            continue
        ok = True
        seen: set[int] = set()
        for index, npu in enumerate(members):
            if isinstance(npu, bool) or not isinstance(npu, int):
                problems.add(f"{where}[{index}]", f"expected an NPU id (an integer), got {show(npu)}")
                ok = False
            elif not 0 <= npu < npus_count:
                problems.add(
                    f"{where}[{index}]",
                    f"NPU id {npu} out of range (the network has NPUs 0..{npus_count - 1})",
                )
                ok = False
            elif npu in seen:
                problems.add(f"{where}[{index}]", f"NPU {npu} listed twice")
                ok = False
            else:
                seen.add(npu)
        group_id = str(int(key))  # upstream stoi: "07" is group 7
        if group_id in ids_seen:
            problems.add(where, f"group id {group_id} defined twice")
        elif ok:
            groups[group_id] = tuple(members)
        ids_seen.add(group_id)
    return groups


def load_comm_groups(path: str | os.PathLike[str], npus_count: int) -> dict[str, tuple[int, ...]]:
    """Read a comm-group JSON: ``{group id: (npu ids...)}`` in file order.

    Group ids are normalised to plain decimal strings ("07" -> "7").

    ``npus_count`` is the network's NPU count (ids must be below it).
    """
    problems = Problems(source_name(path))
    data = read_json(path, problems)
    groups = _parse(data, npus_count, problems)
    problems.raise_if_any()
    return groups


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
