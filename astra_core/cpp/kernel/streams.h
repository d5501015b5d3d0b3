// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// Streams and their scheduling (upstream StreamBaseline, Sys::insert_stream, schedule,
// proceed_to_next_vnet_baseline); see astra_core.system.rank and .stream. A Stream is
// one chunk of a collective moving through its phases on one rank. Streams wait in a
// ready list, then in one queue per dimension, at most `threshold` running per queue;
// a stream is inserted before the first one that is neither running nor of at least
// its priority.

struct Stream {
  PyObject_HEAD
  PyObject* owner;    // the RankSystem (Python), which phases reach as stream.owner
  PyObject* dataset;  // the collective's DataSet (Python)
  long long stream_id, priority;
  PyObject* phases_to_go;  // list of Phase (dim, algorithm), popped from the front
  PyObject* phase;         // the current Phase, or None
  PyObject* algorithm;     // its algorithm, or None
  long long current_queue_id;
  int initialized;
  PyObject* phase_start_ns;  // the time its current phase got its slot
};

static PyTypeObject StreamType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// The per-rank queues, kept by RankEvents.
struct StreamQueues {
  std::vector<PyObject*> ready;                // owned Streams
  std::vector<std::vector<PyObject*>> active;  // per dimension, owned Streams
  std::vector<long long> running;
  long long threshold = 1;
};

static inline Stream* as_stream(PyObject* o) { return reinterpret_cast<Stream*>(o); }

static void insert_stream(std::vector<PyObject*>& queue, PyObject* stream) {
  size_t i = 0;
  long long priority = as_stream(stream)->priority;
  while (i < queue.size() && (as_stream(queue[i])->initialized || as_stream(queue[i])->priority >= priority)) ++i;
  Py_INCREF(stream);
  queue.insert(queue.begin() + i, stream);
}

static bool stream_init(const Clock& clock, Stream* s) {
  s->initialized = 1;
  double now;
  bool integral;
  if (!clock.now(&now, &integral)) return false;
  PyObject* t = time_object(now, integral);
  if (t == nullptr) return false;
  Py_XSETREF(s->phase_start_ns, t);
  PyObject* algorithm = s->algorithm;
  Py_INCREF(algorithm);
  PyObject* r = PyObject_CallMethod(algorithm, "start", nullptr);
  Py_DECREF(algorithm);
  if (r == nullptr) return false;
  Py_DECREF(r);
  return true;
}

static bool proceed_to_next_phase(RankEvents* self, PyObject* stream_object);

static bool schedule_ready(RankEvents* self) {
  while (!self->queues->ready.empty()) {
    PyObject* stream = self->queues->ready.front();
    self->queues->ready.erase(self->queues->ready.begin());
    bool ok = proceed_to_next_phase(self, stream);
    Py_DECREF(stream);
    if (!ok) return false;
  }
  return true;
}

static bool stream_added(RankEvents* self, long long queue_id) {
  StreamQueues& q = *self->queues;
  size_t i = static_cast<size_t>(q.running[queue_id]);
  while (i < q.active[queue_id].size() && q.running[queue_id] < q.threshold) {
    PyObject* stream = q.active[queue_id][i];
    Py_INCREF(stream);
    bool ok = stream_init(self->clock, as_stream(stream));
    Py_DECREF(stream);
    if (!ok) return false;
    ++q.running[queue_id];
    ++i;
  }
  return true;
}

static bool stream_removed(RankEvents* self, long long queue_id) {
  --self->queues->running[queue_id];
  return schedule_ready(self) && stream_added(self, queue_id);
}

// One phase's span in its collective's log (DataSet.phase_times, a bytearray; astra_core.
// system.records.PhaseTimes reads it): a record of PHASE_RECORD_BYTES, int32 dimension, int32
// collective (Chakra's number), float64 start and end ns, in native byte order.
static const size_t PHASE_RECORD_BYTES = 24;

static bool log_phase(Stream* s, double end_ns) {
  PyObject* dim = PyObject_GetAttrString(s->phase, "dim");
  PyObject* comm_type = dim == nullptr ? nullptr : PyObject_GetAttrString(s->algorithm, "comm_type");
  PyObject* value = comm_type == nullptr ? nullptr : PyObject_GetAttrString(comm_type, "value");
  PyObject* times = value == nullptr ? nullptr : PyObject_GetAttrString(s->dataset, "phase_times");
  bool ok = false;
  if (times != nullptr && !PyByteArray_Check(times)) {
    PyErr_SetString(PyExc_TypeError, "a DataSet's phase_times must be a bytearray");
  } else if (times != nullptr) {
    int32_t head[2] = {static_cast<int32_t>(PyLong_AsLong(dim)), static_cast<int32_t>(PyLong_AsLong(value))};
    double span[2] = {PyFloat_AsDouble(s->phase_start_ns), end_ns};
    Py_ssize_t size = PyByteArray_GET_SIZE(times);
    if (!PyErr_Occurred() && PyByteArray_Resize(times, size + PHASE_RECORD_BYTES) == 0) {
      char* at = PyByteArray_AS_STRING(times) + size;
      memcpy(at, head, sizeof head);
      memcpy(at + sizeof head, span, sizeof span);
      ok = true;
    }
  }
  Py_XDECREF(times);
  Py_XDECREF(value);
  Py_XDECREF(comm_type);
  Py_XDECREF(dim);
  return ok;
}

