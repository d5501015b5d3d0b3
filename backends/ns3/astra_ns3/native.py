"""The C++ model as Python sees it, inside the worker process only.

:func:`load` prefers the compiled, cached library (:mod:`astra_ns3.build`)
through ctypes (0.1 s to load); when no compiler works it compiles the same
sources just in time with cppyy (a few seconds, once per worker process).
Either way :class:`Library` offers the same methods. Importing this module
loads nothing; never import it in the caller's process.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from astra_ns3 import build

#: Values per row of astra_ns3_port_stats / astra_ns3_flow_stats (api.cc).
PORT_FIELDS = (
    "present",
    "node",
    "tx_bytes",
    "tx_packets",
    "drops",
    "ecn_marks",
    "pauses_sent",
    "resumes_sent",
    "pauses_received",
    "max_queue_bytes",
    "paused_ps",
    "headroom_bytes",
)
FLOW_FIELDS = (
    "start_ps",
    "finish_ps",
    "packets_sent",
    "retransmits",
    "timeouts",
    "cnps_sent",
    "cnps_received",
    "base_rtt_ps",
    "final_rate_bps",
)

_U32P = ctypes.POINTER(ctypes.c_uint32)
_I64P = ctypes.POINTER(ctypes.c_int64)
_F64P = ctypes.POINTER(ctypes.c_double)

_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "astra_ns3_abi": (ctypes.c_int, []),
    "astra_ns3_set": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_double]),
    "astra_ns3_create": (ctypes.c_int, []),
    "astra_ns3_error": (ctypes.c_char_p, []),
    "astra_ns3_add_node": (ctypes.c_int, [ctypes.c_int]),
    "astra_ns3_add_cable": (
        ctypes.c_int,
        [ctypes.c_uint32] * 4 + [ctypes.c_double] * 2 + [ctypes.c_int64] + [ctypes.c_double] * 6,
    ),
    "astra_ns3_add_qp": (
        ctypes.c_int,
        [ctypes.c_uint32] * 3 + [_U32P, ctypes.c_int, _U32P, ctypes.c_int],
    ),
    "astra_ns3_start_flows": (ctypes.c_int, [_I64P, ctypes.c_int]),
    "astra_ns3_run": (ctypes.c_int, [ctypes.c_int64]),
    "astra_ns3_now": (ctypes.c_int64, []),
    "astra_ns3_progress": (None, [_I64P]),
    "astra_ns3_take_completions": (ctypes.c_int, [_U32P, ctypes.c_int]),
    "astra_ns3_pending_completions": (ctypes.c_int, []),
    "astra_ns3_sizes": (None, [_I64P]),
    "astra_ns3_fast_forward": (None, [_I64P]),
    "astra_ns3_port_stats": (None, [_I64P]),
    "astra_ns3_node_stats": (None, [_I64P]),
    "astra_ns3_flow_stats": (None, [_I64P]),
    "astra_ns3_queue_samples": (None, [_I64P, _I64P, _I64P]),
    "astra_ns3_flow_samples": (None, [_I64P, _I64P, _I64P, _F64P]),
    "astra_ns3_destroy": (None, []),
    "astra_ns3_abort": (None, []),
}


class NativeError(RuntimeError):
    """The C++ model refused a call (its message is the model's error text)."""


class Library:
    """The ``astra_ns3_*`` C functions, bound through ctypes or cppyy."""

    def __init__(self, functions: dict[str, Any], kind: str, path: str, load_s: float):
        self._f = functions
        self.kind = kind  # "compiled" or "jit"
        self.path = path
        self.load_s = load_s

    def _ptr(self, array: np.ndarray, ctype):
        return array.ctypes.data_as(ctypes.POINTER(ctype)) if self.kind == "compiled" else array

    def _check(self, status: int, what: str) -> None:
        if status < 0:
            raise NativeError(f"{what}: {self.error()}")

    def error(self) -> str:
        text = self._f["astra_ns3_error"]()
        return text.decode() if isinstance(text, bytes) else str(text)

    def create(self, settings: dict[str, float]) -> None:
        for key, value in settings.items():
            name = key.encode() if self.kind == "compiled" else key
            if self._f["astra_ns3_set"](name, float(value)) != 0:
                raise NativeError(f"unknown model setting {key!r}")
        self._check(self._f["astra_ns3_create"](), "create")

    def add_node(self, is_switch: bool) -> int:
        return self._f["astra_ns3_add_node"](1 if is_switch else 0)

    def add_cable(self, *args) -> None:
        self._check(self._f["astra_ns3_add_cable"](*args), "cable")

    def add_qp(self, qp: int, src: int, dst: int, fwd: Sequence[int], rev: Sequence[int]) -> None:
        """Queue pair ``qp`` (ids dense from 0) from node ``src`` to ``dst``: its messages
        cross the links ``fwd``, their ACKs ``rev``; raises NativeError."""
        f, r = (np.asarray(links, dtype=np.uint32) for links in (fwd, rev))
        status = self._f["astra_ns3_add_qp"](
            qp, src, dst, self._ptr(f, ctypes.c_uint32), len(f), self._ptr(r, ctypes.c_uint32), len(r)
        )
        self._check(status, f"queue pair {qp}")

    def start_flows(self, rows: bytes) -> None:
        """Start messages now: ``rows`` holds native int64 triples (message id, dense from
        0; queue pair; bytes). Raises NativeError naming the first it refuses."""
        flows = np.frombuffer(rows, dtype=np.int64)
        if len(flows):
            self._check(
                self._f["astra_ns3_start_flows"](self._ptr(flows, ctypes.c_int64), len(flows) // 3), "start"
            )

    def run(self, until_ps: int) -> int:
        return self._f["astra_ns3_run"](until_ps)

    def now_ps(self) -> int:
        return int(self._f["astra_ns3_now"]())

    def progress(self) -> tuple[int, int, int, int]:
        """(simulated time ps, ns-3 events executed, messages started, messages
        completed) of the fabric; safe to call from another thread while :meth:`run`
        runs (the worker's heartbeat does)."""
        out = np.zeros(4, dtype=np.int64)
        self._f["astra_ns3_progress"](self._ptr(out, ctypes.c_int64))
        now_ps, events, started, completed = (int(x) for x in out)
        return now_ps, events, started, completed

    def take_completions(self) -> list[int]:
        n = self._f["astra_ns3_pending_completions"]()
        if n == 0:
            return []
        out = np.zeros(n, dtype=np.uint32)
        got = self._f["astra_ns3_take_completions"](self._ptr(out, ctypes.c_uint32), n)
        return out[:got].tolist()

    def results(self) -> dict[str, np.ndarray]:
        """Counters and monitor samples of the fabric, as numpy arrays."""
        sizes = np.zeros(6, dtype=np.int64)
        self._f["astra_ns3_sizes"](self._ptr(sizes, ctypes.c_int64))
        n_ports, n_flows, n_queue, n_flow_samples, misrouted, n_nodes = (int(x) for x in sizes)
        ports = np.zeros((n_ports, len(PORT_FIELDS)), dtype=np.int64)
        flows = np.zeros((n_flows, len(FLOW_FIELDS)), dtype=np.int64)
        nodes = np.zeros(n_nodes, dtype=np.int64)
        q = [np.zeros(n_queue, dtype=np.int64) for _ in range(3)]
        s = [np.zeros(n_flow_samples, dtype=np.int64) for _ in range(3)]
        rate = np.zeros(n_flow_samples, dtype=np.float64)
        fast_forward = np.zeros(5, dtype=np.int64)
        self._f["astra_ns3_fast_forward"](self._ptr(fast_forward, ctypes.c_int64))
        # (cppyy cannot pass an empty array as a pointer: skip what is empty.)
        if n_ports:
            self._f["astra_ns3_port_stats"](self._ptr(ports, ctypes.c_int64))
        if n_flows:
            self._f["astra_ns3_flow_stats"](self._ptr(flows, ctypes.c_int64))
        if n_nodes:
            self._f["astra_ns3_node_stats"](self._ptr(nodes, ctypes.c_int64))
        if n_queue:
            self._f["astra_ns3_queue_samples"](*(self._ptr(a, ctypes.c_int64) for a in q))
        if n_flow_samples:
            self._f["astra_ns3_flow_samples"](
                *(self._ptr(a, ctypes.c_int64) for a in s), self._ptr(rate, ctypes.c_double)
            )
        return {
            "ports": ports,
            "flows": flows,
            "node_max_buffer": nodes,
            "misrouted": np.array([misrouted]),
            "queue_t_ps": q[0],
            "queue_port": q[1],
            "queue_bytes": q[2],
            "flow_t_ps": s[0],
            "flow_id": s[1],
            "flow_delivered": s[2],
            "flow_rate_bps": rate,
            "fast_forward": fast_forward,  # astra_ns3_fast_forward (api.cc)
        }

    def destroy(self) -> None:
        self._f["astra_ns3_destroy"]()

    def abort(self) -> None:
        self._f["astra_ns3_abort"]()


def _load_compiled() -> Library:
    started = time.perf_counter()
    path = build.compiled_library()
    lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    functions = {}
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
        functions[name] = fn
    return Library(functions, "compiled", str(path), time.perf_counter() - started)


def _load_jit() -> Library:
    started = time.perf_counter()
    import cppyy

    include, lib_dir = build.ns3_dirs()
    cppyy.add_include_path(str(include))
    cppyy.add_include_path(str(build.CPP_DIR))
    for module in build.NS3_MODULES:
        cppyy.load_library(str(build.ns3_library(lib_dir, module)))
    cppyy.cppdef("".join(f"#define {d} 1\n" for d in build.DEFINES))
    for name in build.SOURCES:
        if not cppyy.cppdef((build.CPP_DIR / name).read_text(encoding="utf-8")):
            raise NativeError(f"cppyy could not compile {name}")
    functions = {name: getattr(cppyy.gbl, name) for name in _SIGNATURES}
    # Let the worker's heartbeat thread run while the event loop does (ctypes does so itself).
    functions["astra_ns3_run"].__release_gil__ = True
    return Library(functions, "jit", "cppyy", time.perf_counter() - started)


def load(mode: str = "auto") -> Library:
    """The model library: ``"compiled"``, ``"jit"``, or ``"auto"`` (compiled, else JIT)."""
    if mode == "jit":
        return _load_jit()
    if mode == "compiled":
        return _load_compiled()
    try:
        return _load_compiled()
    except (build.BuildError, OSError) as exc:
        try:
            return _load_jit()
        except Exception as jit_exc:  # noqa: BLE001 - report both reasons
            raise NativeError(
                f"cannot compile the model ({exc}) nor JIT it with cppyy ({jit_exc})"
            ) from jit_exc
