// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// NcclPhase: one rank's part of one NCCL collective, run from its schedule
// (astra_core.system.collectives.nccl: schedule and phase). Lanes send in order, each
// send once the receives it forwards have arrived and with no more than the lane's
// window in flight; the rank also expects its receives, and NCCL's predicted time
// must pass. The phase ends when every send was delivered, every receive arrived and
// the predicted time is over.

struct NcclPhase {
  PyObject_HEAD
  PyObject* comm_type;
  PyObject* stream;
  long long rank, data_size, final_data_size, floor_ns;
  PyObject* lanes;  // tuple of (sends, window); sends: tuple of (dst, bytes, needs tuple)
  PyObject* recvs;  // tuple of (src, bytes, lane)
  std::vector<long long>* next;        // per lane: its next send
  std::vector<long long>* delivered;   // per lane: sends delivered
  std::vector<long long>* blocked_on;  // per lane: the receive its next send waits for (-1: none)
  std::vector<char>* arrived;          // per receive
  std::unordered_map<long long, std::vector<long long>>* waiters;  // receive -> lanes waiting for it
  long long open;  // sends to issue and deliver, receives to arrive, and the floor; -1: done
  long long tag;
  RankEvents* events;       // owned, bound at start
  MessageMatcher* matcher;  // owned, bound at start
};

static PyTypeObject NcclPhaseType = {PyVarObject_HEAD_INIT(nullptr, 0)};

static const long long NCCL_TAG_BASE = 1LL << 48;
static const long long NCCL_LANES_PER_TAG = 4096;

static bool nccl_check(NcclPhase* p) {
  if (p->open != 0) return true;
  p->open = -1;
  return finish_phase(p->stream);
}

static bool nccl_issue(NcclPhase* p, long long i) {
  PyObject* lane = PyTuple_GET_ITEM(p->lanes, i);
  PyObject* sends = PyTuple_GET_ITEM(lane, 0);
  long long window = PyLong_AsLongLong(PyTuple_GET_ITEM(lane, 1));
  if (window == -1 && PyErr_Occurred()) return false;
  long long n = PyTuple_GET_SIZE(sends);
  long long k = (*p->next)[i];
  while (k < n && k - (*p->delivered)[i] < window) {
    PyObject* send = PyTuple_GET_ITEM(sends, k);
    long long dst = PyLong_AsLongLong(PyTuple_GET_ITEM(send, 0));
    long long size = PyLong_AsLongLong(PyTuple_GET_ITEM(send, 1));
    if (PyErr_Occurred()) return false;
    PyObject* needs = PyTuple_GET_ITEM(send, 2);
    long long missing = -1;
    for (Py_ssize_t x = 0; x < PyTuple_GET_SIZE(needs); ++x) {
      long long j = PyLong_AsLongLong(PyTuple_GET_ITEM(needs, x));
      if (j == -1 && PyErr_Occurred()) return false;
      if (!(*p->arrived)[j]) {
        missing = j;
        break;
      }
    }
    if (missing >= 0) {
      if ((*p->blocked_on)[i] != missing) {
        (*p->blocked_on)[i] = missing;
        (*p->waiters)[missing].push_back(i);
      }
      break;
    }
    ++k;
    (*p->next)[i] = k;
    --p->open;
    if (!matcher_send(p->matcher, p->rank, dst, size, p->tag + i,
                      kernel_call(CALL_NCCL_SENT, reinterpret_cast<PyObject*>(p), i), true, NAN, false))
      return false;
  }
  (*p->next)[i] = k;
  return true;
}

static bool nccl_sent(NcclPhase* p, long long i) {
  ++(*p->delivered)[i];
  --p->open;
  return nccl_issue(p, i) && nccl_check(p);
}

static bool nccl_received(NcclPhase* p, long long j) {
  (*p->arrived)[j] = 1;
  --p->open;
  auto found = p->waiters->find(j);
  if (found != p->waiters->end()) {
    std::vector<long long> lanes;
    lanes.swap(found->second);
    p->waiters->erase(found);
    for (long long i : lanes) {
      (*p->blocked_on)[i] = -1;
      if (!nccl_issue(p, i)) return false;
    }
  }
  return nccl_check(p);
}

static bool nccl_floor(NcclPhase* p) {
  --p->open;
  return nccl_check(p);
}

