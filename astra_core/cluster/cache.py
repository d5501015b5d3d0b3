"""A cluster run's alone runs, kept between calls.

A job's run alone on its NPUs depends only on what its key hashes
(``_Cluster.alone_key`` in :mod:`astra_core.cluster.run`, by :mod:`astra_core.run_digest`):
the bytes of its trace files and of the spec's topology, network and system files
(with the files the system names); its comm groups, dims, NPUs, iterations, start
time, the compute-speed factors of its NPUs per iteration and the communicator ids
its groups got; the spec's dims, backend, backend settings and faults; and the
source of astra and of the backend's packages (any change to the code runs it
again). A second ``astra cluster`` of the same job there (another placement of the
*other* jobs, another straggler seed elsewhere) reads its alone result instead of
simulating it.

Entries are JSON files named by that 256-bit BLAKE2b digest under
``$ASTRA_CLUSTER_CACHE``, else ``$XDG_CACHE_HOME/astra/cluster``, else
``~/.cache/astra/cluster``; written to a temporary file and renamed, so that a
reader never sees half of one. An entry that cannot be read is ignored (and
written again).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

from astra_core.native import cache_root

__all__ = ["AloneRun", "alone_cache_dir", "load_alone", "store_alone"]

#: (each iteration's time [ns], the last iteration's end [ns], bytes per directed link
#: or None): what a cluster run keeps of a job's run alone.
AloneRun = tuple[tuple[float, ...], float, tuple[float, ...] | None]


def alone_cache_dir() -> Path:
    """Where alone runs are kept (module doc)."""
    return cache_root("cluster", "ASTRA_CLUSTER_CACHE")


def load_alone(key: str) -> AloneRun | None:
    """The alone run kept under ``key``, or None when there is none or it is not one a
    run could have stored (cut short, edited, NaN or negative times): then the job is
    simulated alone again."""
    try:
        data = json.loads((alone_cache_dir() / f"{key}.json").read_text())
        links = data["link_bytes"]
        run = (
            tuple(float(t) for t in data["iteration_ns"]),
            float(data["end_ns"]),
            None if links is None else tuple(float(b) for b in links),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    numbers = [*run[0], run[1], *(run[2] or ())]
    if not run[0] or not all(math.isfinite(x) and x >= 0 for x in numbers):
        return None
    return run


def store_alone(key: str, run: AloneRun) -> None:
    """Keep ``run`` under ``key`` (module doc); a cache that cannot be written is skipped."""
    iteration_ns, end_ns, links = run
    text = json.dumps(
        {
            "iteration_ns": list(iteration_ns),
            "end_ns": end_ns,
            "link_bytes": None if links is None else list(links),
        }
    )
    folder = alone_cache_dir()
    written: Path | None = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".tmp", delete=False) as f:
            written = Path(f.name)
            f.write(text)
        os.replace(written, folder / f"{key}.json")
    except OSError:
        if written is not None:
            written.unlink(missing_ok=True)
