"""Turning a run into something people can read.

``results`` (RunResult, the Report of ``astra.simulate``), ``breakdown``
(compute / overlapped / exposed / idle per rank), ``collectives`` (per-collective
rows with per-phase times), ``links`` (per-link statistics), ``frames`` (pandas
views, CSV and Parquet), ``plots`` (PNGs), ``table`` (the terminal table),
``timeline`` (Chrome/Perfetto trace), ``progress`` (the live progress line).
"""
