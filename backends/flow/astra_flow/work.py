"""What a run costs the flow backend, message by message, before simulating it.

The flow model's work is one flow (a message draining on its queue pair,
re-solved with the flows it shares links with) per message between two
different NPUs, whatever its size and route length: a message to itself is
delivered at once. The projection divides the messages by
:data:`MESSAGES_PER_S`, measured on the 128-GPU Llama-3-8B step of
``benchmarks/ns3_llm.py`` (2.55 M messages), whose flows are typical of LLM
training traffic. Runs that keep many more flows sharing links at once cost
more per flow (every start
and end re-solves the flows it can affect): ``benchmarks/flow_scale.py``'s
1024-host all-to-all ran 150 k messages per second in one chunk and 80 k in
four, its 4096-GPU ring all-reduce 165 k (docs/backends.md, "Scale").
"""

from __future__ import annotations

from typing import Any

from astra.plugin import Topology

#: Messages (flows) per wall second: the 128-GPU Llama-3-8B step of benchmarks/ns3_llm.py (2,552,448
#: messages) ran 9.1-10.4 s (median of 3: 9.97 s) in ``astra run`` on this 2-core machine
#: with the flow model in the simulation kernel; the command is in docs/backends.md,
#: "Before a run: the estimate".
MESSAGES_PER_S = 2.56e5
RATE_SOURCE = "astra run on the 128-GPU Llama-3-8B step of benchmarks/ns3_llm.py, this 2-core machine (kernel flow model)"


class FlowWork:
    """:class:`~astra_core.backend.WorkModel` of the flow backend: one unit per message
    between different NPUs."""

    unit = "flows"
    rate = MESSAGES_PER_S
    rate_source = RATE_SOURCE
    limit = None
    limit_key = ""
    message_s = 0.0
    fast_forward = False

    def peak_memory_bytes(self, messages: int) -> int | None:
        """None: the model's memory follows the flits (flows) in flight, not the messages."""
        return None

    def per_link(self, size_bytes: int) -> tuple[int, int]:
        """(1, 1): a message is one flow whatever its size."""
        return 1, 1

    def hops(self, src: int, dst: int) -> int:
        """1 between different NPUs (one flow, whatever its route), 0 to itself."""
        return 0 if src == dst else 1


def work_model(topology: Topology, config: Any = None) -> FlowWork:
    """The flow backend's work model; ``config`` is checked as the backend checks it
    (ConfigError naming the file and key)."""
    from astra_flow.config import load_config

    load_config(config)
    return FlowWork()
