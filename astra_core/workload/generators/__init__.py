"""Workload generators: synthetic Chakra traces from a description.

* :mod:`~astra_core.workload.generators.micro`: single-collective microbenchmarks;
* :mod:`~astra_core.workload.generators.llm`: Megatron-style LLM training
  (data, tensor, pipeline, expert parallelism; ZeRO; sequence parallelism) with
  roofline compute times from :mod:`~astra_core.workload.generators.gpus` and
  model shapes from :mod:`~astra_core.workload.generators.models`.
"""
