"""astra's ``garnetlike`` network backend: a credit-based flow-control packet/flit model.

Routers with input-buffered virtual channels, credits, head/body/tail flits,
a router pipeline, VC and round-robin switch allocation, on any
:class:`~astra_core.topology.physical.PhysicalTopology`, in pure Python on
SimPy's event queue. See :mod:`astra_garnetlike.network`.
"""

from astra_garnetlike.config import GarnetConfig, load_config
from astra_garnetlike.network import GarnetNetwork

__all__ = ["GarnetConfig", "GarnetNetwork", "load_config"]
