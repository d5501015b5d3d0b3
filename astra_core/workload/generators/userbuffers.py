"""Transformer Engine's userbuffers: how each GEMM of a Transformer layer overlaps its
tensor-parallel communication under ``--tp-comm-overlap``.

Transformer Engine names ten overlaps per layer (``initialize_ub`` in
``transformer_engine/pytorch/module/base.py``) and runs each by one of three methods:

* ``ring_exchange``: the GEMM in T row blocks, each computed while the next block
  travels to the neighbour by the copy engines (``use_ce``); an all-gather before the
  GEMM (``qkv_fprop``, ``fc1_fprop``, and backward ``proj_dgrad``, ``fc2_dgrad``) or a
  reduce-scatter after it (``proj_fprop``, ``fc2_fprop``);
* ``pipeline`` (reduce-scatters after ``proj_fprop`` and ``fc2_fprop`` only): the GEMM in
  ``num_splits`` row blocks, each block's reduce-scatter run by a userbuffers kernel of
  ``num_sm`` thread blocks while the next block computes;
* ``bulk`` (``qkv_dgrad``, ``fc1_dgrad``: the all-gather of the layer's input that the
  weight gradient needs, beside the data-gradient GEMM; ``qkv_wgrad``, ``fc1_wgrad``: the
  reduce-scatter of the data gradient beside the weight-gradient GEMM): one kernel of
  ``num_sm`` thread blocks beside the whole GEMM.

With ``set_sm_margin`` the GEMM is launched on the SMs the communication kernel leaves
(``_math_sms`` in ``comm_gemm_overlap.cpp``) and takes ``SMs / (SMs - num_sm)`` times as
long for its whole run (:meth:`~astra_core.config.gpus.GPUSpec.margin_slowdown`), the
kernel beside it slowing nothing more; without, the two share the GPU and the GEMM is
slowed by the GPU's measured factor at ``num_sm`` SMs while the kernel runs
(:mod:`astra_core.system.contention`, the collective's ``comm_sms``).

Defaults (``get_default_config``): ``ring_exchange`` holds 1 SM and no margin, with T
splits; ``pipeline`` and ``bulk`` hold 16 SMs, ``pipeline`` in 4 splits; the margin is
set for ``pipeline`` and ``bulk`` since Transformer Engine 2.0 (commit 544dd14b,
2025-02-07) and for none before (1.x, e.g. NeMo's 24.09 to 24.12 containers).
Megatron-Bridge's recipes pass their own per-GEMM tables
(``src/megatron/bridge/training/comm_overlap.py``), in the same keys as a YAML file of
NeMo's (``launcher_scripts/conf/training/tp_overlap/*.yaml``), which :func:`load_ub_cfg`
reads.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from astra_core.errors import ConfigError

__all__ = ["GEMMS", "GemmOverlap", "METHODS", "load_ub_cfg", "te_defaults", "ub_cfg"]

#: The overlaps of one Transformer layer, Transformer Engine's names.
GEMMS = (
    "qkv_fprop",
    "proj_fprop",
    "fc1_fprop",
    "fc2_fprop",
    "proj_dgrad",
    "fc2_dgrad",
    "qkv_dgrad",
    "qkv_wgrad",
    "fc1_dgrad",
    "fc1_wgrad",
)
#: The methods Transformer Engine allows for each overlap, its default first (an
#: all-gather cannot be a ``pipeline``; the backward input gathers and gradient scatters
#: are ``bulk``).
METHODS = {
    "qkv_fprop": ("ring_exchange",),
    "fc1_fprop": ("ring_exchange",),
    "proj_dgrad": ("ring_exchange",),
    "fc2_dgrad": ("ring_exchange",),
    "proj_fprop": ("pipeline", "ring_exchange"),
    "fc2_fprop": ("pipeline", "ring_exchange"),
    "qkv_dgrad": ("bulk",),
    "qkv_wgrad": ("bulk",),
    "fc1_dgrad": ("bulk",),
    "fc1_wgrad": ("bulk",),
}
#: Keys of a Transformer Engine ``ub_cfgs`` entry that do not change astra's timing
#: (thread-block clusters, stream priorities, FP8 buffers, the copy engines, atomic GEMMs).
_IGNORED = frozenset(
    ("cga_size", "aggregate", "atomic_gemm", "use_ce", "fp8_buf", "comm_priority", "gemm_priority",
     "pipeline_rs_overlap_first_gemm", "is_reduce_scatter")
)  # fmt: skip


@dataclass(frozen=True)
class GemmOverlap:
    """One overlap's settings: ``method`` (ring_exchange, pipeline or bulk), ``sms`` the
    SMs its communication kernel holds (``num_sm``), ``sm_margin`` whether the GEMM
    leaves them free (``set_sm_margin``), ``splits`` the GEMM's row blocks under
    ``pipeline`` (``num_splits``; ring_exchange always takes T)."""

    method: str
    sms: int = 16
    sm_margin: bool = False
    splits: int = 4


def te_defaults(margin: bool = True) -> dict[str, GemmOverlap]:
    """Transformer Engine's settings for every overlap a config leaves out: ``margin``
    for ``pipeline`` and ``bulk`` (True since 2.0, False in 1.x)."""
    out = {}
    for name, methods in METHODS.items():
        method = methods[0]
        ring = method == "ring_exchange"
        out[name] = GemmOverlap(method, 1 if ring else 16, not ring and margin, 4)
    return out


def ub_cfg(
    entries: Mapping[str, Mapping[str, Any]], where: str, margin: bool = True
) -> dict[str, GemmOverlap]:
    """Every overlap's settings: Transformer Engine's defaults (:func:`te_defaults`) with
    ``entries`` (name -> ``ub_cfgs`` keys) over them, key by key, as ``initialize_ub``
    updates each name's default (a reduce-scatter made a ring keeps the pipeline's 16 SMs
    and margin unless the entry says otherwise). Raises ConfigError naming
    ``where`` and the key for an unknown overlap or key, a method the overlap cannot
    run, or a count below 1."""
    out = te_defaults(margin)
    for name, entry in entries.items():
        if name not in METHODS:
            raise ConfigError(f"{where}: unknown overlap {name!r} (expected one of {', '.join(GEMMS)})")
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where}: {name}: expected a mapping of Transformer Engine's ub_cfgs keys")
        unknown = sorted(set(entry) - {"method", "num_sm", "set_sm_margin", "num_splits"} - _IGNORED)
        if unknown:
            raise ConfigError(f"{where}: {name}: unknown key {unknown[0]!r}")
        base = out[name]  # Transformer Engine updates the name's default with the entry's keys
        method = entry.get("method", base.method)
        if method not in METHODS[name]:
            raise ConfigError(
                f"{where}: {name}.method: {method!r} is not modelled for {name} "
                f"(expected {' or '.join(METHODS[name])})"
            )
        sms = _count(entry.get("num_sm", base.sms), f"{where}: {name}.num_sm")
        splits = _count(entry.get("num_splits", base.splits), f"{where}: {name}.num_splits")
        margin_set = entry.get("set_sm_margin", base.sm_margin)
        if not isinstance(margin_set, (bool, int)):
            raise ConfigError(f"{where}: {name}.set_sm_margin: expected true or false, got {margin_set!r}")
        out[name] = GemmOverlap(method, sms, bool(margin_set), splits)
    return out


def _count(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: expected an integer >= 1, got {value!r}")
    return value


def load_ub_cfg(path: str | os.PathLike) -> dict[str, GemmOverlap]:
    """A YAML or JSON file of Transformer Engine's ``ub_cfgs`` (as NeMo's
    ``tp_overlap/*.yaml``), over Transformer Engine 2's defaults. Raises ConfigError
    naming the file."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not YAML or JSON: {str(e).splitlines()[0]}") from None
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: expected a mapping of overlap names ({', '.join(GEMMS)})")
    return ub_cfg(data, str(path))
