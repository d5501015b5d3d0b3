// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// Calls and the event queue
// EventQueue: the clock. Events sit in a binary heap ordered by (time, sequence):
// same-time events run in the order they were scheduled, including those scheduled
// at the current time while it is processed (upstream ASTRA-sim's analytical
// EventList drains one FIFO list per time). An event calls a Python callable with
// one argument. Times are doubles with an "integer" flag per event, so that `now`
// is a Python int exactly where the Python arithmetic it replaces (int + int) gave
// one, and a float otherwise.

// What an event (or an entry of a rank's tick bucket) does when it comes due. CALL_PY
// calls obj(arg), a Python callable; the others are the kernel's own steps, whose obj
// is the kernel object they act on. A Call owns its references.
enum CallKind : uint8_t {
  CALL_NONE = 0,
  CALL_PY,        // obj(arg)
  CALL_BUCKET,    // RankEvents obj (C++ in arg) runs its bucket of tick v.d
  CALL_ARRIVED,   // MessageMatcher obj (C++ in arg): the message of entry v.i is in
  CALL_RECEIVED,  // WindowedPhase obj: a message it receives is in
  CALL_GENERAL,   // WindowedPhase obj: a packet is through local memory
  CALL_REDUCE,    // WindowedPhase obj: a packet of v.i bytes is in memory; reduce it
  CALL_NCCL_SENT,      // NcclPhase obj: a send of lane v.i was delivered
  CALL_NCCL_RECEIVED,  // NcclPhase obj: receive v.i arrived
  CALL_NCCL_FLOOR,     // NcclPhase obj: NCCL's predicted time has passed
  CALL_TREE_RECEIVED,   // TreePhase obj: a message it receives is in
  CALL_TREE_GENERAL,    // TreePhase obj: the chunk is through local memory
  CALL_TREE_REDUCE,     // TreePhase obj: the chunk (v.i bytes) is in memory; reduce it
  CALL_PROGRAM_DONE,    // ProgramPhase obj: operation v.i is done
  CALL_C_FN,           // a compiled model's step: fn(ctx, v.i), fn and ctx (not Python objects) in obj, arg
};

struct Call {
  uint8_t kind;
  PyObject* obj;
  PyObject* arg;
  union {
    double d;
    int64_t i;
  } v;
};

static inline Call py_call(PyObject* callback, PyObject* arg) {
  Py_INCREF(callback);
  Py_INCREF(arg);
  Call c{CALL_PY, callback, arg, {0}};
  return c;
}

static inline Call kernel_call(uint8_t kind, PyObject* obj, int64_t value) {
  Py_INCREF(obj);
  Call c{kind, obj, nullptr, {0}};
  c.v.i = value;
  return c;
}

// A kernel step on a bound object: its Python object in obj (a reference: it keeps the
// object alive while the call waits), the C++ object itself in arg (raw: fire reaches
// it without reading the Python instance first).
static inline Call bound_call(uint8_t kind, PyObject* self, const void* object, int64_t value) {
  Py_INCREF(self);
  Call c{kind, self, reinterpret_cast<PyObject*>(const_cast<void*>(object)), {0}};
  c.v.i = value;
  return c;
}

// A compiled model's step fn(ctx, arg) as a call (raw pointers: no references).
static inline Call step_call(AstraStepFn fn, void* ctx, int64_t arg) {
  Call c{CALL_C_FN, reinterpret_cast<PyObject*>(reinterpret_cast<void*>(fn)), reinterpret_cast<PyObject*>(ctx), {0}};
  c.v.i = arg;
  return c;
}

static inline void release(Call& c) {
  if (c.kind != CALL_C_FN) Py_CLEAR(c.obj);  // a compiled model's step: raw pointers
  if (c.kind == CALL_PY) Py_CLEAR(c.arg);    // a kernel step's arg is its C++ object, or nothing
  c.obj = c.arg = nullptr;
  c.kind = CALL_NONE;
}

// Visits a call's Python objects (a compiled model's step holds none; only obj(arg)
// holds arg).
#define VISIT_CALL(c)                              \
  do {                                             \
    if ((c).kind != CALL_C_FN) Py_VISIT((c).obj);  \
    if ((c).kind == CALL_PY) Py_VISIT((c).arg);    \
  } while (0)

// Runs a call; false with a Python error set when it raised. Defined after the
// kernel's objects.
static bool fire(const Call& c);

struct Event {
  double time;
  uint64_t seq;
  bool integral;  // the time is a Python int
  Call call;
};

