"""``astra.simulate_serving``: a serving spec in, a :class:`~astra_core.serve.results.ServingResult` out."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from astra_core.serve.engine import serve_requests
from astra_core.serve.requests import Request
from astra_core.serve.results import ServingResult
from astra_core.serve.spec import ServeSpec, load_serve_spec

__all__ = ["run_spec", "simulate_serving"]


def simulate_serving(
    spec: str | os.PathLike | Mapping[str, Any] | ServeSpec,
    *,
    requests: Sequence[Request] | None = None,
) -> ServingResult:
    """Serve a spec's requests (:mod:`astra_core.serve.spec`: a YAML path, a dict of the
    same keys, whose paths are then taken as given, or a loaded spec) on its deployment.
    ``requests``: these instead of the spec's (sorted by arrival, ids 0.. in that order;
    the spec's ``requests`` key may then be anything valid). Raises ConfigError (one
    line per problem) for a bad spec, a deployment that does not fit or a request no
    replica can hold."""
    from astra_core.config.model import validate_mapping

    if isinstance(spec, ServeSpec):
        loaded = spec
    elif isinstance(spec, Mapping):
        loaded = validate_mapping(ServeSpec, dict(spec), "serving spec")
    else:
        loaded = load_serve_spec(spec)
    return run_spec(loaded, requests)


def run_spec(loaded: ServeSpec, requests: Sequence[Request] | None = None) -> ServingResult:
    """Serve a loaded spec (``requests``: these instead of its own)."""
    deployment, decode = loaded.deployments()
    return serve_requests(
        deployment,
        list(requests) if requests is not None else loaded.request_list(),
        decode=decode,
        network=loaded.network,
        topology=loaded.topology,
        system=loaded.system,
        backend=loaded.backend,
        backend_config=loaded.backend_config,
        router=loaded.router,
        concurrency=loaded.requests.concurrency,
    )
