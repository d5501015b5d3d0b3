"""LLM inference serving on the simulator: requests (:mod:`.requests`), a deployment and its
memory (:mod:`.deployment`), vLLM's scheduler per engine (:mod:`.scheduler`) with its prefix
cache (:mod:`.prefix_cache`), each step's forward pass timed by the kernel model
(:mod:`.step_time`) with its collectives simulated by the system layer (:mod:`.collectives`),
the run (:mod:`.engine`) and its results (:mod:`.results`, :mod:`.plots`); the spec of
``astra serve`` (:mod:`.spec`), ``astra.simulate_serving`` (:mod:`.api`) and the search
for the highest rate within SLOs (:mod:`.rate_search`)."""

from astra_core.serve.api import simulate_serving
from astra_core.serve.deployment import Deployment
from astra_core.serve.engine import serve_requests
from astra_core.serve.requests import Request, generate_requests, read_requests
from astra_core.serve.results import ServingResult

__all__ = [
    "Deployment",
    "Request",
    "ServingResult",
    "generate_requests",
    "read_requests",
    "serve_requests",
    "simulate_serving",
]
