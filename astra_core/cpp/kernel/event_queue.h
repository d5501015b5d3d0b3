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
  CALL_BUCKET,    // RankEvents obj runs its bucket of tick v.d
  CALL_ARRIVED,   // MessageMatcher obj: the message of entry v.i is in
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

// A compiled model's step fn(ctx, arg) as a call (raw pointers: no references).
static inline Call step_call(AstraStepFn fn, void* ctx, int64_t arg) {
  Call c{CALL_C_FN, reinterpret_cast<PyObject*>(reinterpret_cast<void*>(fn)), reinterpret_cast<PyObject*>(ctx), {0}};
  c.v.i = arg;
  return c;
}

static inline void release(Call& c) {
  if (c.kind == CALL_C_FN) {  // raw pointers, no references
    c.obj = c.arg = nullptr;
  } else {
    Py_CLEAR(c.obj);
    Py_CLEAR(c.arg);
  }
  c.kind = CALL_NONE;
}

// Visits a call's Python objects (a compiled model's step holds none).
#define VISIT_CALL(c)              \
  do {                             \
    if ((c).kind != CALL_C_FN) {   \
      Py_VISIT((c).obj);           \
      Py_VISIT((c).arg);           \
    }                              \
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
  std::vector<PyObject*> kept;  // owned
};

struct EventQueue {
  PyObject_HEAD
  BigVector<Event>* heap;
  QueueOwned* owned;
  uint64_t seq;
  double now;
  bool now_integral;
  long long events_processed;
  PyObject* progress;  // None or a callable
  PyObject* step_end;  // None or a callable
  bool step_pending;
};

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
    PyObject* index = PyNumber_Index(value);
    if (index == nullptr) return false;
    *out = PyLong_AsDouble(index);
    Py_DECREF(index);
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
  PyObject* fast = PySequence_Fast(seq, what);
  if (fast == nullptr) return false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  out->resize(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(fast, i);
    if constexpr (std::is_integral<T>::value)
      (*out)[i] = static_cast<T>(PyLong_AsLongLong(item));
    else
      (*out)[i] = static_cast<T>(PyFloat_AsDouble(item));
    if (PyErr_Occurred()) {
      Py_DECREF(fast);
      return false;
    }
  }
  Py_DECREF(fast);
  return true;
}

// A vector of numbers as a new Python list (floats, or ints for integer elements).
template <class T>
static PyObject* number_list(const std::vector<T>& values) {
  PyObject* out = PyList_New(static_cast<Py_ssize_t>(values.size()));
  for (size_t i = 0; out != nullptr && i < values.size(); ++i) {
    PyObject* item;
    if constexpr (std::is_integral<T>::value)
      item = PyLong_FromLongLong(static_cast<long long>(values[i]));
    else
      item = PyFloat_FromDouble(static_cast<double>(values[i]));
    if (item == nullptr) Py_CLEAR(out);
    else PyList_SET_ITEM(out, i, item);
  }
  return out;
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
  heap_push(*q->heap, Event{time, ++q->seq, integral, call});
}

static PyObject* EventQueue_new(PyTypeObject* type, PyObject*, PyObject*) {
  EventQueue* q = reinterpret_cast<EventQueue*>(type->tp_alloc(type, 0));
  if (q == nullptr) return nullptr;
  q->heap = new BigVector<Event>();
  q->owned = new QueueOwned();
  q->seq = 0;
  q->now = 0;
  q->now_integral = true;
  q->events_processed = 0;
  Py_INCREF(Py_None);
  q->progress = Py_None;
  Py_INCREF(Py_None);
  q->step_end = Py_None;
  q->step_pending = false;
  return reinterpret_cast<PyObject*>(q);
}