static bool proceed_to_next_phase(RankEvents* self, PyObject* stream_object) {
  Stream* s = as_stream(stream_object);
  StreamQueues& q = *self->queues;
  long long previous = s->current_queue_id;
  double t;
  bool integral;
  if (!self->clock.now(&t, &integral)) return false;
  PyObject* now = time_object(t, integral);
  if (now == nullptr) return false;
  bool ok = true;
  if (s->phase != Py_None) ok = log_phase(s, t);  // the phase's span, for the collective's record
  Py_ssize_t left = ok ? PyList_GET_SIZE(s->phases_to_go) : 0;
  if (ok && left == 0) {
    PyObject* r = PyObject_CallMethod(s->dataset, "stream_finished", "O", now);
    ok = r != nullptr;
    Py_XDECREF(r);
  }
  Py_DECREF(now);
  if (!ok) return false;
  Py_INCREF(stream_object);  // the queues' references go below
  if (previous >= 0) {
    std::vector<PyObject*>& queue = q.active[previous];
    for (size_t i = 0; i < queue.size(); ++i) {
      if (queue[i] == stream_object) {
        queue.erase(queue.begin() + i);
        Py_DECREF(stream_object);
        break;
      }
    }
  }
  if (left == 0) {
    // retired: unlink its last phase (whose algorithm points back at the stream)
    Py_INCREF(Py_None);
    Py_SETREF(s->phase, Py_None);
    Py_INCREF(Py_None);
    Py_SETREF(s->algorithm, Py_None);
    ok = previous < 0 || stream_removed(self, previous);
    Py_DECREF(stream_object);
    return ok;
  }
  PyObject* phase = PyList_GET_ITEM(s->phases_to_go, 0);
  Py_INCREF(phase);
  ok = PySequence_DelItem(s->phases_to_go, 0) == 0;
  PyObject* algorithm = ok ? PyObject_GetAttrString(phase, "algorithm") : nullptr;
  PyObject* dim = algorithm == nullptr ? nullptr : PyObject_GetAttrString(phase, "dim");
  long long d = dim == nullptr ? -1 : PyLong_AsLongLong(dim);
  Py_XDECREF(dim);
  if (algorithm == nullptr || d < 0 || d >= static_cast<long long>(q.active.size())) {
    if (algorithm != nullptr && !PyErr_Occurred())
      PyErr_Format(PyExc_IndexError, "a phase on dimension %lld of %zu", d, q.active.size());
    Py_XDECREF(algorithm);
    Py_DECREF(phase);
    Py_DECREF(stream_object);
    return false;
  }
  Py_SETREF(s->phase, phase);
  Py_SETREF(s->algorithm, algorithm);
  s->current_queue_id = d;
  s->initialized = 0;
  insert_stream(q.active[d], stream_object);
  ok = (previous < 0 || stream_removed(self, previous)) && stream_added(self, d);
  Py_DECREF(stream_object);
  return ok;
}

static PyObject* Stream_new(PyTypeObject* type, PyObject*, PyObject*) {
  Stream* s = reinterpret_cast<Stream*>(type->tp_alloc(type, 0));
  if (s == nullptr) return nullptr;
  for (PyObject** slot : {&s->owner, &s->dataset, &s->phase, &s->algorithm, &s->phase_start_ns}) {
    Py_INCREF(Py_None);
    *slot = Py_None;
  }
  s->phases_to_go = PyList_New(0);
  s->current_queue_id = -1;
  return reinterpret_cast<PyObject*>(s);
}