// The heap order: "less" means "runs later" (a max-heap of the earliest).
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return a.time > b.time || (a.time == b.time && a.seq > b.seq);
  }
};

// The queue's heap (astra_heap.h) ordered by Later.
static inline void heap_pop(BigVector<Event>& heap, Event& out) { astra::heap_pop<Event, Later>(heap, out); }
static inline void heap_push(BigVector<Event>& heap, const Event& e) { astra::heap_push<Event, Later>(heap, e); }

// What a queue owns for the compiled models that run on it (the C API's adopt, keep and
// tokens): the models themselves, destroyed with the queue, so that no event or step of
// theirs outlives them; the Python objects they use; and each model's table of the
// deliveries it waits to make, which the garbage collector sees through the queue (a
// zeroed entry is empty).
struct QueueOwned {
  std::vector<std::pair<void*, BigVector<AstraToken>>> tokens;  // per model
  std::vector<std::pair<void*, void (*)(void*)>> adopted;
  std::vector<py::object> kept;
};

struct EventQueue {
  BigVector<Event> heap;
  QueueOwned owned;
  uint64_t seq = 0;
  double now = 0;
  bool now_integral = true;
  long long events_processed = 0;
  py::object progress = py::none();  // None or a callable
  py::object step_end = py::none();  // None or a callable
  bool step_pending = false;

  ~EventQueue() { clear(); }

  int traverse(visitproc visit, void* arg) const;
  void clear();
};

static PyTypeObject* queue_type = nullptr;  // set by bind_event_queue

// ``events`` as the kernel's EventQueue, or nullptr when it is something else.
static inline EventQueue* kernel_queue(PyObject* events) {
  return bound_instance<EventQueue>(events, queue_type);
}

static const long long PROGRESS_EVERY = 1LL << 16;
// Events between two looks at pending signals: a stretch of the kernel's own events
// runs no Python, which would otherwise leave Ctrl-C (SIGINT) and handlers waiting.
static const long long SIGNAL_CHECK_MASK = (1LL << 10) - 1;

static PyObject* time_object(double t, bool integral) {
  if (integral) return PyLong_FromDouble(t);
  return PyFloat_FromDouble(t);
}

// A number as (double, is-int); false with a Python error set when it is not one.
static bool read_number(PyObject* value, double* out, bool* integral) {
  if (PyLong_Check(value)) {
    *out = PyLong_AsDouble(value);
    *integral = true;
    return !(*out == -1.0 && PyErr_Occurred());
  }
  if (PyFloat_Check(value)) {
    *out = PyFloat_AS_DOUBLE(value);
    *integral = false;
    return true;
  }
  if (PyIndex_Check(value)) {  // numpy integers
    py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(value));
    if (!index) return false;
    *out = PyLong_AsDouble(index.ptr());
    *integral = true;
    return !(*out == -1.0 && PyErr_Occurred());
  }
  *out = PyFloat_AsDouble(value);
  *integral = false;
  return !(*out == -1.0 && PyErr_Occurred());
}

static bool read_int64(PyObject* value, int64_t* out) {
  long long v = PyLong_AsLongLong(value);
  if (v == -1 && PyErr_Occurred()) return false;
  *out = v;
  return true;
}

// Reads a sequence of numbers into ``out``; false with a Python error set otherwise.
template <class T>
static bool read_numbers(PyObject* seq, const char* what, std::vector<T>* out) {
  py::object fast = py::reinterpret_steal<py::object>(PySequence_Fast(seq, what));
  if (!fast) return false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast.ptr());
  out->resize(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(fast.ptr(), i);
    if constexpr (std::is_integral<T>::value)
      (*out)[i] = static_cast<T>(PyLong_AsLongLong(item));
    else
      (*out)[i] = static_cast<T>(PyFloat_AsDouble(item));
    if (PyErr_Occurred()) return false;
  }
  return true;
}

// Binds fast-call positional and keyword arguments to ``names`` (``required`` of them
// needed, the rest default to None) in ``out``; false with TypeError set otherwise.
static bool bind_args(const char* function, const char* const* names, int count, int required,
                      PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject** out) {
  for (int i = 0; i < count; ++i) out[i] = nullptr;
  if (nargs > count) {
    PyErr_Format(PyExc_TypeError, "%s() takes at most %d arguments (%zd given)", function, count, nargs);
    return false;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) out[i] = args[i];
  Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    int i = 0;
    while (i < count && PyUnicode_CompareWithASCIIString(key, names[i]) != 0) ++i;
    if (i == count || out[i] != nullptr) {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected or repeated argument '%U'", function, key);
      return false;
    }
    out[i] = args[nargs + k];
  }
  for (int i = 0; i < count; ++i) {
    if (out[i] != nullptr) continue;
    if (i < required) {
      PyErr_Format(PyExc_TypeError, "%s() missing argument '%s'", function, names[i]);
      return false;
    }
    out[i] = Py_None;
  }
  return true;
}

