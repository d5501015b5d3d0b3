"""Converters from other workload descriptions to Chakra execution traces.

* :mod:`~astra_core.workload.converters.text`: ASTRA-sim 1.0 text workloads
  (DATA, MODEL, HYBRID_*, MICRO, ...), parsed by
  :mod:`~astra_core.workload.converters.text_format`.
* :mod:`~astra_core.workload.converters.pytorch`: PyTorch execution traces
  (``torch.profiler.ExecutionTraceObserver``), optionally joined with a Kineto
  trace for measured durations.

Every converter writes one ``<prefix>.<rank>.et`` per NPU and, where the
parallelism needs sub-groups of NPUs, a comm-group JSON beside it.
"""
