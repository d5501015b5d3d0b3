"""Workload layer: Chakra execution traces (read, write) and their dependency graphs.

Knows nothing of the system layer or the network. See :mod:`.chakra` (reader,
:class:`ETNode`), :mod:`.writer` and :mod:`.graph`.
"""