static bool nccl_start(NcclPhase* p) {
  long long stream_id;
  if (!bind_to_stream(p->stream, &p->events, &p->matcher, &stream_id)) return false;
  p->tag = NCCL_TAG_BASE + stream_id * NCCL_LANES_PER_TAG;
  for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(p->recvs); ++j) {
    PyObject* recv = PyTuple_GET_ITEM(p->recvs, j);
    long long src = PyLong_AsLongLong(PyTuple_GET_ITEM(recv, 0));
    long long size = PyLong_AsLongLong(PyTuple_GET_ITEM(recv, 1));
    long long lane = PyLong_AsLongLong(PyTuple_GET_ITEM(recv, 2));
    if (PyErr_Occurred()) return false;
    if (!matcher_recv(p->matcher, src, p->rank, size, p->tag + lane,
                      kernel_call(CALL_NCCL_RECEIVED, reinterpret_cast<PyObject*>(p), j)))
      return false;
  }
  if (!register_call(p->events, static_cast<double>(p->floor_ns), true,
                     kernel_call(CALL_NCCL_FLOOR, reinterpret_cast<PyObject*>(p), 0)))
    return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(p->lanes); ++i)
    if (!nccl_issue(p, i)) return false;
  return true;
}

static PyObject* NcclPhase_new(PyTypeObject* type, PyObject*, PyObject*) {
  NcclPhase* p = reinterpret_cast<NcclPhase*>(type->tp_alloc(type, 0));
  if (p == nullptr) return nullptr;
  p->next = new std::vector<long long>();
  p->delivered = new std::vector<long long>();
  p->blocked_on = new std::vector<long long>();
  p->arrived = new std::vector<char>();
  p->waiters = new std::unordered_map<long long, std::vector<long long>>();
  p->lanes = PyTuple_New(0);
  p->recvs = PyTuple_New(0);
  Py_INCREF(Py_None);
  p->stream = Py_None;
  Py_INCREF(Py_None);
  p->comm_type = Py_None;
  return reinterpret_cast<PyObject*>(p);
}

// NcclPhase(comm_type, rank, data_size, final_data_size, lanes, recvs, floor_ns)
static int NcclPhase_init(NcclPhase* p, PyObject* args, PyObject* kwds) {
  static const char* names[] = {"comm_type", "rank", "data_size", "final_data_size", "lanes", "recvs", "floor_ns",
                                nullptr};
  PyObject *comm_type, *lanes, *recvs;
  long long rank, data_size, final_size, floor_ns;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OLLLO!O!L", const_cast<char**>(names), &comm_type, &rank, &data_size,
                                   &final_size, &PyTuple_Type, &lanes, &PyTuple_Type, &recvs, &floor_ns))
    return -1;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(lanes); ++i) {
    PyObject* lane = PyTuple_GET_ITEM(lanes, i);
    if (!PyTuple_Check(lane) || PyTuple_GET_SIZE(lane) != 2 || !PyTuple_Check(PyTuple_GET_ITEM(lane, 0))) {
      PyErr_SetString(PyExc_TypeError, "lanes: a tuple of (sends tuple, window)");
      return -1;
    }
  }
  Py_INCREF(comm_type);
  Py_XSETREF(p->comm_type, comm_type);
  Py_INCREF(lanes);
  Py_XSETREF(p->lanes, lanes);
  Py_INCREF(recvs);
  Py_XSETREF(p->recvs, recvs);
  p->rank = rank;
  p->data_size = data_size;
  p->final_data_size = final_size;
  p->floor_ns = floor_ns;
  size_t n = PyTuple_GET_SIZE(lanes);
  p->next->assign(n, 0);
  p->delivered->assign(n, 0);
  p->blocked_on->assign(n, -1);
  p->arrived->assign(PyTuple_GET_SIZE(recvs), 0);
  long long open = PyTuple_GET_SIZE(recvs) + 1;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(lanes); ++i)
    open += 2 * PyTuple_GET_SIZE(PyTuple_GET_ITEM(PyTuple_GET_ITEM(lanes, i), 0));
  p->open = open;
  return 0;
}

static int NcclPhase_traverse(NcclPhase* p, visitproc visit, void* arg) {
  Py_VISIT(p->comm_type);
  Py_VISIT(p->stream);
  Py_VISIT(p->lanes);
  Py_VISIT(p->recvs);
  Py_VISIT(p->events);
  Py_VISIT(p->matcher);
  return 0;
}

