"""What a run costs the garnetlike backend, message by message, before simulating it.

A message of ``B`` bytes is cut into packets of at most ``packet_bytes``, each
of ``ceil(payload / flit_bytes)`` flits (one flit for an empty message), and
every flit crosses every link of the message's route: ``F x H`` flit-hops,
what :class:`~astra_garnetlike.network.GarnetNetwork` adds to its
``max_flit_hops`` budget at send and what its links count as flits cross them
(``flit_hops()``; tests/backends/garnetlike/test_work.py). The route is the
backend's own (:class:`~astra_garnetlike.routing.Routing`: dimension order,
table or up*/down*, which need not be a shortest path).
"""

from __future__ import annotations

from typing import Any

from astra.plugin import NetworkConfig, PhysicalTopology, Topology
from astra_garnetlike.config import FLIT_HOPS_PER_S, GarnetConfig, load_config
from astra_garnetlike.routing import Routing

# On this project's 2-core machine under load (4.5-4.7): a 64 MiB ring all-reduce on 8
# NPUs of a switch (448 messages, 7.34 M flit-hops) ran 20.0 s, i.e. 0.37 M flit-hops/s
# (FLIT_HOPS_PER_S is 0.4 M; benchmarks/garnet_noc.py: 0.53 M idle, 0.26 M CPU under
# load on an 8x8 mesh); the 16-GPU Llama-shaped step of benchmarks/ns3_message_cost.py
# at sequence length 64 (143,872 messages, 4.97 M flit-hops) ran 17.65 s: 13.5 s of
# flit-hops and 29 us per message.
RATE_SOURCE = "astra run on a 64 MiB all-reduce and a 16-GPU LLM step, this 2-core machine under load"
#: Wall seconds a message costs the run besides its flits (the system layer, the NIs).
MESSAGE_S = 30e-6


class GarnetWork:
    """:class:`~astra_core.backend.WorkModel` of the garnetlike backend on ``physical``
    (``network``: network.yml's dimensions when ``physical`` was built from them)."""

    unit = "flit-hops"
    rate = FLIT_HOPS_PER_S
    rate_source = RATE_SOURCE
    limit_key = "max_flit_hops"
    message_s = MESSAGE_S
    fast_forward = False

    def __init__(
        self, physical: PhysicalTopology, config: GarnetConfig, network: NetworkConfig | None = None
    ):
        self.packet_bytes = config.packet_bytes
        self.flit_bytes = config.flit_bytes
        self.packet_flits = -(-config.packet_bytes // config.flit_bytes)
        self.limit = config.max_flit_hops or None
        self.routing = Routing(
            physical, config.routing, config.deadlock_avoidance == "dateline", network, config.up_down_root
        )

    def peak_memory_bytes(self, messages: int) -> int | None:
        """None: the model's memory follows the flits (flows) in flight, not the messages."""
        return None

    def per_link(self, size_bytes: int) -> tuple[int, int]:
        """(flits, flits) of a message of ``size_bytes``: every flit crosses every link."""
        full, rest = divmod(size_bytes, self.packet_bytes)
        flits = max(1, full * self.packet_flits + (-(-rest // self.flit_bytes) if rest else 0))
        return flits, flits

    def hops(self, src: int, dst: int) -> int:
        """Links of the backend's route from NPU ``src`` to NPU ``dst`` (0 to itself)."""
        return 0 if src == dst else len(self.routing.links(src, dst, 0))


def work_model(topology: Topology, config: Any = None) -> GarnetWork:
    """The garnetlike work model for ``topology`` (as :func:`astra_garnetlike.network.create`
    builds its network) and ``config`` (None, a GarnetConfig, a mapping or a TOML/YAML
    path). Raises ConfigError naming the file and key of a bad config."""
    from astra.plugin import from_network

    cfg = load_config(config)
    if topology.physical is not None:
        return GarnetWork(topology.physical, cfg)
    return GarnetWork(from_network(topology.network), cfg, topology.network)
