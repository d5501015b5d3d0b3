"""Comm-group JSON: {group id: [npu ids]} and how a node's pg_name picks a group."""

from __future__ import annotations

import json

import pytest

from astra_core.config.comm_groups import group_members, load_comm_groups, parse_comm_groups
from astra_core.errors import ConfigError


def test_groups_load_in_file_order(write):
    path = write("comm_group.json", json.dumps({"1": [3, 2, 1, 0], "2": [4, 5, 6, 7], "17": [0, 4]}))
    groups = load_comm_groups(path, npus_count=8)
    assert groups == {"1": (3, 2, 1, 0), "2": (4, 5, 6, 7), "17": (0, 4)}
    assert list(groups) == ["1", "2", "17"]


def test_pg_name_selects_a_group():
    groups = {"1": (0, 1), "17": (2, 3)}
    assert group_members(groups, "17", 4) == (2, 3)
    assert group_members(groups, "017", 4) == (2, 3)  # upstream stoi
    assert group_members(groups, None, 4) == (0, 1, 2, 3)  # no pg_name: all NPUs
    assert group_members(groups, "", 4) == (0, 1, 2, 3)
    assert group_members(groups, "0", 4) == (0, 1, 2, 3)  # PyTorch's default group
    assert group_members(groups, "5", 4) is None  # upstream aborts


@pytest.mark.parametrize(
    "data, expected",
    [
        ({"1": [0, 8]}, "group 1[1]: NPU id 8 out of range (the network has NPUs 0..7)"),
        ({"1": [0, -1]}, "group 1[1]: NPU id -1 out of range (the network has NPUs 0..7)"),
        ({"1": [0, 1, 0]}, "group 1[2]: NPU 0 listed twice"),
        ({"1": []}, "group 1: group is empty (expected at least one NPU id)"),
        ({"1": 3}, "group 1: expected a list of NPU ids, got 3"),
        ({"1": [0, "1"]}, "group 1[1]: expected an NPU id (an integer), got '1'"),
        (
            {"tp": [0, 1]},
            "group 'tp': group id must be a non-negative decimal integer (collective nodes name it in their pg_name attribute)",
        ),
        (
            {"0": [0, 1]},
            "group 0: group id 0 is reserved for the default group of all NPUs (pg_name '0' is PyTorch's default process group; upstream asserts id > 0)",
        ),
        ({"1": [0], "01": [1]}, "group 01: group id 1 defined twice"),
        ([[0, 1]], "expected a mapping of keys to values, got a list"),
    ],
)
def test_each_mistake_is_one_line(write, data, expected):
    path = write("comm_group.json", json.dumps(data))
    with pytest.raises(ConfigError) as info:
        load_comm_groups(path, npus_count=8)
    assert str(info.value) == f"{path}: {expected}"


def test_several_mistakes_give_one_line_each():
    with pytest.raises(ConfigError) as info:
        parse_comm_groups({"1": [9], "2": []}, 8, source="<dict>")
    assert str(info.value).splitlines() == [
        "<dict>: group 1[0]: NPU id 9 out of range (the network has NPUs 0..7)",
        "<dict>: group 2: group is empty (expected at least one NPU id)",
    ]


def test_invalid_json(write):
    path = write("comm_group.json", '{"1": [0, 1,]}')
    with pytest.raises(ConfigError) as info:
        load_comm_groups(path, npus_count=8)
    assert str(info.value).startswith(f"{path}: invalid JSON at line 1")


def test_ids_are_normalised_and_a_bad_id_with_bad_members_is_two_lines():
    assert parse_comm_groups({"07": [1, 0], 3: [2]}, 4) == {"7": (1, 0), "3": (2,)}
    with pytest.raises(ConfigError) as info:
        parse_comm_groups({"tp": 3, "2": [0, 0]}, 4, source="<dict>")
    assert str(info.value).splitlines() == [
        "<dict>: group 'tp': group id must be a non-negative decimal integer "
        "(collective nodes name it in their pg_name attribute)",
        "<dict>: group 'tp': expected a list of NPU ids, got 3",
    ]
    with pytest.raises(ConfigError) as info:  # checked once every id and member is valid
        parse_comm_groups({"2": [0, 0], "02": [1]}, 4, source="<dict>")
    assert str(info.value).splitlines() == [
        "<dict>: group 2[1]: NPU 0 listed twice",
        "<dict>: group 02: group id 2 defined twice",
    ]
