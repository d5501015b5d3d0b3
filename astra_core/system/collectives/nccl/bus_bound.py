"""The line-rate floor of a collective on the NCCL model: the time no cost table
and no calibrated profile may beat, its bytes over the links it must cross.

Per GPU and direction, a collective of ``n`` ranks moves at least:

* an all-reduce of ``S`` bytes: ``2 (n - 1) / n x S`` where GPUs do the
  reductions (every element's sum needs ``2 (n - 1)`` one-way messages among
  ``n`` holders; Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms for
  clusters of workstations", JPDC 69(2), 2009; nccl-tests' bus bandwidth factor);
  ``S`` where the switch reduces (NVLS, CollNet: every element leaves a GPU once
  and its sum comes back once);
* an all-gather of an ``S``-byte output: ``(n - 1) / n x S`` in;
* a reduce-scatter of an ``S``-byte input: ``(n - 1) / n x S`` out (another
  GPU's share of the input must leave, as itself or within a partial sum);
* a broadcast or reduce of ``S`` bytes: ``S`` (the root's out, or in).

Inside one node those bytes cross a GPU's NVLinks at their line rate (network
dimension 0's bandwidth, not NCCL's lower rating of them). Across ``N`` nodes
the same law holds per node with ``N`` in place of ``n``, over all the node's
NICs at their line rate; and per GPU over its NVLinks and all its node's NICs
together (generous: a GPU reaches another GPU's NIC through NVLink).
"""

from __future__ import annotations

from astra_core.system.collectives.nccl.tuning import Algo, Func

#: Algorithms whose reductions a switch does for a GPU (NVLink SHARP inside a node,
#: CollNet's IB SHARP across nodes).
_IN_SWITCH = (Algo.NVLS, Algo.NVLS_TREE, Algo.COLLNET_DIRECT, Algo.COLLNET_CHAIN)
#: Across nodes, those whose reductions the network's switches do (NCCL runs NVLS
#: across nodes only with CollNet; NVLSTree's tree between nodes is GPUs').
_IN_NETWORK = (Algo.NVLS, Algo.COLLNET_DIRECT, Algo.COLLNET_CHAIN)


def bus_bytes(func: Func, nbytes: float, n: int, in_switch: bool) -> float:
    """The bytes one of ``n`` participants must move each way (see the module
    docstring): ``nbytes`` is the operation's size (an all-gather's output, a
    reduce-scatter's input); 0 for one participant."""
    if n < 2:
        return 0.0
    if func == Func.ALL_REDUCE:
        return nbytes if in_switch else 2.0 * (n - 1) / n * nbytes
    if func in (Func.ALL_GATHER, Func.REDUCE_SCATTER):
        return (n - 1) / n * nbytes
    return float(nbytes)  # broadcast, reduce


def line_rate_floor_us(
    func: Func,
    algo: Algo,
    nbytes: float,
    n: int,
    nodes: int,
    nvlink_gbps: float,
    node_nic_gbps: float,
) -> float:
    """The least time (µs) of a collective of ``nbytes`` (see :func:`bus_bytes`)
    over ``n`` ranks on ``nodes`` nodes: its bytes per GPU over ``nvlink_gbps``
    (a GPU's NVLink line rate, GB/s = 1e3 B/µs; with the node's NICs when
    ``nodes`` > 1), and across nodes its bytes per node over ``node_nic_gbps``
    (all a node's NICs at line rate). A rate of 0 bounds nothing."""
    floor = 0.0
    gpu_gbps = nvlink_gbps + (node_nic_gbps if nodes > 1 else 0.0)
    if gpu_gbps > 0:
        floor = bus_bytes(func, nbytes, n, algo in _IN_SWITCH) / (1e3 * gpu_gbps)
    if nodes > 1 and node_nic_gbps > 0:
        per_node = bus_bytes(func, nbytes, nodes, algo in _IN_NETWORK)
        floor = max(floor, per_node / (1e3 * node_nic_gbps))
    return floor