// Stream(owner, dataset, stream_id, phases, priority)
static int Stream_init(Stream* s, PyObject* args, PyObject* kwds) {
  static const char* names[] = {"owner", "dataset", "stream_id", "phases", "priority", nullptr};
  PyObject *owner, *dataset, *phases;
  long long stream_id, priority;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOLO!L", const_cast<char**>(names), &owner, &dataset, &stream_id,
                                   &PyList_Type, &phases, &priority))
    return -1;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(phases); ++i) {  // each phase's algorithm knows its stream
    PyObject* algorithm = PyObject_GetAttrString(PyList_GET_ITEM(phases, i), "algorithm");
    int r = algorithm == nullptr ? -1 : PyObject_SetAttrString(algorithm, "stream", reinterpret_cast<PyObject*>(s));
    Py_XDECREF(algorithm);
    if (r < 0) return -1;
  }
  Py_INCREF(owner);
  Py_SETREF(s->owner, owner);
  Py_INCREF(dataset);
  Py_SETREF(s->dataset, dataset);
  Py_INCREF(phases);
  Py_SETREF(s->phases_to_go, phases);
  s->stream_id = stream_id;
  s->priority = priority;
  return 0;
}

static int Stream_traverse(Stream* s, visitproc visit, void* arg) {
  Py_VISIT(s->owner);
  Py_VISIT(s->dataset);
  Py_VISIT(s->phases_to_go);
  Py_VISIT(s->phase);
  Py_VISIT(s->algorithm);
  Py_VISIT(s->phase_start_ns);
  return 0;
}

static int Stream_clear(Stream* s) {
  Py_CLEAR(s->owner);
  Py_CLEAR(s->dataset);
  Py_CLEAR(s->phases_to_go);
  Py_CLEAR(s->phase);
  Py_CLEAR(s->algorithm);
  Py_CLEAR(s->phase_start_ns);
  return 0;
}

static void Stream_dealloc(Stream* s) {
  PyObject_GC_UnTrack(s);
  Stream_clear(s);
  Py_TYPE(s)->tp_free(reinterpret_cast<PyObject*>(s));
}

static PyObject* Stream_init_method(Stream* s, PyObject*) {
  PyObject* events = PyObject_GetAttrString(s->owner, "events");
  if (events == nullptr) return nullptr;
  if (!PyObject_TypeCheck(events, &RankEventsType)) {
    Py_DECREF(events);
    PyErr_SetString(PyExc_TypeError, "a kernel stream's owner has no kernel events");
    return nullptr;
  }
  bool ok = stream_init(reinterpret_cast<RankEvents*>(events)->clock, s);
  Py_DECREF(events);
  if (!ok) return nullptr;
  Py_RETURN_NONE;
}

static PyMethodDef Stream_methods[] = {
    {"init", reinterpret_cast<PyCFunction>(Stream_init_method), METH_NOARGS,
     "The stream got a slot on its queue: start the current phase."},
    {nullptr, nullptr, 0, nullptr}};

static PyMemberDef Stream_members[] = {
    {"owner", T_OBJECT, offsetof(Stream, owner), READONLY, "the rank's system layer (a PhasePort)"},
    {"dataset", T_OBJECT, offsetof(Stream, dataset), READONLY, "the collective's DataSet"},
    {"stream_id", T_LONGLONG, offsetof(Stream, stream_id), READONLY, "the chunk's message tag"},
    {"priority", T_LONGLONG, offsetof(Stream, priority), READONLY, "higher goes first among waiting streams"},
    {"phases_to_go", T_OBJECT, offsetof(Stream, phases_to_go), READONLY, "the phases after the current one"},
    {"phase", T_OBJECT, offsetof(Stream, phase), READONLY, "the current Phase, or None"},
    {"algorithm", T_OBJECT, offsetof(Stream, algorithm), READONLY, "the current phase's algorithm, or None"},
    {"current_queue_id", T_LONGLONG, offsetof(Stream, current_queue_id), READONLY, "its queue (-1: none yet)"},
    {"initialized", T_BOOL, offsetof(Stream, initialized), READONLY, "its current phase has started"},
    {"phase_start_ns", T_OBJECT, offsetof(Stream, phase_start_ns), READONLY, "when the current phase started"},
    {nullptr, 0, 0, 0, nullptr}};

static void init_stream_type() {
  PyTypeObject& t = StreamType;
  t.tp_name = "_astra_kernel.Stream";
  t.tp_basicsize = sizeof(Stream);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  t.tp_doc =
      "Stream(owner, dataset, stream_id, phases, priority): one chunk of a collective moving through its phases "
      "on one rank (astra_core.system.stream).";
  t.tp_new = Stream_new;
  t.tp_init = reinterpret_cast<initproc>(Stream_init);
  t.tp_dealloc = reinterpret_cast<destructor>(Stream_dealloc);
  t.tp_traverse = reinterpret_cast<traverseproc>(Stream_traverse);
  t.tp_clear = reinterpret_cast<inquiry>(Stream_clear);
  t.tp_methods = Stream_methods;
  t.tp_members = Stream_members;
}

