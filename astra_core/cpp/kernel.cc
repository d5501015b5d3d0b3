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
#include <queue>
#include <set>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace astra_kernel {

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
#include "dispatch.h"

// ---------------------------------------------------------------------------------
// Module

static PyMethodDef kernel_functions[] = {
    {"flow_hash", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(kernel_flow_hash)), METH_FASTCALL,
     "flow_hash(src, dst, tag): deterministic 32-bit hash of a flow (not Python's salted hash)."},
    {"pipeline_ns", reinterpret_cast<PyCFunction>(kernel_pipeline_ns), METH_VARARGS,
     "pipeline_ns(ns_per_byte, size_bytes, payload_bytes, header_bytes): a lone message's store-and-forward "
     "transmission over links of these speeds (astra_core.topology.pipeline)."},
    {"native_send", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(kernel_native_send)),
     METH_FASTCALL | METH_KEYWORDS,
     "native_send(capsule, src, dst, size_bytes, on_delivered, arg=None, tag=0): a message through a compiled "
     "model's send (the capsule astra.native_send); on_delivered(arg) when it is in."},
    {"step_call", reinterpret_cast<PyCFunction>(kernel_step_call), METH_VARARGS,
     "step_call(fn_address, ctx_address, arg=0): a compiled model's step fn(ctx, arg) as a Python callable."},
    {"round_ps", reinterpret_cast<PyCFunction>(kernel_round_ps), METH_O,
     "round_ps(t_ns): t rounded to whole ps as Python's round(t, 3) does (the flow model's event grid)."},
    {nullptr, nullptr, 0, nullptr}};

static PyModuleDef kernel_module = {PyModuleDef_HEAD_INIT, "_astra_kernel",
                                    "astra's simulation kernel (astra_core/cpp/kernel.cc)", -1, kernel_functions};

}  // namespace astra_kernel

extern "C" PyObject* PyInit__astra_kernel() {
  using namespace astra_kernel;
  init_event_queue_type();
  init_kernel_call_type();
  init_rank_events_type();
  init_stream_type();
  init_analytical_links_type();
  init_shortest_paths_type();
  init_message_matcher_type();
  init_windowed_phase_type();
  init_nccl_phase_type();
  init_tree_phase_type();
  init_op_program_type();
  init_program_phase_type();
  struct {
    const char* name;
    PyTypeObject* type;
  } types[] = {{"EventQueue", &EventQueueType},         {"KernelCall", &KernelCallType},
               {"RankEvents", &RankEventsType},
               {"Stream", &StreamType},         {"AnalyticalLinks", &AnalyticalLinksType},
               {"ShortestPaths", &ShortestPathsType},
               {"MessageMatcher", &MessageMatcherType}, {"WindowedPhase", &WindowedPhaseType},
               {"NcclPhase", &NcclPhaseType}, {"TreePhase", &TreePhaseType},
               {"OpProgram", &OpProgramType}, {"ProgramPhase", &ProgramPhaseType}};
  for (auto& t : types)
    if (PyType_Ready(t.type) < 0) return nullptr;
  if (array_type == nullptr) {
    PyObject* array_module = PyImport_ImportModule("array");
    if (array_module == nullptr) return nullptr;
    array_type = PyObject_GetAttrString(array_module, "array");
    Py_DECREF(array_module);
    if (array_type == nullptr) return nullptr;
  }
  PyObject* module = PyModule_Create(&kernel_module);
  if (module == nullptr) return nullptr;
  for (auto& t : types) {
    Py_INCREF(t.type);
    if (PyModule_AddObject(module, t.name, reinterpret_cast<PyObject*>(t.type)) < 0) {
      Py_DECREF(t.type);
      Py_DECREF(module);
      return nullptr;
    }
  }
  PyModule_AddIntConstant(module, "PROGRESS_EVERY", PROGRESS_EVERY);
  PyModule_AddObject(module, "C_API", PyCapsule_New(&kernel_api, "_astra_kernel.C_API", nullptr));
  PyModule_AddObject(module, "NCCL_TAG_BASE", PyLong_FromLongLong(NCCL_TAG_BASE));
  PyModule_AddObject(module, "NCCL_LANES_PER_TAG", PyLong_FromLongLong(NCCL_LANES_PER_TAG));
  PyModule_AddObject(module, "FAST_TRANSMISSION_NS", PyLong_FromLongLong(FAST_TRANSMISSION_NS));
  return module;
}