static int EventQueue_traverse(EventQueue* q, visitproc visit, void* arg) {
  Py_VISIT(q->progress);
  Py_VISIT(q->step_end);
  if (q->heap != nullptr) {
    for (const Event& e : *q->heap) {
      VISIT_CALL(e.call);
    }
  }
  if (q->owned != nullptr) {
    for (const auto& table : q->owned->tokens)
      for (const AstraToken& token : table.second) {
        Call c;
        memcpy(&c, &token, sizeof c);
        VISIT_CALL(c);
      }
    for (PyObject* o : q->owned->kept) Py_VISIT(o);
  }
  return 0;
}

static void clear_heap(EventQueue* q) {
  if (q->heap == nullptr) return;
  BigVector<Event> events;
  events.swap(*q->heap);
  for (Event& e : events) release(e.call);
}

// Releases what the queue owns for its models: their held deliveries, then the models
// (newest first), then the objects kept for them.
static void clear_owned(EventQueue* q) {
  if (q->owned == nullptr) return;
  QueueOwned owned;
  std::swap(owned, *q->owned);
  for (auto& table : owned.tokens)
    for (AstraToken& token : table.second) {
      Call c;
      memcpy(&c, &token, sizeof c);
      release(c);
    }
  for (auto at = owned.adopted.rbegin(); at != owned.adopted.rend(); ++at) at->second(at->first);
  for (PyObject* o : owned.kept) Py_DECREF(o);
}

static int EventQueue_clear(EventQueue* q) {
  clear_heap(q);
  clear_owned(q);
  Py_CLEAR(q->progress);
  Py_CLEAR(q->step_end);
  return 0;
}

static void EventQueue_dealloc(EventQueue* q) {
  PyObject_GC_UnTrack(q);
  EventQueue_clear(q);
  delete q->heap;
  delete q->owned;
  Py_TYPE(q)->tp_free(reinterpret_cast<PyObject*>(q));
}

static PyObject* bad_delay(PyObject* delay) {
  PyObject* text = PyObject_Str(delay);
  if (text == nullptr) return nullptr;
  PyErr_Format(PyExc_ValueError, "cannot schedule with a delay of %U ns (must be finite and >= 0)", text);
  Py_DECREF(text);
  return nullptr;
}

// schedule(delay_ns, callback, arg=None)
static PyObject* EventQueue_schedule(EventQueue* q, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* bound[3];
  if (kwnames != nullptr || nargs != 3) {
    static const char* const names[] = {"delay_ns", "callback", "arg"};
    if (!bind_args("schedule", names, 3, 2, args, nargs, kwnames, bound)) return nullptr;
    args = bound;
    nargs = 3;
  }
  double delay;
  bool integral;
  if (!read_number(args[0], &delay, &integral)) return nullptr;
  if (!(delay >= 0 && delay < INFINITY)) return bad_delay(args[0]);
  push_call(q, q->now + delay, integral && q->now_integral, py_call(args[1], args[2]));
  Py_RETURN_NONE;
}

// schedule_at(time_ns, callback, arg=None)
static PyObject* EventQueue_schedule_at(EventQueue* q, PyObject* const* args, Py_ssize_t nargs,
                                        PyObject* kwnames) {
  PyObject* bound[3];
  static const char* const names[] = {"time_ns", "callback", "arg"};
  if (!bind_args("schedule_at", names, 3, 2, args, nargs, kwnames, bound)) return nullptr;
  args = bound;
  double time;
  bool integral;
  if (!read_number(args[0], &time, &integral)) return nullptr;
  if (!(q->now <= time && time < INFINITY)) {
    PyObject* text = PyObject_Str(args[0]);
    PyObject* now = time_object(q->now, q->now_integral);
    if (text != nullptr && now != nullptr)
      PyErr_Format(PyExc_ValueError, "cannot schedule at %U ns, clock is at %S ns", text, now);
    Py_XDECREF(text);
    Py_XDECREF(now);
    return nullptr;
  }
  push_call(q, time, integral, py_call(args[1], args[2]));
  Py_RETURN_NONE;
}

