"""The messages one rank sends and receives for one NCCL collective.

A collective runs on ``channels`` (CUDA blocks), each moving its share of
the buffer in *chunks*, loop after loop (``calcCollChunking``,
``src/enqueue.cc``). Channels that take the same path are merged here: one
message per chunk step carries all their bytes. Inside a node all channels of
a ring take the same NVSwitch hops; across nodes each channel leaves through
its own NIC (rail), so rings and trees are kept apart per rail in use.

A rank's :class:`Schedule` is data: *lanes* of sends ``(dst, bytes, needs)``
issued in order, where ``needs`` are indices into the rank's receive list
that must have arrived first (the data a step forwards), with at most
``window`` sends of a lane in flight (NCCL's ``NCCL_STEPS`` = 8 buffer slots
per connection, ``sliceSteps`` slots per message); and the receives
``(src, bytes, lane)``, ``lane`` being the sender's lane (it tags the
message). Work that NCCL runs on separate warps or thread blocks (a tree's
reduce going up and its broadcast coming down; NVLS's reduce-scatter,
network tree and all-gather) is on separate lanes, so one chunk's later
stage never holds up the next chunk's earlier one.

Patterns (``n`` ranks):

* **Ring** all-reduce: per loop ``2(n-1)`` steps (reduce-scatter, then
  all-gather); all-gather and reduce-scatter ``n-1``; step ``k`` forwards
  what step ``k-1`` received. Simple sends each chunk as 2 slices
  (``ALLREDUCE_CHUNKSTEPS / ALLREDUCE_SLICESTEPS``).
* **Tree** all-reduce: half the channels on each tree of NCCL's double
  binary tree of nodes (``ncclGetDtree``), a chain inside each node from the
  GPU of the channel's NIC; a chunk goes up once every child's part arrived
  and comes down once the parent's did.
* **NVLS** (NVLink SHARP, one node): each chunk is split over the ``n``
  heads; a rank sends every other head that head's part and receives its own
  part from every rank (the NVSwitch reduces them), then sends its reduced
  part to every rank (the NVSwitch multicasts it). Packet backends carry
  these as plain messages: they do not reduce or multicast in switches.
* **NVLS-Tree** (several nodes): the NVLS reduce-scatter inside each node, a
  tree over the nodes between the GPUs of one local rank (a rail), the NVLS
  all-gather.
* **CollNet** (InfiniBand SHARP, all-reduce across nodes): CollNet-Direct
  is NVLS-Tree's pattern with direct copies inside the node and the
  network's reduction across; CollNet-Chain a chain in each node up to the
  GPU of the channel's NIC. The switches' reduction is carried as messages
  to and from one GPU of the rail, a different one for each chunk.
* **Broadcast / reduce**: a chain along the ring from / to position 0.
* **All-to-all**: NCCL's grouped send/receive: every peer gets its part in
  ``p2pChunkSize`` pieces (512 KiB over NVLink, 128 KiB over the network;
  ``NCCL_P2P_NVL_CHUNKSIZE``, ``NCCL_P2P_NET_CHUNKSIZE``).

Wire bytes: LL moves 8 data bytes per 16-byte line (flag + data), LL128 120
per 128 (``NCCL_LL128_DATAELEMS / NCCL_LL128_LINEELEMS``), Simple the data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from astra_core.system.collectives.nccl.tuning import Algo, Proto
from astra_core.system.collectives.uneven import Uneven

NCCL_STEPS = 8  # buffer slots per connection (device.h)
#: Per-channel chunk of each protocol (``buffSizes[p] / NCCL_STEPS``, data bytes):
#: Simple 4 MiB / 8 = 512 KiB (x ALLREDUCE_CHUNKSTEPS 4 for rings); LL 8 lines x 512
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
NO_WINDOW = 1 << 60


@dataclass
class Lane:
    """Sends issued in order: ``(dst, bytes, needs)``; ``window`` in flight."""

    sends: list[tuple[int, int, tuple[int, ...]]] = field(default_factory=list)
    window: int = NCCL_STEPS


@dataclass
class Schedule:
    """One rank's lanes and receives (see the module docstring)."""

    lanes: list[Lane] = field(default_factory=list)
    recvs: list[tuple[int, int, int]] = field(default_factory=list)

    def lane(self, window: int = NCCL_STEPS) -> int:
        """Open a lane; its index."""
        self.lanes.append(Lane(window=window))
        return len(self.lanes) - 1

    def send(self, lane: int, dst: int, size: int, needs: tuple[int, ...] = ()) -> None:
        self.lanes[lane].sends.append((dst, size, needs))

    def recv(self, src: int, size: int, lane: int) -> int:
        """Expect ``size`` bytes from ``src``'s lane ``lane``; the receive's index."""
        self.recvs.append((src, size, lane))
        return len(self.recvs) - 1

    def frozen(self) -> tuple[tuple[tuple[tuple[tuple[int, int, tuple[int, ...]], ...], int], ...], tuple]:
        """(lanes as ``(sends, window)``, receives), all tuples: what the kernel's
        :class:`~.phase.NcclPhase` runs."""
        return tuple((tuple(lane.sends), lane.window) for lane in self.lanes), tuple(self.recvs)


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
    """``total`` channels over ``parts`` groups, as even as can be."""
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


