// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// WindowedPhase: one rank's phase of one chunk run from its plan exactly as
// upstream's Ring family does (Ring.cc, AllToAll.cc, HalvingDoubling.cc); see
// astra_core.system.collectives.plan. ``window`` packets go through local memory at
// the start and one per received message; each packet, once through (and reduced
// where its flag says), frees a send slot; a freed slot sends the oldest unsent
// message and posts its receive; messages from index ``barrier`` on wait until that
// many messages have been received. The phase ends when every message is sent and
// every slot is free again: the stream's owner moves it to its next phase.

struct PlanMessage {
  int64_t dst, src, size;
};

struct PlanPacket {
  bool reduce;
  int64_t size;
};

// Item ``i`` of a plan's tuple of integer triples or pairs (the plans are tuples of
// tuples of ints; anything else raises TypeError).
static bool read_ints(PyObject* items, long long i, int count, long long* out) {
  PyObject* item = PyTuple_GET_ITEM(items, i);
  if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != count) {
    PyErr_Format(PyExc_TypeError, "a plan's entry %lld is not a tuple of %d", i, count);
    return false;
  }
  for (int k = 0; k < count; ++k) {
    out[k] = PyLong_AsLongLong(PyTuple_GET_ITEM(item, k));
    if (out[k] == -1 && PyErr_Occurred()) return false;
  }
  return true;
}


// Upstream's Transmition::Fast (communicator-group rings): a fixed 10 ns NPU<->memory hop.
static const int64_t FAST_TRANSMISSION_NS = 10;

struct WindowedPhase {
  PyObject_HEAD
  PyObject* comm_type;
  PyObject* stream;
  long long rank, data_size, final_data_size;
  PyObject* messages;  // tuple of (dst, src, bytes): shared, as the plans share them
  PyObject* packets;   // tuple of (reduce, bytes)
  // the last message and packet read, and their values: a ring's are one tuple repeated
  PyObject* last_message;  // borrowed from `messages`
  PyObject* last_packet;   // borrowed from `packets`
  long long message_values[3], packet_values[2];
  long long window, barrier;  // barrier -1: none
  int fast;
  long long sent, received_count, inserted, free;
  PyObject* events_object;   // owned, bound at start
  RankEvents* events;        // borrowed from events_object
  PyObject* matcher_object;  // owned, bound at start
  MessageMatcher* matcher;   // borrowed from matcher_object
  long long tag;
};

static PyTypeObject WindowedPhaseType = {PyVarObject_HEAD_INIT(nullptr, 0)};

static bool phase_insert(WindowedPhase* p) {
  if (p->inserted >= PyTuple_GET_SIZE(p->packets)) {
    PyErr_Format(PyExc_IndexError, "windowed phase of rank %lld: packet %lld of %zd", p->rank, p->inserted,
                 PyTuple_GET_SIZE(p->packets));
    return false;
  }
  if (PyTuple_GET_ITEM(p->packets, p->inserted) != p->last_packet) {
    if (!read_ints(p->packets, p->inserted, 2, p->packet_values)) return false;  // a bool is an int
    p->last_packet = PyTuple_GET_ITEM(p->packets, p->inserted);
  }
  ++p->inserted;
  const PlanPacket packet{p->packet_values[0] != 0, p->packet_values[1]};
  int64_t delay = p->fast ? FAST_TRANSMISSION_NS : p->events->endpoint_delay_ns;
  return register_call(p->events, static_cast<double>(delay), true,
                       kernel_call(packet.reduce ? CALL_REDUCE : CALL_GENERAL, reinterpret_cast<PyObject*>(p),
                                   packet.size));
}

static bool phase_reduce(WindowedPhase* p, int64_t size) {
  return register_call(p->events, static_cast<double>(reduction_delay_ns(p->events, size)), true,
                       kernel_call(CALL_GENERAL, reinterpret_cast<PyObject*>(p), 0));
}

static bool phase_received(WindowedPhase* p) {
  ++p->received_count;
  return phase_insert(p);
}

