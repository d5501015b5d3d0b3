// A compiled network model as a third party would ship one (docs/plugins.md, "A
// compiled network model"), for tests/backends/test_native_backend.py: each NPU's
// NIC sends one message at a time, first come first served, at `bytes_per_ns`; a
// message arrives `latency_ns` after its last byte left. Built by
// astra_core.native.load_extension against astra_core/cpp/astra_kernel_api.h.

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <vector>

#include "astra_kernel_api.h"

namespace fifo_nic {

struct Model {
  PyObject_HEAD
  PyObject* events;  // the kernel's EventQueue
  const AstraKernelApi* api;
  double latency_ns, bytes_per_ns;
  std::vector<double>* nic_free_at;  // per NPU: when its NIC is free (ns)
  std::vector<AstraToken>* tokens;   // messages in flight, by slot
  std::vector<long long>* free_slots;
  long long messages;
};

static int arrive(void* ctx, long long slot) {  // a step of the model: a message is in
  Model* m = static_cast<Model*>(ctx);
  AstraToken token = (*m->tokens)[slot];
  (*m->tokens)[slot] = AstraToken{};  // empty: discarding it does nothing
  m->free_slots->push_back(slot);
  return m->api->deliver(token);
}

static int send(void* model, long long src, long long, long long size, long long, AstraToken token) {
  Model* m = static_cast<Model*>(model);
  if (src < 0 || src >= static_cast<long long>(m->nic_free_at->size())) {
    m->api->discard(token);
    PyErr_Format(PyExc_IndexError, "fifo_nic: no NPU %lld", src);
    return -1;
  }
  ++m->messages;
  double now = m->api->now(m->events);
  double start = (*m->nic_free_at)[src] > now ? (*m->nic_free_at)[src] : now;
  double done = start + static_cast<double>(size) / m->bytes_per_ns;
  (*m->nic_free_at)[src] = done;
  long long slot;
  if (m->free_slots->empty()) {
    slot = static_cast<long long>(m->tokens->size());
    m->tokens->push_back(token);
  } else {
    slot = m->free_slots->back();
    m->free_slots->pop_back();
    (*m->tokens)[slot] = token;
  }
  return m->api->schedule(m->events, done + m->latency_ns - now, 0, arrive, m, slot);
}

static int Model_init(Model* m, PyObject* args, PyObject*) {
  PyObject *events, *api;
  Py_ssize_t npus;
  if (!PyArg_ParseTuple(args, "OOddn", &events, &api, &m->latency_ns, &m->bytes_per_ns, &npus)) return -1;
  m->api = static_cast<const AstraKernelApi*>(PyCapsule_GetPointer(api, "_astra_kernel.C_API"));
  if (m->api == nullptr) return -1;
  Py_INCREF(events);
  Py_XSETREF(m->events, events);
  m->nic_free_at = new std::vector<double>(npus, 0.0);
  m->tokens = new std::vector<AstraToken>();
  m->free_slots = new std::vector<long long>();
  return 0;
}

static void Model_dealloc(Model* m) {
  if (m->tokens != nullptr)
    for (size_t i = 0; i < m->tokens->size(); ++i) m->api->discard((*m->tokens)[i]);  // (a stopped run)
  Py_XDECREF(m->events);
  delete m->nic_free_at;
  delete m->tokens;
  delete m->free_slots;
  Py_TYPE(m)->tp_free(reinterpret_cast<PyObject*>(m));
}

static PyObject* Model_native_send(Model* m, void*) {
  AstraNativeSend* native = new AstraNativeSend{send, m};
  return PyCapsule_New(native, "astra.native_send", [](PyObject* c) {
    delete static_cast<AstraNativeSend*>(PyCapsule_GetPointer(c, "astra.native_send"));
  });
}

static PyObject* Model_messages(Model* m, void*) { return PyLong_FromLongLong(m->messages); }

static PyGetSetDef Model_getset[] = {
    {"native_send", reinterpret_cast<getter>(Model_native_send), nullptr, "the model's send", nullptr},
    {"messages", reinterpret_cast<getter>(Model_messages), nullptr, "messages sent", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

static PyTypeObject ModelType = {PyVarObject_HEAD_INIT(nullptr, 0)};

static PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_fifo_nic", nullptr, -1, nullptr};

}  // namespace fifo_nic

extern "C" PyObject* PyInit__fifo_nic() {
  using namespace fifo_nic;
  ModelType.tp_name = "_fifo_nic.Model";
  ModelType.tp_basicsize = sizeof(Model);
  ModelType.tp_flags = Py_TPFLAGS_DEFAULT;
  ModelType.tp_new = PyType_GenericNew;
  ModelType.tp_init = reinterpret_cast<initproc>(Model_init);
  ModelType.tp_dealloc = reinterpret_cast<destructor>(Model_dealloc);
  ModelType.tp_getset = Model_getset;
  if (PyType_Ready(&ModelType) < 0) return nullptr;
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) return nullptr;
  Py_INCREF(&ModelType);
  PyModule_AddObject(module, "Model", reinterpret_cast<PyObject*>(&ModelType));
  return module;
}
