"""The messages one rank sends and receives for one NCCL collective.

A collective runs on ``channels`` (CUDA blocks), each moving its share of
the buffer in *chunks*, loop after loop (``calcCollChunking``,
``src/enqueue.cc``). Channels that take the same path are merged here into
one *lane*: a lane sends one message per chunk step to each peer of the
step, carrying all its channels' bytes. Inside a node all channels of a ring
take the same NVSwitch hops, so one lane serves them; across nodes each
channel leaves through its own NIC (rail), so there is one lane per rail in
use.

A :class:`Lane` is data: sends ``(dst, bytes, needs)`` in issue order, where
``needs`` are indices of the lane's receives that must have arrived first
(the step's input); receives ``(src, bytes)``; and ``window``: sends in
flight at once (NCCL's ``NCCL_STEPS`` = 8 buffer slots per connection,
``sliceSteps`` slots per message).

Patterns (per loop, per lane, ``n`` ranks in ring order):

* **Ring** all-reduce: ``2(n-1)`` steps (reduce-scatter, then all-gather);
  all-gather and reduce-scatter ``n-1``; step ``k`` forwards what step
  ``k-1`` received. Simple sends each chunk as 2 slices
  (``ALLREDUCE_CHUNKSTEPS / ALLREDUCE_SLICESTEPS``).
* **Tree** all-reduce: two trees over half the channels each; inside a node a
  chain, across nodes NCCL's double binary tree of nodes (``ncclGetDtree``);
  a chunk is reduced up (a rank sends to its parent once every child's part
  arrived) and broadcast down.
* **NVLS** (NVLink SHARP, one node): each chunk is split over the ``n`` heads;
  a rank sends every other head that head's part and receives its own part
  from every rank (the NVSwitch reduces them), then sends its reduced part
  to every rank (the NVSwitch multicasts it). The packet backends carry these
  as plain messages: they do not reduce or multicast inside switches.
* **NVLS-Tree** (several nodes): NVLS reduce-scatter inside each node, a
  tree over the nodes between the GPUs of the same local rank, NVLS
  all-gather.
* **All-to-all**: NCCL's grouped send/receive: every peer gets its part in
  ``p2pChunkSize`` pieces (512 KiB over NVLink, 128 KiB over the network;
  ``NCCL_P2P_NVL_CHUNKSIZE``, ``NCCL_P2P_NET_CHUNKSIZE``).

Wire bytes: LL moves 8 data bytes per 16-byte line (flag + data), LL128 120
per 128 (``NCCL_LL128_DATAELEMS / NCCL_LL128_LINEELEMS``), Simple the data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from astra_core.system.collectives.nccl.tuning import Algo, Proto

NCCL_STEPS = 8  # buffer slots per connection (device.h)
#: Per-channel chunk of each protocol (``buffSizes[p] / NCCL_STEPS``, data bytes):
#: Simple 4 MiB / 8 = 512 KiB x ALLREDUCE_CHUNKSTEPS 4 for rings; LL 8 lines x 512
#: threads x 16 B / 2 (half is flags); LL128 120 x 640 x 8 B x 120 / 128.
SIMPLE_STEP = (1 << 22) // NCCL_STEPS
LL_CHUNK = 8 * 512 * 16 // 2
LL128_CHUNK = 120 * 640 * 8 // 128 * 120
RING_CHUNK_STEPS, RING_SLICE_STEPS = NCCL_STEPS // 2, NCCL_STEPS // 4
NVLS_CHUNK = 128 * 1024  # NCCL_NVLS_CHUNKSIZE default
P2P_NVL_CHUNK, P2P_NET_CHUNK = 1 << 19, 1 << 17
#: Wire bytes per data byte (LL: 16-byte lines of 8 data bytes; LL128: 128 of 120).
WIRE = {Proto.LL: 2.0, Proto.LL128: 128 / 120, Proto.SIMPLE: 1.0}
GRAIN = 16  # bytes: chunks are whole 16-byte vectors


@dataclass
class Lane:
    """One lane's messages on one rank (see the module docstring)."""

    sends: list[tuple[int, int, tuple[int, ...]]] = field(default_factory=list)
    recvs: list[tuple[int, int]] = field(default_factory=list)
    window: int = NCCL_STEPS