// The hand-over from a kernel phase to the next: the kernel's queues when the stream
// is the kernel's, else the owner's Python method.
static bool phase_done(PyObject* stream) {
  if (Py_TYPE(stream) == &StreamType) {
    PyObject* events = PyObject_GetAttrString(as_stream(stream)->owner, "events");
    if (events == nullptr) return false;
    bool ok;
    if (PyObject_TypeCheck(events, &RankEventsType) && reinterpret_cast<RankEvents*>(events)->queues != nullptr) {
      ok = proceed_to_next_phase(reinterpret_cast<RankEvents*>(events), stream);
    } else {
      PyErr_SetString(PyExc_TypeError, "a kernel stream's owner has no kernel queues");
      ok = false;
    }
    Py_DECREF(events);
    return ok;
  }
  PyObject* owner = PyObject_GetAttrString(stream, "owner");
  if (owner == nullptr) return false;
  PyObject* r = PyObject_CallMethod(owner, "proceed_to_next_phase", "O", stream);
  Py_DECREF(owner);
  if (r == nullptr) return false;
  Py_DECREF(r);
  return true;
}

// A kernel phase is done: its stream moves on, a reference to the stream held meanwhile
// (the move may drop the phase's own).
static bool finish_phase(PyObject* stream) {
  Py_INCREF(stream);
  bool ok = phase_done(stream);
  Py_DECREF(stream);
  return ok;
}

// -- RankEvents: the stream queues

static void visit_queues(RankEvents* self, visitproc visit, void* arg) {
  if (self->queues == nullptr) return;
  for (PyObject* stream : self->queues->ready) visit(stream, arg);
  for (auto& queue : self->queues->active)
    for (PyObject* stream : queue) visit(stream, arg);
}

static void clear_queues(RankEvents* self) {
  StreamQueues* queues = self->queues;
  if (queues == nullptr) return;
  self->queues = nullptr;
  for (PyObject* stream : queues->ready) Py_DECREF(stream);
  for (auto& queue : queues->active)
    for (PyObject* stream : queue) Py_DECREF(stream);
  delete queues;
}

// configure_queues(dimensions, active_chunks_per_dimension)
static PyObject* RankEvents_configure_queues(RankEvents* self, PyObject* args) {
  Py_ssize_t dims;
  long long threshold;
  if (!PyArg_ParseTuple(args, "nL", &dims, &threshold)) return nullptr;
  clear_queues(self);
  self->queues = new StreamQueues();
  self->queues->active.assign(dims, std::vector<PyObject*>());
  self->queues->running.assign(dims, 0);
  self->queues->threshold = threshold < 1 ? 1 : threshold;
  Py_RETURN_NONE;
}

static bool has_queues(RankEvents* self) {
  if (self->queues != nullptr) return true;
  PyErr_SetString(PyExc_RuntimeError, "the rank's stream queues are not configured");
  return false;
}

// add_streams(streams): each into the ready list, by priority, then scheduled.
static PyObject* RankEvents_add_streams(RankEvents* self, PyObject* streams) {
  if (!has_queues(self)) return nullptr;
  PyObject* seq = PySequence_Fast(streams, "add_streams: a sequence of Streams");
  if (seq == nullptr) return nullptr;
  bool ok = true;
  for (Py_ssize_t i = 0; ok && i < PySequence_Fast_GET_SIZE(seq); ++i) {
    PyObject* stream = PySequence_Fast_GET_ITEM(seq, i);
    if (Py_TYPE(stream) != &StreamType) {
      PyErr_SetString(PyExc_TypeError, "add_streams: not a kernel Stream");
      ok = false;
      break;
    }
    insert_stream(self->queues->ready, stream);
    ok = schedule_ready(self);
  }
  Py_DECREF(seq);
  if (!ok) return nullptr;
  Py_RETURN_NONE;
}

static PyObject* RankEvents_proceed_to_next_phase(RankEvents* self, PyObject* stream) {
  if (!has_queues(self)) return nullptr;
  if (Py_TYPE(stream) != &StreamType) {
    PyErr_SetString(PyExc_TypeError, "proceed_to_next_phase: not a kernel Stream");
    return nullptr;
  }
  if (!proceed_to_next_phase(self, stream)) return nullptr;
  Py_RETURN_NONE;
}

static PyObject* RankEvents_active_streams(RankEvents* self, PyObject*) {
  if (!has_queues(self)) return nullptr;
  PyObject* out = PyList_New(0);
  for (auto& queue : self->queues->active) {
    PyObject* list = PyList_New(0);
    for (PyObject* stream : queue) PyList_Append(list, stream);
    PyList_Append(out, list);
    Py_DECREF(list);
  }
  return out;
}
