"""What identifies a design point when a sweep resumes: the content of its inputs.

A point's key is the digest of its run (:mod:`astra_core.run_digest`): the bytes of
every file it reads (each rank's ``<prefix>.<rank>.et``, system.json and the files it
names, network.yml, memory and comm-group JSON, topology, backend config, background
flows and faults), its other run values (backend, dims, symmetry, iterations, inline
configs), its overridden values, and the sources of astra and of its backend's
packages; never a file's path. Editing network.yml or an NCCL profile re-runs the
points that read it; moving a sweep with its results to another directory re-runs
nothing.
"""

from __future__ import annotations

from typing import Any

from astra_core.run_digest import InputDigests

#: Hex digits of the digest a point's key keeps (64 bits: no two points of a sweep meet).
KEY_DIGITS = 16


def point_key(digests: InputDigests, run: dict[str, Any], packages: frozenset[str]) -> str:
    """The key of a resolved point (:func:`~astra_core.sweep.spec.resolve_point`) whose
    backend's plugin is ``packages`` (empty where the backend is not known)."""
    return digests.run(run, packages)[:KEY_DIGITS]