// Queues ``call`` (its references move to the queue) at ``time``.
static inline void push_call(EventQueue* q, double time, bool integral, const Call& call) {
  heap_push(q->heap, Event{time, ++q->seq, integral, call});
}

int EventQueue::traverse(visitproc visit, void* arg) const {
  Py_VISIT(progress.ptr());
  Py_VISIT(step_end.ptr());
  for (const Event& e : heap) VISIT_CALL(e.call);
  for (const auto& table : owned.tokens)
    for (const AstraToken& token : table.second) {
      Call c;
      memcpy(&c, &token, sizeof c);
      VISIT_CALL(c);
    }
  for (const py::object& o : owned.kept) Py_VISIT(o.ptr());
  return 0;
}

// Releases the queued events, then what the queue owns for its models: their held
// deliveries, then the models (newest first), then the objects kept for them.
void EventQueue::clear() {
  BigVector<Event> events;
  events.swap(heap);
  for (Event& e : events) release(e.call);
  QueueOwned models;
  std::swap(models, owned);
  for (auto& table : models.tokens)
    for (AstraToken& token : table.second) {
      Call c;
      memcpy(&c, &token, sizeof c);
      release(c);
    }
  for (auto at = models.adopted.rbegin(); at != models.adopted.rend(); ++at) at->second(at->first);
  models.kept.clear();
  progress = py::none();
  step_end = py::none();
}

// ValueError for a delay that is negative, infinite or NaN (a NaN time would break the
// heap's order; an infinite one would stop the clock at infinity); nullptr.
static PyObject* bad_delay(PyObject* delay) {
  py::object text = py::reinterpret_steal<py::object>(PyObject_Str(delay));
  if (text) PyErr_Format(PyExc_ValueError, "cannot schedule with a delay of %U ns (must be finite and >= 0)", text.ptr());
  return nullptr;
}

// The time a Python caller gave, as (double, is-int); raises TypeError for a non-number.
static std::pair<double, bool> time_of(const py::handle& value) {
  double t;
  bool integral;
  if (!read_number(value.ptr(), &t, &integral)) throw py::error_already_set();
  return {t, integral};
}

// Runs the earliest event; false with a Python error set when its callback raised.
static inline bool run_one(EventQueue* q) {
  Event e;
  heap_pop(q->heap, e);
  q->now = e.time;
  q->now_integral = e.integral;
  bool ok = fire(e.call);
  release(e.call);
  return ok;
}

// The kernel's own entry in the traceback of an exception that an event's callback
// raised: a frame of module astra_core.events, where the queue's Python face lives,
// so that a traceback reads as it would through a Python event loop (whose frame
// tells a host's callback from a plugin's; astra_core.plugins._raised_in).
static PyObject* kernel_globals = nullptr;
static PyCodeObject* kernel_code = nullptr;

static void add_kernel_frame() {
  if (kernel_globals == nullptr) {
    kernel_globals = Py_BuildValue("{s:s,s:O}", "__name__", "astra_core.events", "__builtins__", PyEval_GetBuiltins());
    kernel_code = PyCode_NewEmpty("astra_core/cpp/kernel.cc", "EventQueue.run", __LINE__);
    if (kernel_globals == nullptr || kernel_code == nullptr) return;
  }
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyFrameObject* frame = PyFrame_New(PyThreadState_Get(), kernel_code, kernel_globals, nullptr);
  PyErr_Restore(type, value, tb);
  if (frame == nullptr) return;
  PyTraceBack_Here(frame);
  Py_DECREF(frame);
}