static bool phase_general(WindowedPhase* p) {
  ++p->free;
  if (p->barrier >= 0 && p->sent >= p->barrier && p->received_count < p->barrier) return true;  // banked
  const long long n = PyTuple_GET_SIZE(p->messages);
  while (p->free && p->sent < n && p->sent < p->inserted) {
    if (PyTuple_GET_ITEM(p->messages, p->sent) != p->last_message) {
      if (!read_ints(p->messages, p->sent, 3, p->message_values)) return false;
      p->last_message = PyTuple_GET_ITEM(p->messages, p->sent);
    }
    const PlanMessage msg{p->message_values[0], p->message_values[1], p->message_values[2]};
    if (!matcher_send(p->matcher, p->events->rank, msg.dst, msg.size, p->tag, Call{CALL_NONE, nullptr, nullptr, {0}},
                      true, NAN, false))
      return false;
    if (!matcher_recv(p->matcher, msg.src, p->events->rank, msg.size, p->tag,
                      kernel_call(CALL_RECEIVED, reinterpret_cast<PyObject*>(p), 0)))
      return false;
    ++p->sent;
    --p->free;
  }
  if (p->sent == n && p->free == p->window) return finish_phase(p->stream);
  return true;
}

// Binds the phase to its stream's rank (events and matcher) and tag; false with an error.
static bool bind_to_stream(PyObject* stream, PyObject** events_out, PyObject** matcher_out, long long* id) {
  if (stream == nullptr || stream == Py_None) {
    PyErr_SetString(PyExc_RuntimeError, "a phase started before its stream was bound");
    return false;
  }
  bool kernel_stream = Py_TYPE(stream) == stream_type;  // read without a Python call
  PyObject* owner = kernel_stream ? as_stream(stream)->owner.inc_ref().ptr() : PyObject_GetAttrString(stream, "owner");
  if (owner == nullptr) return false;
  PyObject* events = PyObject_GetAttrString(owner, "events");
  PyObject* matcher = events == nullptr ? nullptr : PyObject_GetAttrString(owner, "matcher");
  PyObject* tag = matcher == nullptr ? nullptr
                  : kernel_stream  ? PyLong_FromLongLong(as_stream(stream)->stream_id)
                                   : PyObject_GetAttrString(stream, "stream_id");
  Py_DECREF(owner);
  bool ok = tag != nullptr;
  if (ok && (!PyObject_TypeCheck(events, rank_events_type) || !PyObject_TypeCheck(matcher, matcher_type))) {
    PyErr_SetString(PyExc_TypeError, "a kernel phase runs on a rank whose events and matcher are the kernel's");
    ok = false;
  }
  if (ok) {
    *id = PyLong_AsLongLong(tag);
    ok = !(*id == -1 && PyErr_Occurred());
  }
  if (ok) {
    Py_XSETREF(*events_out, events);
    Py_XSETREF(*matcher_out, matcher);
    events = matcher = nullptr;
  }
  Py_XDECREF(events);
  Py_XDECREF(matcher);
  Py_XDECREF(tag);
  return ok;
}

// A kernel phase's rank, bound at the phase's start: its events and matcher.
struct PhaseRank {
  py::object events_object, matcher_object;
  RankEvents* events = nullptr;        // borrowed from events_object
  MessageMatcher* matcher = nullptr;   // borrowed from matcher_object

  // Binds the rank of ``stream`` and gives the stream's id; false with an error set.
  bool bind(PyObject* stream, long long* stream_id) {
    PyObject* e = nullptr;
    PyObject* m = nullptr;
    if (!bind_to_stream(stream, &e, &m, stream_id)) return false;
    events_object = py::reinterpret_steal<py::object>(e);
    matcher_object = py::reinterpret_steal<py::object>(m);
    events = bound_value<RankEvents>(e);
    matcher = bound_value<MessageMatcher>(m);
    return true;
  }

  int traverse(visitproc visit, void* arg) const {
    Py_VISIT(events_object.ptr());
    Py_VISIT(matcher_object.ptr());
    return 0;
  }

  void clear() {
    events = nullptr;
    matcher = nullptr;
    events_object = py::object();
    matcher_object = py::object();
  }
};

// What every bound kernel phase holds: its collective, its stream (set by the stream
// layer), its rank once started, and its Python object (borrowed), set at its start.
struct BoundPhase {
  CommTypeObject comm_type;
  StreamObject stream = py::none();  // None until the phase becomes current
  PhaseRank at;
  PyObject* self = nullptr;