def _rails(layout: Layout, channels: int) -> int:
    """Channel groups that need their own path: 1 inside a node, one per rail across."""
    return 1 if layout.nodes == 1 else max(1, min(channels, layout.per_node))


def ring_order(layout: Layout, rail: int) -> list[int]:
    """Members in rail ``rail``'s ring: node after node, each node's GPUs from
    local rank ``rail`` on, so the node-to-node hop leaves from local rank
    ``rail - 1`` and enters at local rank ``rail`` (its NIC, with the NVLink
    hop in front: NCCL's PXN)."""
    L = layout.per_node
    order: list[int] = []
    for node in range(layout.nodes):
        base = node * L
        order.extend(layout.members[base + (rail + i) % L] for i in range(L))
    return order


def ring(out: Schedule, func: str, layout: Layout, me: int, nbytes: int, proto: Proto, channels: int) -> None:
    """Ring steps for ``func`` in ``all-reduce``, ``all-gather``, ``reduce-scatter``;
    ``nbytes``: NCCL's operation size (all-gather and reduce-scatter: the
    whole buffer, ``n`` times one rank's part)."""
    n = layout.n
    steps = 2 * (n - 1) if func == "all-reduce" else n - 1
    if proto == Proto.SIMPLE:
        max_chunk, slices = SIMPLE_STEP * RING_CHUNK_STEPS, RING_CHUNK_STEPS // RING_SLICE_STEPS
    else:
        max_chunk, slices = (LL_CHUNK if proto == Proto.LL else LL128_CHUNK), 1
    window = NCCL_STEPS // (RING_SLICE_STEPS if proto == Proto.SIMPLE else 1)
    chunks = _chunks(nbytes, channels * n, max_chunk)
    for rail, rail_channels in enumerate(_split(channels, _rails(layout, channels))):
        order = ring_order(layout, rail)
        pos = order.index(me)
        nxt, prev = order[(pos + 1) % n], order[pos - 1]
        lane = out.lane(window)
        sends, recvs = out.lanes[lane].sends, out.recvs
        for chunk in chunks:
            piece = rail_channels * chunk
            sizes = [_wire(piece // slices + (1 if s < piece % slices else 0), proto) for s in range(slices)]
            # step k's slice s forwards what step k - 1's slice s received: receive
            # first + (k - 1) slices + s, the receives listed step by step
            first = len(recvs)
            sends.extend(
                (nxt, size, (first + (k - 1) * slices + s,) if k else ())
                for k in range(steps)
                for s, size in enumerate(sizes)
            )
            recvs.extend((prev, size, lane) for _ in range(steps) for size in sizes)


def chain(
    out: Schedule, func: str, layout: Layout, me: int, nbytes: int, proto: Proto, channels: int
) -> None:
    """Broadcast (from position 0) or reduce (to position 0) along the ring:
    NCCL's ``PipelineFrom`` / ``PipelineTo`` patterns, one step per chunk
    (``BROADCAST_CHUNKSTEPS`` = ``REDUCE_CHUNKSTEPS`` = 1), every rank
    forwarding a chunk once it has it."""
    order = ring_order(layout, 0)
    start = order.index(layout.members[0])
    order = order[start:] + order[:start]  # the root first
    if func == "reduce":
        order = order[1:] + order[:1]  # from the root's successor round to the root
    pos = order.index(me)
    chunk = LL_CHUNK if proto == Proto.LL else LL128_CHUNK if proto == Proto.LL128 else SIMPLE_STEP
    lane = out.lane()
    for piece in (channels * c for c in _chunks(nbytes, channels, chunk)):
        size = _wire(piece, proto)
        needs = (out.recv(order[pos - 1], size, lane),) if pos > 0 else ()
        if pos + 1 < len(order):
            out.send(lane, order[pos + 1], size, needs)


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


def _up_down(
    out: Schedule,
    parent: int,
    children: list[int],
    pieces: list[int],
    proto: Proto,
    first: list[tuple[int, ...]] | None = None,
) -> list[tuple[int, ...]]:
    """Reduce up then broadcast down, chunk by chunk, on an up lane and a down
    lane (``parent`` -1 at the root); chunk ``c`` also waits for receives
    ``first[c]`` before it goes up. Returns per chunk the receives after which
    its result is in."""
    up, down = out.lane(), out.lane()
    done = []
    for c, piece in enumerate(pieces):
        size = _wire(piece, proto)
        ups = tuple(out.recv(child, size, up) for child in children) + (first[c] if first else ())
        if parent >= 0:
            out.send(up, parent, size, ups)
            ready: tuple[int, ...] = (out.recv(parent, size, down),)
        else:
            ready = ups
        for child in children:
            out.send(down, child, size, ready)
        done.append(ready)
    return done


def _sharp(
    out: Schedule,
    lanes: tuple[int, int],
    rail: list[int],
    node: int,
    pieces: list[int],
    first: list[tuple[int, ...]],
) -> list[tuple[int, ...]]:
    """The network's in-switch reduction (InfiniBand SHARP) of each chunk across
    the rail's GPUs ``rail[k]`` (one per node), as messages a network model
    without reducing switches can carry: every GPU sends its part to one GPU
    of the rail and gets the result back from it, the GPU taking turns chunk
    by chunk (each GPU's bytes then average those of the switch's tree).
    ``first[c]``: receives chunk ``c`` waits for before it leaves; returns per
    chunk the receives after which its result is in. ``lanes``: (up, down)."""
    up, down = lanes
    done = []
    nodes = len(rail)
    for c, piece in enumerate(pieces):
        root = c % nodes
        if node == root:
            parts = tuple(out.recv(rail[k], piece, up) for k in range(nodes) if k != root)
            for k in range(nodes):
                if k != root:
                    out.send(down, rail[k], piece, parts + first[c])
            done.append(parts + first[c])
        else:
            out.send(up, rail[root], piece, first[c])
            done.append((out.recv(rail[root], piece, down),))
    return done


def collnet_chain(out: Schedule, layout: Layout, me: int, nbytes: int, channels: int) -> None:
    """CollNet chain all-reduce: per rail, a chain in each node up to the GPU of
    that rail's NIC, the network's reduction across nodes, the chain back down.
    Chunk: ``min(256 KiB, 4 steps)``, halved while the buffer is small against
    the chain's depth (``calcCollChunking``, depth = GPUs per node)."""
    L = layout.per_node
    chunk, depth = 256 * 1024, L
    while nbytes // (channels * chunk) < depth * 64 and chunk > 131072:
        chunk //= 2
    while nbytes // (channels * chunk) < depth * 8 and chunk > 65536:
        chunk //= 2
    while nbytes // (channels * chunk) < depth and chunk > 32768:
        chunk //= 2
    chunks = _chunks(nbytes, channels, chunk)
    index = layout.members.index(me)
    node = index // L
    for g, group_channels in enumerate(_split(channels, _rails(layout, channels))):
        chain_ = [layout.members[node * L + (g + i) % L] for i in range(L)]
        pos = chain_.index(me)
        pieces = [group_channels * c for c in chunks]
        # every rank opens the same lanes, so that lane numbers (message tags) agree
        up, down, net_up, net_down = (out.lane() for _ in range(4))
        below = [chain_[pos + 1]] if pos + 1 < L else []
        ups = [tuple(out.recv(child, p, up) for child in below) for p in pieces]
        ready: list[tuple[int, ...]]
        if pos > 0:  # a chain member: up to the previous GPU, the result back from it
            for c, p in enumerate(pieces):
                out.send(up, chain_[pos - 1], p, ups[c])
            ready = [(out.recv(chain_[pos - 1], p, down),) for p in pieces]
        else:  # the head: through the network's reduction
            rail = [layout.members[k * L + g % L] for k in range(layout.nodes)]
            ready = _sharp(out, (net_up, net_down), rail, node, pieces, ups)
        for c, p in enumerate(pieces):
            for child in below:
                out.send(down, child, p, ready[c])


def tree(out: Schedule, layout: Layout, me: int, nbytes: int, proto: Proto, channels: int) -> None:
    """Tree all-reduce: channel groups alternate between the two trees; group
    ``g``'s chain in a node starts at local rank ``g`` (its NIC) and its heads
    are joined across nodes by that tree of nodes."""
    L = layout.per_node
    chunk = LL_CHUNK if proto == Proto.LL else SIMPLE_STEP
    if proto == Proto.LL128:
        chunk = _tree_ll128_chunk(layout, nbytes, channels)
    chunks = _chunks(nbytes, channels, chunk)
    groups = max(_rails(layout, channels), min(2, channels))
    index = layout.members.index(me)
    node = index // L
    for g, group_channels in enumerate(_split(channels, groups)):
        head = g % L if layout.nodes > 1 else (g * L // 2) % L
        chain_ = [layout.members[node * L + (head + i) % L] for i in range(L)]
        pos = chain_.index(me)
        children = [chain_[pos + 1]] if pos + 1 < L else []
        if pos > 0:
            parent = chain_[pos - 1]
        else:
            up, down = dtree(layout.nodes, node, g % 2)
            parent = layout.members[up * L + head] if up >= 0 else -1
            children = [layout.members[d * L + head] for d in down] + children
        _up_down(out, parent, children, [group_channels * c for c in chunks], proto)


def _tree_ll128_chunk(layout: Layout, nbytes: int, channels: int) -> int:
    """Tree LL128's chunk (``calcCollChunking``): halved while the buffer is small
    against the tree's depth, down to 128 KiB then 32 KiB."""
    chunk = LL128_CHUNK
    ppn = layout.per_node
    steps = 1 + (layout.nodes.bit_length() - 1) + 0.1 * ppn
    while nbytes // (channels * chunk) < steps * 64 / ppn and chunk > 131072:
        chunk //= 2
    while nbytes // (channels * chunk) < steps * 16 / ppn and chunk > 32768:
        chunk //= 2
    return chunk


def _nvls_chunk(layout: Layout, nbytes: int, channels: int, algo: Algo) -> int:
    """NVLS and NVLS-Tree chunk (``calcCollChunking``): ``NCCL_NVLS_CHUNKSIZE`` (128 KiB;
    NVLS-Tree at most ``nvlsTreeMaxChunkSize``, 64 KiB from 4 nodes on), smaller
    for buffers that would not fill every head of every channel many times."""
    ops = channels * layout.per_node
    if algo == Algo.NVLS:
        chunk = NVLS_CHUNK
        for factor, floor, size in ((64, 65536, 65536), (8, 32768, 32768), (2, 16384, 16384)):
            if nbytes < factor * ops * chunk and chunk > floor:
                chunk = size
        return chunk
    chunk = min(NVLS_CHUNK, 65536 if layout.nodes >= 4 else NVLS_CHUNK)
    for factor, floor in ((32, 262144), (16, 131072), (4, 65536), (1, 32768)):
        if nbytes < factor * ops * chunk and chunk > floor:
            chunk = floor
    return chunk


def nvls(out: Schedule, func: str, algo: Algo, layout: Layout, me: int, nbytes: int, channels: int) -> None:
    """NVLS (one node), NVLS-Tree or CollNet-Direct (all-reduce across nodes)."""
    L = layout.per_node
    index = layout.members.index(me)
    node = index // L
    peers = [m for m in layout.members[node * L : (node + 1) * L] if m != me]
    if algo == Algo.COLLNET_DIRECT:
        chunk = SIMPLE_STEP
        for factor, floor in ((64, 131072), (8, 65536), (8, 32768)):
            while nbytes // (channels * L * chunk) < L * factor and chunk > floor:
                chunk //= 2
    else:
        chunk = _nvls_chunk(layout, nbytes, channels, algo)
    chunks = _chunks(nbytes, channels * L, chunk)
    parts = [channels * c for c in chunks]
    reduce_scatter = func in ("all-reduce", "reduce-scatter")
    gather = func in ("all-reduce", "all-gather")
    scatter_lane = out.lane() if reduce_scatter else -1
    reduced: list[tuple[int, ...]] = []
    for part in parts:
        if reduce_scatter:
            for peer in peers:
                out.send(scatter_lane, peer, part)
            reduced.append(tuple(out.recv(peer, part, scatter_lane) for peer in peers))
        else:
            reduced.append(())
    if layout.nodes > 1 and func == "all-reduce":
        rail = [layout.members[k * L + index % L] for k in range(layout.nodes)]
        if algo == Algo.COLLNET_DIRECT:  # a node's reduced part through the network's reduction
            reduced = _sharp(out, (out.lane(), out.lane()), rail, node, parts, reduced)
        else:  # up the tree of its rail's GPUs
            up, down = dtree(layout.nodes, node, 0)
            reduced = _up_down(
                out, rail[up] if up >= 0 else -1, [rail[d] for d in down], parts, Proto.SIMPLE, reduced
            )
    if gather:
        lane = out.lane()
        for c, part in enumerate(parts):
            for peer in peers:
                out.send(lane, peer, part, reduced[c])
            for peer in peers:
                out.recv(peer, part, lane)


def all_to_all(out: Schedule, layout: Layout, me: int, nbytes: int, uneven: Uneven | None = None) -> None:
    """Grouped send/receive: ``nbytes / n`` to every other member, in p2p chunks; with
    ``uneven``, its own bytes to and from each member."""
    n = layout.n
    part = nbytes // n
    if uneven is None and part <= 0:
        return
    sends = uneven.send_bytes if uneven is not None else (part,) * n
    recvs = uneven.recv_bytes if uneven is not None else (part,) * n
    L = layout.per_node
    index = layout.members.index(me)

    def pieces(other: int, size: int) -> list[int]:
        chunk = P2P_NVL_CHUNK if other // L == index // L else P2P_NET_CHUNK
        return [min(chunk, size - start) for start in range(0, size, chunk)]

    lane = out.lane(NO_WINDOW)  # every peer has its own connection and slots
    for offset in range(1, n):
        dst, src = (index + offset) % n, (index - offset) % n
        for size in pieces(dst, sends[dst]):
            out.send(lane, layout.members[dst], size)
        for size in pieces(src, recvs[src]):
            out.recv(layout.members[src], size, lane)


def schedule_for(
    func: str,
    algo: Algo,
    proto: Proto,
    layout: Layout,
    me: int,
    nbytes: int,
    channels: int,
    uneven: Uneven | None = None,
) -> Schedule:
    """The :class:`Schedule` of ``me`` for one collective (NCCL's algorithm ``algo``;
    ``uneven``: an all-to-all's own bytes per member, :mod:`..uneven`)."""
    out = Schedule()
    if func == "all-to-all":
        all_to_all(out, layout, me, nbytes, uneven)
    elif func in ("broadcast", "reduce"):
        chain(out, func, layout, me, nbytes, proto, channels)
    elif algo == Algo.RING:
        ring(out, func, layout, me, nbytes, proto, channels)
    elif algo == Algo.TREE:
        tree(out, layout, me, nbytes, proto, channels)
    elif algo in (Algo.NVLS, Algo.NVLS_TREE, Algo.COLLNET_DIRECT):
        nvls(out, func, algo, layout, me, nbytes, channels)
    elif algo == Algo.COLLNET_CHAIN:
        collnet_chain(out, layout, me, nbytes, channels)
    else:
        raise ValueError(f"no message pattern for NCCL algorithm {algo.name}")
    return out