@dataclass(frozen=True)
class Layout:
    """Where the communicator's ranks sit: ``members`` in NCCL rank order (global
    rank ids), ``per_node``: consecutive members sharing a node."""

    members: tuple[int, ...]
    per_node: int

    @property
    def n(self) -> int:
        return len(self.members)

    @property
    def nodes(self) -> int:
        return self.n // self.per_node


def _wire(size: int, proto: Proto) -> int:
    return max(1, int(size * WIRE[proto] + 0.5))


def _split(total: int, parts: int) -> list[int]:
    """``total`` channels over ``parts`` lanes, as even as can be."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _chunks(nbytes: int, per_loop_units: int, max_chunk: int) -> list[int]:
    """Per-unit chunk of each loop: loops of ``per_loop_units`` chunks of at most
    ``max_chunk`` bytes; the last loop's chunks shrink to cover what is left."""
    out = []
    remaining = nbytes
    while remaining > 0:
        chunk = min(max_chunk, -(-remaining // per_loop_units))
        chunk = -(-chunk // GRAIN) * GRAIN
        out.append(chunk)
        remaining -= chunk * per_loop_units
    return out


def ring_order(layout: Layout, lane: int) -> list[int]:
    """Members in lane ``lane``'s ring: node after node, each node's GPUs from
    local rank ``lane`` on, so the node-to-node hop of lane ``g`` leaves from
    local rank ``g - 1`` and enters at local rank ``g`` (its rail, with the
    NVLink hop in front: NCCL's PXN)."""
    L = layout.per_node
    order = []
    for node in range(layout.nodes):
        base = node * L
        order.extend(layout.members[base + (lane + i) % L] for i in range(L))
    return order


def ring(func: str, layout: Layout, me: int, nbytes: int, proto: Proto, channels: int) -> list[Lane]:
    """Ring lanes for ``func`` in ``all-reduce``, ``all-gather``, ``reduce-scatter``;
    ``nbytes``: NCCL's operation size (all-gather and reduce-scatter: the
    whole buffer, ``n`` times one rank's part)."""
    n = layout.n
    steps = 2 * (n - 1) if func == "all-reduce" else n - 1
    lanes_count = 1 if layout.nodes == 1 else min(channels, layout.per_node)
    if proto == Proto.SIMPLE:
        max_chunk, slices = SIMPLE_STEP * RING_CHUNK_STEPS, RING_CHUNK_STEPS // RING_SLICE_STEPS
    else:
        max_chunk, slices = (LL_CHUNK if proto == Proto.LL else LL128_CHUNK), 1
    window = NCCL_STEPS // (RING_SLICE_STEPS if proto == Proto.SIMPLE else 1)
    lanes = []
    for lane_id, lane_channels in enumerate(_split(channels, lanes_count)):
        order = ring_order(layout, lane_id)
        pos = order.index(me)
        nxt, prev = order[(pos + 1) % n], order[pos - 1]
        lane = Lane(window=window)
        for chunk in _chunks(nbytes, channels * n, max_chunk):
            piece = lane_channels * chunk
            sizes = [_wire(piece // slices + (1 if s < piece % slices else 0), proto)
                     for s in range(slices)]
            base = len(lane.recvs)
            for k in range(steps):
                for s, size in enumerate(sizes):
                    needs = () if k == 0 else (base + (k - 1) * slices + s,)
                    lane.sends.append((nxt, size, needs))
                    lane.recvs.append((prev, size))
        lanes.append(lane)
    return lanes


def chain(func: str, layout: Layout, me: int, nbytes: int, proto: Proto, channels: int) -> list[Lane]:
    """Broadcast (from position 0) or reduce (to position 0) along lane 0's ring:
    NCCL's ``PipelineFrom`` / ``PipelineTo`` patterns, one chunk per step
    (``BROADCAST_CHUNKSTEPS`` = ``REDUCE_CHUNKSTEPS`` = 1), every rank
    forwarding a chunk once it has it."""
    order = ring_order(layout, 0)
    root = layout.members[0]
    start = order.index(root)
    order = order[start:] + order[:start]  # the root first
    if func == "reduce":
        order = order[1:] + order[:1]  # from the root's successor round to the root
    pos = order.index(me)
    chunk = LL_CHUNK if proto == Proto.LL else LL128_CHUNK if proto == Proto.LL128 else SIMPLE_STEP
    lane = Lane()
    for piece in (channels * c for c in _chunks(nbytes, channels, chunk)):
        size = _wire(piece, proto)
        needs: tuple[int, ...] = ()
        if pos > 0:
            needs = (len(lane.recvs),)
            lane.recvs.append((order[pos - 1], size))
        if pos + 1 < len(order):
            lane.sends.append((order[pos + 1], size, needs))
    return [lane]


def _btree(nranks: int, rank: int) -> tuple[int, list[int]]:
    """NCCL's binary tree over ``nranks`` (``ncclGetBtree``): (parent or -1, children)."""
    bit = 1
    while bit < nranks and not bit & rank:
        bit <<= 1
    if rank == 0:
        return -1, ([bit >> 1] if nranks > 1 else [])
    up = (rank ^ bit) | (bit << 1)
    if up >= nranks:
        up = rank ^ bit
    low = bit >> 1
    children = []
    if low:
        children.append(rank - low)
        down1 = rank + low
        while down1 >= nranks and low:
            low >>= 1
            down1 = rank + low
        if low and down1 < nranks:
            children.append(down1)
    return up, children


def dtree(nranks: int, rank: int, tree: int) -> tuple[int, list[int]]:
    """Tree ``tree`` (0 or 1) of NCCL's double binary tree (``ncclGetDtree``):
    the second tree is the first shifted by one (odd counts) or mirrored."""
    if tree == 0:
        return _btree(nranks, rank)
    if nranks % 2:
        up, down = _btree(nranks, (rank - 1) % nranks)
        return (-1 if up == -1 else (up + 1) % nranks), [(d + 1) % nranks for d in down]
    up, down = _btree(nranks, nranks - 1 - rank)
    return (-1 if up == -1 else nranks - 1 - up), [nranks - 1 - d for d in down]


def _tree_links(layout: Layout, me: int, tree: int) -> tuple[int, list[int]]:
    """(parent or -1, children) of ``me`` in tree ``tree``: a chain inside each node
    from its head (local rank 0 for tree 0, the middle one for tree 1), the
    heads joined by the double binary tree of nodes."""
    L = layout.per_node
    index = layout.members.index(me)
    node, local = divmod(index, L)
    head = 0 if tree == 0 else L // 2
    chain = [layout.members[node * L + (head + i) % L] for i in range(L)]
    pos = chain.index(me)
    children = [chain[pos + 1]] if pos + 1 < L else []
    if pos > 0:
        return chain[pos - 1], children
    up, down = dtree(layout.nodes, node, tree)
    heads = [layout.members[k * L + head] for k in range(layout.nodes)]
    return (heads[up] if up >= 0 else -1), [heads[d] for d in down] + children


def _tree_lane(parent: int, children: list[int], pieces: list[int], proto: Proto) -> Lane:
    """Reduce up then broadcast down, chunk by chunk."""
    lane = Lane()
    for piece in pieces:
        size = _wire(piece, proto)
        ups = []
        for child in children:
            ups.append(len(lane.recvs))
            lane.recvs.append((child, size))
        if parent >= 0:
            lane.sends.append((parent, size, tuple(ups)))
            down = (len(lane.recvs),)
            lane.recvs.append((parent, size))
        else:
            down = tuple(ups)
        for child in children:
            lane.sends.append((child, size, down))
    return lane


def tree(layout: Layout, me: int, nbytes: int, proto: Proto, channels: int) -> list[Lane]:
    """Tree all-reduce lanes: two trees, half the channels each."""
    chunk = LL_CHUNK if proto == Proto.LL else LL128_CHUNK if proto == Proto.LL128 else SIMPLE_STEP
    trees = 2 if channels >= 2 else 1
    lanes = []
    for t, lane_channels in enumerate(_split(channels, trees)):
        parent, children = _tree_links(layout, me, t)
        pieces = [lane_channels * c for c in _chunks(nbytes, channels, chunk)]
        lanes.append(_tree_lane(parent, children, pieces, proto))
    return lanes


def _direct(lane: Lane, peers: list[int], size: int, needs: tuple[int, ...] = ()) -> list[int]:
    """Send ``size`` to every peer and expect as much from each; the receive indices."""
    got = []
    for peer in peers:
        lane.sends.append((peer, size, needs))
    for peer in peers:
        got.append(len(lane.recvs))
        lane.recvs.append((peer, size))
    return got


def nvls(func: str, layout: Layout, me: int, nbytes: int, channels: int) -> list[Lane]:
    """NVLS lanes (one node: reduce-scatter through the switch, all-gather by
    multicast; several nodes, all-reduce: NVLS-Tree)."""
    L = layout.per_node
    index = layout.members.index(me)
    node = index // L
    local_peers = [m for m in layout.members[node * L:(node + 1) * L] if m != me]
    lane = Lane()
    for chunk in _chunks(nbytes, channels * L, NVLS_CHUNK):
        part = channels * chunk
        needs: tuple[int, ...] = ()
        if func in ("all-reduce", "reduce-scatter"):
            needs = tuple(_direct(lane, local_peers, part))
        if layout.nodes > 1 and func == "all-reduce":
            parent, children = dtree(layout.nodes, node, 0)
            rail = [layout.members[k * L + index % L] for k in range(layout.nodes)]
            ups = []
            for child in children:
                ups.append(len(lane.recvs))
                lane.recvs.append((rail[child], part))
            if parent >= 0:
                lane.sends.append((rail[parent], part, needs + tuple(ups)))
                needs = (len(lane.recvs),)
                lane.recvs.append((rail[parent], part))
            else:
                needs = needs + tuple(ups)
            for child in children:
                lane.sends.append((rail[child], part, needs))
        if func in ("all-reduce", "all-gather"):
            _direct(lane, local_peers, part, needs)
    return [lane]


def all_to_all(layout: Layout, me: int, nbytes: int) -> list[Lane]:
    """Grouped send/receive: ``nbytes / n`` to every other member, in p2p chunks."""
    lane = Lane()
    n = layout.n
    part = nbytes // n
    if part <= 0:
        return [lane]
    L = layout.per_node
    index = layout.members.index(me)

    def pieces(other: int) -> list[int]:
        chunk = P2P_NVL_CHUNK if other // L == index // L else P2P_NET_CHUNK
        return [min(chunk, part - start) for start in range(0, part, chunk)]

    for offset in range(1, n):
        dst, src = (index + offset) % n, (index - offset) % n
        lane.sends.extend((layout.members[dst], size, ()) for size in pieces(dst))
        lane.recvs.extend((layout.members[src], size) for size in pieces(src))
    lane.window = 10 ** 9  # every peer has its own connection and slots
    return [lane]


def lanes_for(func: str, algo: Algo, proto: Proto, layout: Layout, me: int, nbytes: int,
              channels: int) -> list[Lane]:
    """The lanes of ``me`` for one collective (NCCL's algorithm ``algo``)."""
    if func == "all-to-all":
        return all_to_all(layout, me, nbytes)
    if func in ("broadcast", "reduce"):
        return chain(func, layout, me, nbytes, proto, channels)
    if algo == Algo.RING:
        return ring(func, layout, me, nbytes, proto, channels)
    if algo == Algo.TREE:
        return tree(layout, me, nbytes, proto, channels)
    if algo in (Algo.NVLS, Algo.NVLS_TREE):
        return nvls(func, layout, me, nbytes, channels)
    raise ValueError(f"no message pattern for NCCL algorithm {algo.name}")
