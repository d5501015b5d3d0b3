"""astra's ``garnetlike`` network backend: a credit-based flow-control packet/flit model.

Routers with input-buffered virtual channels, credits, head/body/tail flits,
a router pipeline, VC and round-robin switch allocation, on any
:class:`~astra_core.topology.physical.PhysicalTopology`, in pure Python on
astra's event queue (:class:`astra_core.events.EventQueue`, in ps). See :mod:`astra_garnetlike.network` (the model),
:mod:`astra_garnetlike.config` (its keys) and :mod:`astra_garnetlike.noc`
(synthetic-traffic experiments, ``astra noc``).

Names are imported on first use, so ``astra`` starts without loading the model.
"""

__all__ = ["GarnetConfig", "GarnetNetwork", "load_config", "run_noc"]


def __getattr__(name):
    if name in ("GarnetConfig", "load_config"):
        from astra_garnetlike import config

        return getattr(config, name)
    if name == "GarnetNetwork":
        from astra_garnetlike.network import GarnetNetwork

        return GarnetNetwork
    if name == "run_noc":
        from astra_garnetlike.noc import run_noc

        return run_noc
    raise AttributeError(f"module 'astra_garnetlike' has no attribute {name!r}")