  explicit BoundPhase(CommTypeObject comm) : comm_type(std::move(comm)) {}

  int traverse(visitproc visit, void* arg) const {
    Py_VISIT(comm_type.ptr());
    Py_VISIT(stream.ptr());
    return at.traverse(visit, arg);
  }

  void clear() {
    comm_type = py::none();
    stream = py::none();
    at.clear();
  }
};

// A bound phase's start method: it records the phase's Python object, then runs
// ``start`` (STREAM_INIT); and its comm_type and stream attributes.
template <class T>
static void def_phase(py::class_<T>& phase, bool (*start)(T*), const char* start_doc) {
  phase.def(
      "start",
      [start](py::handle self) {
        T* p = self.cast<T*>();
        p->self = self.ptr();
        if (!start(p)) throw py::error_already_set();
      },
      start_doc);
  phase.def_readonly("comm_type", &T::comm_type, "the collective (CommType)");
  phase.def_readwrite("stream", &T::stream, "the stream this phase belongs to");
}

static bool phase_start(WindowedPhase* p) {
  if (!bind_to_stream(p->stream, &p->events_object, &p->matcher_object, &p->tag)) return false;
  p->events = bound_value<RankEvents>(p->events_object);
  p->matcher = bound_value<MessageMatcher>(p->matcher_object);
  for (long long i = 0; i < p->window; ++i)
    if (!phase_insert(p)) return false;
  return true;
}

static PyObject* WindowedPhase_new(PyTypeObject* type, PyObject*, PyObject*) {
  WindowedPhase* p = reinterpret_cast<WindowedPhase*>(type->tp_alloc(type, 0));
  if (p == nullptr) return nullptr;
  p->messages = PyTuple_New(0);
  p->packets = PyTuple_New(0);
  p->barrier = -1;
  Py_INCREF(Py_None);
  p->stream = Py_None;
  Py_INCREF(Py_None);
  p->comm_type = Py_None;
  return reinterpret_cast<PyObject*>(p);
}

// WindowedPhase(comm_type, rank, data_size, messages, window, packets, final_data_size, barrier=None, fast=False)
static int WindowedPhase_init(WindowedPhase* p, PyObject* args, PyObject* kwds) {
  static const char* names[] = {"comm_type", "rank",           "data_size", "messages", "window",
                                "packets",   "final_data_size", "barrier",   "fast",     nullptr};
  PyObject *comm_type, *messages, *packets, *barrier = Py_None;
  long long rank, data_size, window, final_size;
  int fast = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OLLOLOL|Op", const_cast<char**>(names), &comm_type, &rank, &data_size,
                                   &messages, &window, &packets, &final_size, &barrier, &fast))
    return -1;
  p->last_message = p->last_packet = nullptr;
  PyObject* message_tuple = PySequence_Tuple(messages);  // a tuple is kept, not copied
  if (message_tuple == nullptr) return -1;
  Py_XSETREF(p->messages, message_tuple);
  PyObject* packet_tuple = PySequence_Tuple(packets);
  if (packet_tuple == nullptr) return -1;
  Py_XSETREF(p->packets, packet_tuple);
  if (barrier != Py_None) {
    p->barrier = PyLong_AsLongLong(barrier);
    if (p->barrier == -1 && PyErr_Occurred()) return -1;
  }
  Py_INCREF(comm_type);
  Py_XSETREF(p->comm_type, comm_type);
  p->rank = rank;
  p->data_size = data_size;
  p->window = window;
  p->final_data_size = final_size;
  p->fast = fast;
  return 0;
}

static int WindowedPhase_traverse(WindowedPhase* p, visitproc visit, void* arg) {
  Py_VISIT(p->comm_type);
  Py_VISIT(p->stream);
  Py_VISIT(p->messages);
  Py_VISIT(p->packets);
  Py_VISIT(p->events_object);
  Py_VISIT(p->matcher_object);
  return 0;
}

static int WindowedPhase_clear(WindowedPhase* p) {
  Py_CLEAR(p->comm_type);
  Py_CLEAR(p->stream);
  Py_CLEAR(p->messages);
  Py_CLEAR(p->packets);
  Py_CLEAR(p->events_object);
  p->events = nullptr;
  Py_CLEAR(p->matcher_object);
  p->matcher = nullptr;
  return 0;
}

