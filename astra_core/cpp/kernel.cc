// astra's simulation kernel: the per-event and per-message path in C++.
//
// A CPython extension module (``_astra_kernel``), built on the user's machine by
// astra_core.native.load_extension: compiled and cached, or JIT-compiled by cppyy,
// which then calls PyInit__astra_kernel itself. It is one translation unit (the
// per-message calls inline across its parts): this file includes the parts in
// kernel/, each a section of the kernel, in the order they build on each other.


// No fused multiply-add: the compiled kernel (-ffp-contract=off) and cppyy's JIT
// (clang) must round every product and sum alike (the flow model's rates and times).
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <structmember.h>
// The kernel runs with the GIL held: without this (in a build without NDEBUG) every
// py::object reference count would first ask PyGILState_Check, out of line.
#define PYBIND11_NO_ASSERT_GIL_HELD_INCREF_DECREF
#include <pybind11/pybind11.h>
#include <pybind11/typing.h>
#if __has_include(<sys/mman.h>)
#include <sys/mman.h>
#endif

#include "astra_kernel_api.h"
#include "astra_flat_map.h"
#include "astra_heap.h"
#include "astra_maxmin.h"
#include "astra_pipeline.h"
#include "astra_routes.h"
#include "astra_routing.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <queue>
#include <set>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "python_types.h"

// Hidden, as pybind11's own namespace is: only PyInit__astra_kernel is exported.
namespace __attribute__((visibility("hidden"))) astra_kernel {

namespace py = pybind11;
using astra::BigVector;
using astra::FlatMap;
using astra::SmallVector;
using astra::mix64;
using astra::PipelineTerm;
using astra::packets_of;
using astra::pipeline_ns;
using astra::pipeline_terms;
using astra::RouteKey;
using astra::RouteKeyHash;
using astra::RoutingGraph;
using astra::flow_hash;
namespace maxmin = astra::maxmin;

#include "bound.h"
#include "event_queue.h"
#include "clock.h"
#include "rank_events.h"
#include "streams.h"
#include "routing.h"
#include "analytical.h"
#include "pipeline.h"
#include "native_api.h"
#include "matcher.h"
#include "windowed_phase.h"
#include "nccl_phase.h"
#include "tree_phase.h"
#include "program_phase.h"
#include "nccl_replay.h"
#include "dispatch.h"

// ---------------------------------------------------------------------------------
// Module

static PyMethodDef kernel_functions[] = {
    {"flow_hash", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(kernel_flow_hash)), METH_FASTCALL,
     "flow_hash(src: int, dst: int, tag: int, /) -> int\n\n"
     "Deterministic 32-bit hash of a flow (not Python's salted hash)."},
    {"pipeline_ns", reinterpret_cast<PyCFunction>(kernel_pipeline_ns), METH_VARARGS,
     "pipeline_ns(ns_per_byte: object, size_bytes: int, payload_bytes: int, header_bytes: int, /) -> float\n\n"
     "A lone message's store-and-forward "
     "transmission over links of these speeds (astra_core.topology.pipeline)."},
    {"native_send", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(kernel_native_send)),
     METH_FASTCALL | METH_KEYWORDS,
     "native_send(capsule: object, src: int, dst: int, size_bytes: int, on_delivered: object, arg: object = None, "
     "tag: int = 0) -> None\n\nA message through a compiled "
     "model's send (the capsule astra.native_send); on_delivered(arg) when it is in."},
    {"step_call", reinterpret_cast<PyCFunction>(kernel_step_call), METH_VARARGS,
     "step_call(fn_address: int, ctx_address: int, arg: int = 0, /) -> KernelCall\n\n"
     "A compiled model's step fn(ctx, arg) as a Python callable."},
    {"round_ps", reinterpret_cast<PyCFunction>(kernel_round_ps), METH_O,
     "round_ps(t_ns: float, /) -> float\n\n"
     "t_ns rounded to whole ps as Python's round(t, 3) does (the flow model's event grid)."},
    {nullptr, nullptr, 0, nullptr}};


}  // namespace astra_kernel

PYBIND11_MODULE(_astra_kernel, module) {
  using namespace astra_kernel;
  module.doc() = "astra's simulation kernel (astra_core/cpp/kernel.cc)";
  init_kernel_call_type();
  init_windowed_phase_type();
  struct {
    const char* name;
    PyTypeObject* type;
  } types[] = {{"KernelCall", &KernelCallType}, {"WindowedPhase", &WindowedPhaseType}};
  for (auto& t : types) {
    if (PyType_Ready(t.type) < 0) throw py::error_already_set();
    module.add_object(t.name, py::handle(reinterpret_cast<PyObject*>(t.type)));
  }
  if (array_type == nullptr) array_type = py::object(py::module_::import("array").attr("array")).release().ptr();
  if (PyModule_AddFunctions(module.ptr(), kernel_functions) < 0) throw py::error_already_set();
  bind_event_queue(module);
  bind_streams(module);
  bind_rank_events(module);
  bind_routing(module);
  bind_programs(module);
  bind_message_matcher(module);
  bind_tree_phase(module);
  bind_nccl_phase(module);
  bind_nccl_replay(module);
  bind_analytical_links(module);
  module.attr("PROGRESS_EVERY") = PROGRESS_EVERY;
  module.attr("C_API") = py::capsule(&kernel_api, "_astra_kernel.C_API");
  module.attr("NCCL_TAG_BASE") = NCCL_TAG_BASE;
  module.attr("NCCL_LANES_PER_TAG") = NCCL_LANES_PER_TAG;
  module.attr("FAST_TRANSMISSION_NS") = FAST_TRANSMISSION_NS;
}