static int NcclPhase_clear(NcclPhase* p) {
  Py_CLEAR(p->comm_type);
  Py_CLEAR(p->stream);
  Py_CLEAR(p->lanes);
  Py_CLEAR(p->recvs);
  Py_CLEAR(p->events);
  Py_CLEAR(p->matcher);
  return 0;
}

static void NcclPhase_dealloc(NcclPhase* p) {
  PyObject_GC_UnTrack(p);
  NcclPhase_clear(p);
  delete p->next;
  delete p->delivered;
  delete p->blocked_on;
  delete p->arrived;
  delete p->waiters;
  Py_TYPE(p)->tp_free(reinterpret_cast<PyObject*>(p));  // a Python subclass's type: its dealloc lets go
}

static PyObject* NcclPhase_start(NcclPhase* p, PyObject*) {
  if (!nccl_start(p)) return nullptr;
  Py_RETURN_NONE;
}

static PyObject* NcclPhase_get_next(NcclPhase* p, void*) {
  PyObject* out = PyList_New(static_cast<Py_ssize_t>(p->next->size()));
  for (size_t i = 0; out != nullptr && i < p->next->size(); ++i)
    PyList_SET_ITEM(out, i, PyLong_FromLongLong((*p->next)[i]));
  return out;
}

static PyObject* NcclPhase_get_arrived(NcclPhase* p, void*) {
  PyObject* out = PyList_New(static_cast<Py_ssize_t>(p->arrived->size()));
  for (size_t j = 0; out != nullptr && j < p->arrived->size(); ++j)
    PyList_SET_ITEM(out, j, PyBool_FromLong((*p->arrived)[j]));
  return out;
}

static PyMethodDef NcclPhase_methods[] = {
    {"start", reinterpret_cast<PyCFunction>(NcclPhase_start), METH_NOARGS,
     "STREAM_INIT: post the receives, start NCCL's predicted time and issue every lane."},
    {nullptr, nullptr, 0, nullptr}};

static PyMemberDef NcclPhase_members[] = {
    {"comm_type", T_OBJECT, offsetof(NcclPhase, comm_type), READONLY, "the collective (CommType)"},
    {"stream", T_OBJECT, offsetof(NcclPhase, stream), 0, "the stream this phase belongs to"},
    {"rank", T_LONGLONG, offsetof(NcclPhase, rank), READONLY, "the rank"},
    {"data_size", T_LONGLONG, offsetof(NcclPhase, data_size), READONLY, "bytes entering the phase"},
    {"final_data_size", T_LONGLONG, offsetof(NcclPhase, final_data_size), READONLY, "bytes leaving it"},
    {"floor_ns", T_LONGLONG, offsetof(NcclPhase, floor_ns), READONLY, "NCCL's predicted time (ns)"},
    {nullptr, 0, 0, 0, nullptr}};

static PyGetSetDef NcclPhase_getset[] = {
    {"next_sends", reinterpret_cast<getter>(NcclPhase_get_next), nullptr, "per lane: the index of its next send",
     nullptr},
    {"arrived", reinterpret_cast<getter>(NcclPhase_get_arrived), nullptr, "per receive: whether it arrived",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

static void init_nccl_phase_type() {
  PyTypeObject& t = NcclPhaseType;
  t.tp_name = "_astra_kernel.NcclPhase";
  t.tp_basicsize = sizeof(NcclPhase);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE;
  t.tp_doc =
      "NcclPhase(comm_type, rank, data_size, final_data_size, lanes, recvs, floor_ns): one rank's part of one "
      "NCCL collective (astra_core.system.collectives.nccl.phase).";
  t.tp_new = NcclPhase_new;
  t.tp_init = reinterpret_cast<initproc>(NcclPhase_init);
  t.tp_dealloc = reinterpret_cast<destructor>(NcclPhase_dealloc);
  t.tp_traverse = reinterpret_cast<traverseproc>(NcclPhase_traverse);
  t.tp_clear = reinterpret_cast<inquiry>(NcclPhase_clear);
  t.tp_methods = NcclPhase_methods;
  t.tp_members = NcclPhase_members;
  t.tp_getset = NcclPhase_getset;
}