// Runs the earliest event; false with a Python error set when its callback raised.
static inline bool run_one(EventQueue* q) {
  Event e;
  heap_pop(*q->heap, e);
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

// run(until_ns=None)
static PyObject* EventQueue_run(EventQueue* q, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  double until = INFINITY;
  PyObject* until_ns;
  static const char* const names[] = {"until_ns"};
  if (!bind_args("run", names, 1, 0, args, nargs, kwnames, &until_ns)) return nullptr;
  if (until_ns != Py_None) {
    bool integral;
    if (!read_number(until_ns, &until, &integral)) return nullptr;
  }
  BigVector<Event>& heap = *q->heap;
  PyObject* progress = q->progress;
  PyObject* step_end = q->step_end;
  Py_INCREF(progress);
  Py_INCREF(step_end);
  bool ok = true;
  if (progress == Py_None && step_end == Py_None) {
    while (!heap.empty() && heap.front().time <= until) {
      ++q->events_processed;
      if (!run_one(q) || (!(q->events_processed & SIGNAL_CHECK_MASK) && PyErr_CheckSignals() < 0)) {
        ok = false;
        break;
      }
    }
  } else {
    const long long mask = PROGRESS_EVERY - 1;
    for (;;) {
      if (q->step_pending && (heap.empty() || heap.front().time > q->now)) {
        q->step_pending = false;
        PyObject* r = PyObject_CallNoArgs(step_end);
        if (r == nullptr) {
          ok = false;
          break;
        }
        Py_DECREF(r);
        continue;
      }
      if (heap.empty() || heap.front().time > until) break;
      ++q->events_processed;
      if (!run_one(q) || (!(q->events_processed & SIGNAL_CHECK_MASK) && PyErr_CheckSignals() < 0)) {
        ok = false;
        break;
      }
      if (progress != Py_None && !(q->events_processed & mask)) {
        PyObject* now = time_object(q->now, q->now_integral);
        PyObject* r = now == nullptr ? nullptr : PyObject_CallFunction(progress, "OL", now, q->events_processed);
        Py_XDECREF(now);
        if (r == nullptr) {
          ok = false;
          break;
        }
        Py_DECREF(r);
      }
    }
  }
  Py_DECREF(progress);
  Py_DECREF(step_end);
  if (!ok) {
    add_kernel_frame();
    return nullptr;
  }
  Py_RETURN_NONE;
}

static PyObject* EventQueue_next_time(EventQueue* q, PyObject*) {
  if (q->heap->empty()) Py_RETURN_NONE;
  const Event& e = q->heap->front();
  return time_object(e.time, e.integral);
}

static Py_ssize_t EventQueue_len(EventQueue* q) { return static_cast<Py_ssize_t>(q->heap->size()); }

static PyObject* EventQueue_get_now(EventQueue* q, void*) { return time_object(q->now, q->now_integral); }

static int EventQueue_set_now(EventQueue* q, PyObject* value, void*) {
  if (value == nullptr) {
    PyErr_SetString(PyExc_AttributeError, "cannot delete now");
    return -1;
  }
  double t;
  bool integral;
  if (!read_number(value, &t, &integral)) return -1;
  q->now = t;
  q->now_integral = integral;
  return 0;
}

static PyObject* EventQueue_get_processed(EventQueue* q, void*) { return PyLong_FromLongLong(q->events_processed); }

static int EventQueue_set_processed(EventQueue* q, PyObject* value, void*) {
  if (value == nullptr) {
    PyErr_SetString(PyExc_AttributeError, "cannot delete events_processed");
    return -1;
  }
  long long n = PyLong_AsLongLong(value);
  if (n == -1 && PyErr_Occurred()) return -1;
  q->events_processed = n;
  return 0;
}

static PyObject* EventQueue_get_pending(EventQueue* q, void*) { return PyBool_FromLong(q->step_pending); }

static int EventQueue_set_pending(EventQueue* q, PyObject* value, void*) {
  if (value == nullptr) {
    PyErr_SetString(PyExc_AttributeError, "cannot delete step_pending");
    return -1;
  }
  int truth = PyObject_IsTrue(value);
  if (truth < 0) return -1;
  q->step_pending = truth != 0;
  return 0;
}

static PyObject* get_hook(PyObject* hook) {
  Py_INCREF(hook);
  return hook;
}

static int set_hook(PyObject** slot, PyObject* value, const char* name) {
  if (value == nullptr) {
    PyErr_Format(PyExc_AttributeError, "cannot delete %s", name);
    return -1;
  }
  Py_INCREF(value);
  Py_SETREF(*slot, value);
  return 0;
}

static PyObject* EventQueue_get_progress(EventQueue* q, void*) { return get_hook(q->progress); }
static int EventQueue_set_progress(EventQueue* q, PyObject* v, void*) { return set_hook(&q->progress, v, "progress"); }
static PyObject* EventQueue_get_step_end(EventQueue* q, void*) { return get_hook(q->step_end); }
static int EventQueue_set_step_end(EventQueue* q, PyObject* v, void*) { return set_hook(&q->step_end, v, "step_end"); }

static PyMethodDef EventQueue_methods[] = {
    {"schedule", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(EventQueue_schedule)),
     METH_FASTCALL | METH_KEYWORDS,
     "schedule(delay_ns, callback, arg=None): run callback(arg) after delay_ns (finite, >= 0) ns; "
     "ValueError otherwise."},
    {"schedule_at", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(EventQueue_schedule_at)),
     METH_FASTCALL | METH_KEYWORDS,
     "schedule_at(time_ns, callback, arg=None): run callback(arg) at time_ns (finite, >= now); "
     "ValueError otherwise."},
    {"run", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(EventQueue_run)), METH_FASTCALL | METH_KEYWORDS,
     "run(until_ns=None): process events in time order until none remain (or until_ns)."},
    {"next_time", reinterpret_cast<PyCFunction>(EventQueue_next_time), METH_NOARGS,
     "The time of the earliest queued event, or None if none is queued."},
    {nullptr, nullptr, 0, nullptr}};

