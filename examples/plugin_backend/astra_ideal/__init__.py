"""An example third-party astra backend: the ``ideal`` network (see :mod:`astra_ideal.network`)."""

from astra_ideal.network import IdealConfig, IdealNetwork

__all__ = ["IdealConfig", "IdealNetwork"]