static void WindowedPhase_dealloc(WindowedPhase* p) {
  PyObject_GC_UnTrack(p);
  WindowedPhase_clear(p);
  Py_TYPE(p)->tp_free(reinterpret_cast<PyObject*>(p));  // a Python subclass's type: its dealloc lets go
}

static PyObject* WindowedPhase_start(WindowedPhase* p, PyObject*) {
  if (!phase_start(p)) return nullptr;
  Py_RETURN_NONE;
}

static PyObject* WindowedPhase_received(WindowedPhase* p, PyObject* const*, Py_ssize_t) {
  if (!phase_received(p)) return nullptr;
  Py_RETURN_NONE;
}

static PyObject* WindowedPhase_general(WindowedPhase* p, PyObject* const*, Py_ssize_t) {
  if (!phase_general(p)) return nullptr;
  Py_RETURN_NONE;
}

static PyMethodDef WindowedPhase_methods[] = {
    {"start", reinterpret_cast<PyCFunction>(WindowedPhase_start), METH_NOARGS,
     "start(self) -> None\n\n"
     "STREAM_INIT: the phase got its queue slot; its first window of packets go through local memory."},
    {"received", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(WindowedPhase_received)),
     METH_FASTCALL,
     "received(self, arg: object = None, /) -> None\n\n"
     "PACKET_RECEIVED: a message this phase posted a receive for arrived (any argument ignored)."},
    {"general", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(WindowedPhase_general)),
     METH_FASTCALL,
     "general(self, arg: object = None, /) -> None\n\n"
     "GENERAL: a packet is through local memory (any argument ignored)."},
    {nullptr, nullptr, 0, nullptr}};

static PyMemberDef WindowedPhase_members[] = {
    {"comm_type", T_OBJECT, offsetof(WindowedPhase, comm_type), READONLY, "the collective (CommType)"},
    {"stream", T_OBJECT, offsetof(WindowedPhase, stream), 0, "the stream this phase belongs to"},
    {"rank", T_LONGLONG, offsetof(WindowedPhase, rank), READONLY, "the rank"},
    {"data_size", T_LONGLONG, offsetof(WindowedPhase, data_size), READONLY, "bytes entering the phase"},
    {"final_data_size", T_LONGLONG, offsetof(WindowedPhase, final_data_size), READONLY, "bytes leaving it"},
    {"window", T_LONGLONG, offsetof(WindowedPhase, window), READONLY, "packets in flight at once"},
    {"sent", T_LONGLONG, offsetof(WindowedPhase, sent), READONLY, "messages sent so far"},
    {"received_count", T_LONGLONG, offsetof(WindowedPhase, received_count), READONLY, "messages received so far"},
    {"inserted", T_LONGLONG, offsetof(WindowedPhase, inserted), READONLY, "packets into local memory so far"},
    {"free", T_LONGLONG, offsetof(WindowedPhase, free), READONLY, "free send slots"},
    {nullptr, 0, 0, 0, nullptr}};

static void init_windowed_phase_type() {
  PyTypeObject& t = WindowedPhaseType;
  t.tp_name = "_astra_kernel.WindowedPhase";
  t.tp_basicsize = sizeof(WindowedPhase);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE;
  t.tp_doc =
      "WindowedPhase(comm_type: astra_core.system.comm_types.CommType, rank: int, data_size: int, messages: object, window: int, packets: object, "
      "final_data_size: int, barrier: int | None = None, fast: bool = False) -> None\n\n"
      "One rank's phase of one chunk, run from its plan (astra_core.system.collectives.plan).";
  t.tp_new = WindowedPhase_new;
  t.tp_init = reinterpret_cast<initproc>(WindowedPhase_init);
  t.tp_dealloc = reinterpret_cast<destructor>(WindowedPhase_dealloc);
  t.tp_traverse = reinterpret_cast<traverseproc>(WindowedPhase_traverse);
  t.tp_clear = reinterpret_cast<inquiry>(WindowedPhase_clear);
  t.tp_methods = WindowedPhase_methods;
  t.tp_members = WindowedPhase_members;
}