static PyGetSetDef EventQueue_getset[] = {
    {"now", reinterpret_cast<getter>(EventQueue_get_now), reinterpret_cast<setter>(EventQueue_set_now),
     "the simulated time (ns)", nullptr},
    {"events_processed", reinterpret_cast<getter>(EventQueue_get_processed),
     reinterpret_cast<setter>(EventQueue_set_processed), "events run so far", nullptr},
    {"step_pending", reinterpret_cast<getter>(EventQueue_get_pending), reinterpret_cast<setter>(EventQueue_set_pending),
     "step_end is due before the clock moves", nullptr},
    {"progress", reinterpret_cast<getter>(EventQueue_get_progress), reinterpret_cast<setter>(EventQueue_set_progress),
     "progress(now_ns, events) every PROGRESS_EVERY events, or None", nullptr},
    {"step_end", reinterpret_cast<getter>(EventQueue_get_step_end), reinterpret_cast<setter>(EventQueue_set_step_end),
     "called with no argument when step_pending and the clock is about to move", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

static PySequenceMethods EventQueue_as_sequence = {
    reinterpret_cast<lenfunc>(EventQueue_len), nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
    nullptr, nullptr};

static PyTypeObject EventQueueType = {PyVarObject_HEAD_INIT(nullptr, 0)};

static void init_event_queue_type() {
  PyTypeObject& t = EventQueueType;
  t.tp_name = "_astra_kernel.EventQueue";
  t.tp_basicsize = sizeof(EventQueue);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  t.tp_doc = "Heap-based event queue owning the simulated clock (ns); see astra_core.events.";
  t.tp_new = EventQueue_new;
  t.tp_dealloc = reinterpret_cast<destructor>(EventQueue_dealloc);
  t.tp_traverse = reinterpret_cast<traverseproc>(EventQueue_traverse);
  t.tp_clear = reinterpret_cast<inquiry>(EventQueue_clear);
  t.tp_methods = EventQueue_methods;
  t.tp_getset = EventQueue_getset;
  t.tp_as_sequence = &EventQueue_as_sequence;
}