// Runs the events due until ``until`` ns; false with a Python error set (an event's
// callback raised, a signal handler did, or a hook failed).
static bool run_events(EventQueue* q, double until) {
  BigVector<Event>& heap = q->heap;
  py::object progress = q->progress, step_end = q->step_end;  // held: a hook may reset them
  if (progress.is_none() && step_end.is_none()) {
    while (!heap.empty() && heap.front().time <= until) {
      ++q->events_processed;
      if (!run_one(q) || (!(q->events_processed & SIGNAL_CHECK_MASK) && PyErr_CheckSignals() < 0)) return false;
    }
    return true;
  }
  const long long mask = PROGRESS_EVERY - 1;
  for (;;) {
    if (q->step_pending && (heap.empty() || heap.front().time > q->now)) {
      q->step_pending = false;
      if (!py::reinterpret_steal<py::object>(PyObject_CallNoArgs(step_end.ptr()))) return false;
      continue;
    }
    if (heap.empty() || heap.front().time > until) return true;
    ++q->events_processed;
    if (!run_one(q) || (!(q->events_processed & SIGNAL_CHECK_MASK) && PyErr_CheckSignals() < 0)) return false;
    if (!progress.is_none() && !(q->events_processed & mask)) {
      py::object now = py::reinterpret_steal<py::object>(time_object(q->now, q->now_integral));
      if (!now || !py::reinterpret_steal<py::object>(
                      PyObject_CallFunction(progress.ptr(), "OL", now.ptr(), q->events_processed)))
        return false;
    }
  }
}

static void bind_event_queue(py::module_& module) {
  py::class_<EventQueue> queue(module, "EventQueue", collected<EventQueue>(),
                               "Heap-based event queue owning the simulated clock (ns); see astra_core.events.");
  queue.def(py::init<>());
  queue.def(
      "schedule",
      [](EventQueue& q, const TimeObject& delay_ns, const Callback& callback, const AnyObject& arg) {
        auto [delay, integral] = time_of(delay_ns);
        if (!(delay >= 0 && delay < INFINITY)) {
          bad_delay(delay_ns.ptr());
          throw py::error_already_set();
        }
        push_call(&q, q.now + delay, integral && q.now_integral, py_call(callback.ptr(), arg.ptr()));
      },
      py::arg("delay_ns"), py::arg("callback"), py::arg("arg") = py::none(),
      "run callback(arg) after delay_ns (finite, >= 0) ns; ValueError otherwise.");
  queue.def(
      "schedule_at",
      [](EventQueue& q, const TimeObject& time_ns, const Callback& callback, const AnyObject& arg) {
        auto [time, integral] = time_of(time_ns);
        if (!(q.now <= time && time < INFINITY)) {
          py::object now = py::reinterpret_steal<py::object>(time_object(q.now, q.now_integral));
          throw py::value_error("cannot schedule at " + std::string(py::str(py::handle(time_ns))) +
                                " ns, clock is at " + std::string(py::repr(now)) + " ns");
        }
        push_call(&q, time, integral, py_call(callback.ptr(), arg.ptr()));
      },
      py::arg("time_ns"), py::arg("callback"), py::arg("arg") = py::none(),
      "run callback(arg) at time_ns (finite, >= now); ValueError otherwise.");
  queue.def(
      "run",
      [](EventQueue& q, const OptionalTime& until_ns) {
        double until = until_ns.is_none() ? INFINITY : time_of(until_ns).first;
        if (!run_events(&q, until)) {
          add_kernel_frame();
          throw py::error_already_set();
        }
      },
      py::arg("until_ns") = py::none(),
      "process events in time order until none remain (or until_ns).");
  queue.def(
      "next_time",
      [](const EventQueue& q) -> OptionalTime {
        if (q.heap.empty()) return py::none();
        return py::reinterpret_steal<OptionalTime>(time_object(q.heap.front().time, q.heap.front().integral));
      },
      "The time of the earliest queued event, or None if none is queued.");
  queue.def("__len__", [](const EventQueue& q) { return q.heap.size(); });
  queue.def_property(
      "now", [](const EventQueue& q) { return py::reinterpret_steal<TimeObject>(time_object(q.now, q.now_integral)); },
      [](EventQueue& q, const TimeObject& value) { std::tie(q.now, q.now_integral) = time_of(value); },
      "the simulated time (ns)");
  queue.def_readwrite("events_processed", &EventQueue::events_processed, "events run so far");
  queue.def_readwrite("step_pending", &EventQueue::step_pending, "step_end is due before the clock moves");
  queue.def_readwrite("progress", &EventQueue::progress,
                      "progress(now_ns, events) every PROGRESS_EVERY events, or None");
  queue.def_readwrite("step_end", &EventQueue::step_end,
                      "called with no argument when step_pending and the clock is about to move");
  queue_type = reinterpret_cast<PyTypeObject*>(queue.ptr());
}
