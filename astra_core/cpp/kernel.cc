// astra's simulation kernel: the per-event and per-message path in C++.
//
// A CPython extension module (``_astra_kernel``), built from this one source on the
// user's machine by astra_core.native.load_extension: compiled and cached, or
// JIT-compiled by cppyy, which then calls PyInit__astra_kernel itself.
//
// EventQueue: the clock. Events sit in a binary heap ordered by (time, sequence):
// same-time events run in the order they were scheduled, including those scheduled
// at the current time while it is processed (upstream ASTRA-sim's analytical
// EventList drains one FIFO list per time). An event calls a Python callable with
// one argument. Times are doubles with an "integer" flag per event, so that `now`
// is a Python int exactly where the Python arithmetic it replaces (int + int) gave
// one, and a float otherwise.

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <structmember.h>

#include "astra_kernel_api.h"

#include <cmath>
#include <cstring>
#include <cstdint>
#include <deque>
#include <new>
#include <unordered_map>
#include <utility>
#include <vector>

namespace astra_kernel {

// ---------------------------------------------------------------------------------
// FlatMap: a hash map in one array (open addressing, linear probing, power-of-two
// capacity, deletion by backward shift), for the per-message tables: no node per entry
// and no pointer to chase. A value's address holds until the next insert.

static inline uint64_t mix64(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

template <class Key, class Value, class Hash>
class FlatMap {
 public:
  FlatMap() : slots_(16), size_(0) {}

  size_t size() const { return size_; }

  Value* find(const Key& key) {
    size_t mask = slots_.size() - 1;
    for (size_t i = Hash()(key) & mask; slots_[i].used; i = (i + 1) & mask)
      if (slots_[i].key == key) return &slots_[i].value;
    return nullptr;
  }

  // Adds ``key`` (which must be absent).
  Value& insert(const Key& key, const Value& value) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow();
    size_t mask = slots_.size() - 1;
    size_t i = Hash()(key) & mask;
    while (slots_[i].used) i = (i + 1) & mask;
    slots_[i].key = key;
    slots_[i].value = value;
    slots_[i].used = true;
    ++size_;
    return slots_[i].value;
  }

  void erase(const Key& key) {
    size_t mask = slots_.size() - 1;
    size_t i = Hash()(key) & mask;
    while (!(slots_[i].key == key)) i = (i + 1) & mask;  // present: the caller found it
    for (size_t j = (i + 1) & mask; slots_[j].used; j = (j + 1) & mask) {
      size_t home = Hash()(slots_[j].key) & mask;
      // slot j may move to the hole at i when its home is not in (i, j] cyclically
      bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i].used = false;
    --size_;
  }

  template <class F>
  void for_each(F f) {
    for (Slot& slot : slots_)
      if (slot.used) f(slot.key, slot.value);
  }

  void clear() {
    std::vector<Slot>(16).swap(slots_);
    size_ = 0;
  }

 private:
  struct Slot {
    Key key{};
    Value value{};
    bool used = false;
  };

  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    size_ = 0;
    for (Slot& slot : old)
      if (slot.used) insert(slot.key, slot.value);
  }

  std::vector<Slot> slots_;
  size_t size_;
};

// ---------------------------------------------------------------------------------
// Event queue

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
  CALL_HOP_ARRIVED,  // CongestionLinks obj: message v.i is at the far end of its link
  CALL_LINK_FREE,    // CongestionLinks obj: link v.i is free
  CALL_NCCL_SENT,      // NcclPhase obj: a send of lane v.i was delivered
  CALL_NCCL_RECEIVED,  // NcclPhase obj: receive v.i arrived
  CALL_NCCL_FLOOR,     // NcclPhase obj: NCCL's predicted time has passed
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

// std heap helpers build a max-heap: "less" here means "runs later".
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return a.time > b.time || (a.time == b.time && a.seq > b.seq);
  }
};

// One event less on a heap kept by hand (sift-down from the root), the hot path.
static inline void heap_pop(std::vector<Event>& heap, Event& out) {
  out = heap.front();
  Event last = heap.back();
  heap.pop_back();
  size_t n = heap.size();
  if (n == 0) return;
  size_t i = 0;
  Later later;
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && later(heap[child], heap[child + 1])) ++child;
    if (!later(last, heap[child])) break;
    heap[i] = heap[child];
    i = child;
  }
  heap[i] = last;
}

static inline void heap_push(std::vector<Event>& heap, const Event& e) {
  heap.push_back(e);
  size_t i = heap.size() - 1;
  Later later;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!later(heap[parent], e)) break;
    heap[i] = heap[parent];
    i = parent;
  }
  heap[i] = e;
}

struct EventQueue {
  PyObject_HEAD
  std::vector<Event>* heap;
  uint64_t seq;
  double now;
  bool now_integral;
  long long events_processed;
  PyObject* progress;  // None or a callable
  PyObject* step_end;  // None or a callable
  bool step_pending;
};

static const long long PROGRESS_EVERY = 1LL << 16;

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
  q->heap = new std::vector<Event>();
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
  return 0;
}

static void clear_heap(EventQueue* q) {
  if (q->heap == nullptr) return;
  std::vector<Event> events;
  events.swap(*q->heap);
  for (Event& e : events) release(e.call);
}

static int EventQueue_clear(EventQueue* q) {
  clear_heap(q);
  Py_CLEAR(q->progress);
  Py_CLEAR(q->step_end);
  return 0;
}

static void EventQueue_dealloc(EventQueue* q) {
  PyObject_GC_UnTrack(q);
  EventQueue_clear(q);
  delete q->heap;
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
  std::vector<Event>& heap = *q->heap;
  PyObject* progress = q->progress;
  PyObject* step_end = q->step_end;
  Py_INCREF(progress);
  Py_INCREF(step_end);
  bool ok = true;
  if (progress == Py_None && step_end == Py_None) {
    while (!heap.empty() && heap.front().time <= until) {
      ++q->events_processed;
      if (!run_one(q)) {
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
      if (!run_one(q)) {
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

// ---------------------------------------------------------------------------------
// A kernel step as a Python callable, for clocks and backends written in Python
// (they schedule and deliver through Python calls).

struct KernelCall {
  PyObject_HEAD
  Call call;
};

static PyTypeObject KernelCallType = {PyVarObject_HEAD_INIT(nullptr, 0)};

static PyObject* KernelCall_call(KernelCall* self, PyObject*, PyObject*) {
  if (!fire(self->call)) return nullptr;
  Py_RETURN_NONE;
}

static int KernelCall_traverse(KernelCall* self, visitproc visit, void* arg) {
  VISIT_CALL(self->call);
  return 0;
}

static int KernelCall_clear(KernelCall* self) {
  release(self->call);
  return 0;
}

static void KernelCall_dealloc(KernelCall* self) {
  PyObject_GC_UnTrack(self);
  release(self->call);
  Py_TYPE(self)->tp_free(reinterpret_cast<PyObject*>(self));
}

// A callable that runs ``call`` (whose references it takes).
static PyObject* as_callable(const Call& call) {
  KernelCall* self = PyObject_GC_New(KernelCall, &KernelCallType);
  if (self == nullptr) {
    Call c = call;
    release(c);
    return nullptr;
  }
  self->call = call;
  PyObject_GC_Track(self);
  return reinterpret_cast<PyObject*>(self);
}

static void init_kernel_call_type() {
  PyTypeObject& t = KernelCallType;
  t.tp_name = "_astra_kernel.KernelCall";
  t.tp_basicsize = sizeof(KernelCall);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  t.tp_doc = "One step of the kernel, called by a Python clock or backend (any arguments are ignored).";
  t.tp_call = reinterpret_cast<ternaryfunc>(KernelCall_call);
  t.tp_dealloc = reinterpret_cast<destructor>(KernelCall_dealloc);
  t.tp_traverse = reinterpret_cast<traverseproc>(KernelCall_traverse);
  t.tp_clear = reinterpret_cast<inquiry>(KernelCall_clear);
}

// ---------------------------------------------------------------------------------
// A clock: the kernel's EventQueue (native events), or any Python object with
// ``now`` and ``schedule(delay, callback, arg)`` (a backend that keeps its own time).

struct Clock {
  EventQueue* queue = nullptr;  // borrowed: the owner keeps `object`
  PyObject* object = nullptr;   // owned

  bool set(PyObject* clock) {
    Py_INCREF(clock);
    Py_XSETREF(object, clock);
    queue = PyObject_TypeCheck(clock, &EventQueueType) ? reinterpret_cast<EventQueue*>(clock) : nullptr;
    return true;
  }

  // The time (ns); false with an error set when a Python clock failed.
  bool now(double* t, bool* integral) const {
    if (queue != nullptr) {
      *t = queue->now;
      *integral = queue->now_integral;
      return true;
    }
    PyObject* value = PyObject_GetAttrString(object, "now");
    if (value == nullptr) return false;
    bool ok = read_number(value, t, integral);
    Py_DECREF(value);
    return ok;
  }

  // Runs ``call`` (its references move here) after ``delay`` ns; false with an error set.
  bool schedule(double delay, bool integral, const Call& call) const {
    if (queue != nullptr) {
      push_call(queue, queue->now + delay, integral && queue->now_integral, call);
      return true;
    }
    PyObject* callable = as_callable(call);
    if (callable == nullptr) return false;
    PyObject* number = time_object(delay, integral);
    PyObject* r = number == nullptr ? nullptr : PyObject_CallMethod(object, "schedule", "OOO", number, callable, Py_None);
    Py_XDECREF(number);
    Py_DECREF(callable);
    if (r == nullptr) return false;
    Py_DECREF(r);
    return true;
  }
};

// ---------------------------------------------------------------------------------
// RankEvents: one rank's events batched per tick (upstream Sys::register_event and
// call_events). The first event registered for a tick queues one event that runs
// the tick's whole bucket, in registration order, including entries registered for
// the same tick while the bucket runs. Also the rank's local-memory timing, which
// the windowed phases read.

struct RankEvents {
  PyObject_HEAD
  Clock clock;
  // the pending ticks' buckets: a rank has a few at a time, so a list searched from the
  // end (the newest tick first) beats a hash table; emptied call vectors are reused
  std::vector<std::pair<double, std::vector<Call>>>* buckets;
  std::vector<std::vector<Call>>* spare;
  struct StreamQueues* queues;  // the rank's stream queues (configure_queues), or nullptr
  long long rank;
  long long endpoint_delay_ns;
  double local_mem_bytes_per_ns;
};

static PyTypeObject RankEventsType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// The bucket of ``tick`` in ``self``'s list, or nullptr.
static inline std::vector<Call>* find_bucket(RankEvents* self, double tick) {
  auto& buckets = *self->buckets;
  for (size_t i = buckets.size(); i-- > 0;)
    if (buckets[i].first == tick) return &buckets[i].second;
  return nullptr;
}

// Registers ``call`` (its references move here) ``delay`` ns from now.
static bool register_call(RankEvents* self, double delay, bool integral, const Call& call) {
  double now;
  bool now_integral;
  if (!self->clock.now(&now, &now_integral)) {
    Call c = call;
    release(c);
    return false;
  }
  double tick = now + delay;
  std::vector<Call>* bucket = find_bucket(self, tick);
  if (bucket != nullptr) {
    bucket->push_back(call);
    return true;
  }
  std::vector<Call> calls;
  if (!self->spare->empty()) {
    calls.swap(self->spare->back());
    self->spare->pop_back();
  }
  calls.push_back(call);
  self->buckets->emplace_back(tick, std::move(calls));
  Call run;
  run.kind = CALL_BUCKET;
  run.obj = reinterpret_cast<PyObject*>(self);
  Py_INCREF(run.obj);
  run.arg = nullptr;
  run.v.d = tick;
  return self->clock.schedule(delay, integral, run);
}

// Time to reduce ``size`` received bytes: one write and two reads, each bytes /
// local-mem-bw truncated to whole ns, or upstream's 10 ns each without a bandwidth
// (PacketBundle::call with Sys::mem_read / mem_write).
static inline int64_t reduction_delay_ns(const RankEvents* self, int64_t size) {
  double bw = self->local_mem_bytes_per_ns;
  if (bw <= 0) return 30;
  return 3 * static_cast<int64_t>(static_cast<double>(size) / bw);
}

static bool call_bucket(RankEvents* self, double tick) {
  bool ok = true;
  size_t i = 0;
  // The bucket may grow while it runs (zero-delay registrations) and the list may move
  // (new ticks): look it up again for each call.
  for (;; ++i) {
    std::vector<Call>* bucket = find_bucket(self, tick);
    if (bucket == nullptr || i >= bucket->size()) break;
    Call c = (*bucket)[i];
    (*bucket)[i] = Call{CALL_NONE, nullptr, nullptr, {0}};
    ok = fire(c);
    release(c);
    if (!ok) break;
  }
  auto& buckets = *self->buckets;
  for (size_t b = 0; b < buckets.size(); ++b) {
    if (buckets[b].first != tick) continue;
    std::vector<Call>& calls = buckets[b].second;
    for (Call& c : calls) release(c);  // what an error left unrun
    calls.clear();
    self->spare->push_back(std::move(calls));
    buckets[b] = std::move(buckets.back());
    buckets.pop_back();
    break;
  }
  return ok;
}

static int RankEvents_init(RankEvents* self, PyObject* args, PyObject* kwds) {
  static const char* names[] = {"rank", "clock", "endpoint_delay_ns", "local_mem_bytes_per_ns", nullptr};
  long long rank, endpoint;
  PyObject* clock;
  double bw;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "LOLd", const_cast<char**>(names), &rank, &clock, &endpoint, &bw))
    return -1;
  self->rank = rank;
  self->clock.set(clock);
  self->endpoint_delay_ns = endpoint;
  self->local_mem_bytes_per_ns = bw;
  return 0;
}

static PyObject* RankEvents_new(PyTypeObject* type, PyObject*, PyObject*) {
  RankEvents* self = reinterpret_cast<RankEvents*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  new (&self->clock) Clock();
  self->buckets = new std::vector<std::pair<double, std::vector<Call>>>();
  self->spare = new std::vector<std::vector<Call>>();
  return reinterpret_cast<PyObject*>(self);
}

static void visit_queues(RankEvents* self, visitproc visit, void* arg);
static void clear_queues(RankEvents* self);

static int RankEvents_traverse(RankEvents* self, visitproc visit, void* arg) {
  Py_VISIT(self->clock.object);
  visit_queues(self, visit, arg);
  if (self->buckets != nullptr) {
    for (auto& entry : *self->buckets) {
      for (Call& c : entry.second) {
        VISIT_CALL(c);
      }
    }
  }
  return 0;
}

static int RankEvents_clear(RankEvents* self) {
  if (self->buckets != nullptr) {
    std::vector<std::pair<double, std::vector<Call>>> buckets;
    buckets.swap(*self->buckets);
    for (auto& entry : buckets)
      for (Call& c : entry.second) release(c);
  }
  clear_queues(self);
  self->clock.queue = nullptr;
  Py_CLEAR(self->clock.object);
  return 0;
}

static void RankEvents_dealloc(RankEvents* self) {
  PyObject_GC_UnTrack(self);
  RankEvents_clear(self);
  delete self->buckets;
  delete self->spare;
  self->clock.~Clock();
  Py_TYPE(self)->tp_free(reinterpret_cast<PyObject*>(self));
}

// register_event(delay_ns, callback, arg=None)
static PyObject* RankEvents_register_event(RankEvents* self, PyObject* const* args, Py_ssize_t nargs,
                                           PyObject* kwnames) {
  PyObject* bound[3];
  if (kwnames != nullptr || nargs != 3) {
    static const char* const names[] = {"delay_ns", "callback", "arg"};
    if (!bind_args("register_event", names, 3, 2, args, nargs, kwnames, bound)) return nullptr;
    args = bound;
  }
  double delay;
  bool integral;
  if (!read_number(args[0], &delay, &integral)) return nullptr;
  if (!(delay >= 0 && delay < INFINITY)) return bad_delay(args[0]);
  if (!register_call(self, delay, integral, py_call(args[1], args[2]))) return nullptr;
  Py_RETURN_NONE;
}

static PyObject* RankEvents_reduction_delay_ns(RankEvents* self, PyObject* size) {
  long long n = PyLong_AsLongLong(size);
  if (n == -1 && PyErr_Occurred()) return nullptr;
  return PyLong_FromLongLong(reduction_delay_ns(self, n));
}

static PyObject* RankEvents_pending(RankEvents* self, PyObject*) {
  size_t n = 0;
  for (auto& entry : *self->buckets)
    for (const Call& c : entry.second) n += c.kind != CALL_NONE;
  return PyLong_FromSize_t(n);
}

static PyObject* RankEvents_configure_queues(RankEvents* self, PyObject* args);
static PyObject* RankEvents_add_streams(RankEvents* self, PyObject* streams);
static PyObject* RankEvents_proceed_to_next_phase(RankEvents* self, PyObject* stream);
static PyObject* RankEvents_active_streams(RankEvents* self, PyObject*);

static PyMethodDef RankEvents_methods[] = {
    {"register_event", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(RankEvents_register_event)),
     METH_FASTCALL | METH_KEYWORDS,
     "register_event(delay_ns, callback, arg=None): run callback(arg) after delay_ns, batched per tick "
     "(upstream Sys)."},
    {"reduction_delay_ns", reinterpret_cast<PyCFunction>(RankEvents_reduction_delay_ns), METH_O,
     "reduction_delay_ns(size): ns to reduce size received bytes (one write, two reads)."},
    {"pending", reinterpret_cast<PyCFunction>(RankEvents_pending), METH_NOARGS,
     "The number of registered events not yet run."},
    {"configure_queues", reinterpret_cast<PyCFunction>(RankEvents_configure_queues), METH_VARARGS,
     "configure_queues(dimensions, active_chunks_per_dimension): the rank's stream queues, one per dimension."},
    {"add_streams", reinterpret_cast<PyCFunction>(RankEvents_add_streams), METH_O,
     "add_streams(streams): queue a collective's streams (by priority) and start what may start."},
    {"proceed_to_next_phase", reinterpret_cast<PyCFunction>(RankEvents_proceed_to_next_phase), METH_O,
     "proceed_to_next_phase(stream): finish the stream's current phase and queue its next one (or retire it)."},
    {"active_streams", reinterpret_cast<PyCFunction>(RankEvents_active_streams), METH_NOARGS,
     "Per dimension: the streams on its queue (running ones first)."},
    {nullptr, nullptr, 0, nullptr}};

static PyMemberDef RankEvents_members[] = {
    {"rank", T_LONGLONG, offsetof(RankEvents, rank), READONLY, "the rank"},
    {"endpoint_delay_ns", T_LONGLONG, offsetof(RankEvents, endpoint_delay_ns), READONLY,
     "NPU<->memory time of a packet (ns)"},
    {"local_mem_bytes_per_ns", T_DOUBLE, offsetof(RankEvents, local_mem_bytes_per_ns), READONLY,
     "local memory bandwidth (bytes/ns, 0: none given)"},
    {nullptr, 0, 0, 0, nullptr}};

static void init_rank_events_type() {
  PyTypeObject& t = RankEventsType;
  t.tp_name = "_astra_kernel.RankEvents";
  t.tp_basicsize = sizeof(RankEvents);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  t.tp_doc =
      "RankEvents(rank, clock, endpoint_delay_ns, local_mem_bytes_per_ns): one rank's events batched per tick "
      "(upstream Sys::register_event), and its local-memory timing.";
  t.tp_new = RankEvents_new;
  t.tp_init = reinterpret_cast<initproc>(RankEvents_init);
  t.tp_dealloc = reinterpret_cast<destructor>(RankEvents_dealloc);
  t.tp_traverse = reinterpret_cast<traverseproc>(RankEvents_traverse);
  t.tp_clear = reinterpret_cast<inquiry>(RankEvents_clear);
  t.tp_methods = RankEvents_methods;
  t.tp_members = RankEvents_members;
}
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
  if (s->phase != Py_None) {  // the phase's span, for the collective's record
    PyObject* dim = PyObject_GetAttrString(s->phase, "dim");
    PyObject* comm_type = dim == nullptr ? nullptr : PyObject_GetAttrString(s->algorithm, "comm_type");
    PyObject* label = comm_type == nullptr ? nullptr : PyObject_GetAttrString(comm_type, "label");
    PyObject* times = label == nullptr ? nullptr : PyObject_GetAttrString(s->dataset, "phase_times");
    PyObject* item = times == nullptr ? nullptr : PyTuple_Pack(4, dim, label, s->phase_start_ns, now);
    ok = item != nullptr && PyList_Append(times, item) == 0;
    Py_XDECREF(item);
    Py_XDECREF(times);
    Py_XDECREF(label);
    Py_XDECREF(comm_type);
    Py_XDECREF(dim);
  }
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

// ---------------------------------------------------------------------------------
// AnalyticalLinks: upstream's congestion-unaware analytical model
// (astra-network-analytical BasicTopology): a message of B bytes between NPUs that
// first differ in dimension d takes hops * latency_d + B / bandwidth_d ns, truncated
// to whole ns; hops: Ring the shorter way round, Switch 2, FullyConnected 1.

struct LinkDim {
  long long stride;
  long long npus;
  int kind;  // 0 Ring, 1 Switch, 2 FullyConnected
  double latency_ns;
  double bytes_per_ns;
};

// A message's (source, destination, bytes), as the estimate counts them.
struct TallyKey {
  int64_t src, dst, size;
  bool operator==(const TallyKey& o) const { return src == o.src && dst == o.dst && size == o.size; }
};

struct TallyKeyHash {
  size_t operator()(const TallyKey& k) const {
    return static_cast<size_t>(mix64(static_cast<uint64_t>(k.size) ^
                                     mix64(static_cast<uint64_t>(k.src) ^ (static_cast<uint64_t>(k.dst) << 32))));
  }
};

struct AnalyticalLinks {
  PyObject_HEAD
  EventQueue* queue;  // owned
  std::vector<LinkDim>* dims;
  long long messages;
  long long bytes_sent;
  FlatMap<TallyKey, long long, TallyKeyHash>* tally;  // nullptr: not counting
  long long check_every, until_check;
  PyObject* on_check;  // owned, or nullptr
};

static PyTypeObject AnalyticalLinksType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// Whole ns as a double: past int64 (a nonsense input) the run's times must stay
// large, for the reports to refuse them, as Python's ints did.
static inline double analytical_delay_ns(const AnalyticalLinks* self, int64_t src, int64_t dst, int64_t size) {
  for (const LinkDim& d : *self->dims) {
    int64_t a = (src / d.stride) % d.npus;
    int64_t b = (dst / d.stride) % d.npus;
    if (a == b) continue;
    int64_t hops;
    if (d.kind == 0) {
      int64_t clockwise = ((b - a) % d.npus + d.npus) % d.npus;
      hops = clockwise < d.npus - clockwise ? clockwise : d.npus - clockwise;
    } else if (d.kind == 1) {
      hops = 2;
    } else {
      hops = 1;
    }
    return std::trunc(static_cast<double>(hops) * d.latency_ns + static_cast<double>(size) / d.bytes_per_ns);
  }
  return 0;
}

// Counts a message for the estimate, and every check_every messages calls on_check()
// (which raises to stop the pass); false with that error set.
static bool tally_message(AnalyticalLinks* self, int64_t src, int64_t dst, int64_t size) {
  TallyKey key{src, dst, size};
  long long* count = self->tally->find(key);
  if (count != nullptr) {
    ++*count;
  } else {
    self->tally->insert(key, 1);
  }
  if (--self->until_check > 0 || self->on_check == nullptr) return true;
  self->until_check = self->check_every;
  PyObject* r = PyObject_CallNoArgs(self->on_check);
  if (r == nullptr) return false;
  Py_DECREF(r);
  return true;
}

// Times a message and queues ``call`` (its references move here) for its arrival;
// false with an error set (the estimate's check stopped it).
static inline bool analytical_send(AnalyticalLinks* self, int64_t src, int64_t dst, int64_t size, const Call& call) {
  if (self->tally != nullptr && !tally_message(self, src, dst, size)) {
    Call c = call;
    release(c);
    return false;
  }
  ++self->messages;
  self->bytes_sent += size;
  EventQueue* q = self->queue;
  push_call(q, q->now + analytical_delay_ns(self, src, dst, size), q->now_integral, call);
  return true;
}

static PyObject* AnalyticalLinks_new(PyTypeObject* type, PyObject*, PyObject*) {
  AnalyticalLinks* self = reinterpret_cast<AnalyticalLinks*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->dims = new std::vector<LinkDim>();
  return reinterpret_cast<PyObject*>(self);
}

static int AnalyticalLinks_init(AnalyticalLinks* self, PyObject* args, PyObject* kwds) {
  static const char* names[] = {"events", "dims", nullptr};
  PyObject *events, *dims;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O", const_cast<char**>(names), &EventQueueType, &events, &dims))
    return -1;
  PyObject* seq = PySequence_Fast(dims, "dims: a sequence of (stride, npus, kind, latency_ns, bytes_per_ns)");
  if (seq == nullptr) return -1;
  self->dims->clear();
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
    LinkDim d;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "LLidd", &d.stride, &d.npus, &d.kind, &d.latency_ns,
                          &d.bytes_per_ns)) {
      Py_DECREF(seq);
      return -1;
    }
    self->dims->push_back(d);
  }
  Py_DECREF(seq);
  Py_INCREF(events);
  Py_XSETREF(self->queue, reinterpret_cast<EventQueue*>(events));
  return 0;
}

static int AnalyticalLinks_traverse(AnalyticalLinks* self, visitproc visit, void* arg) {
  Py_VISIT(self->queue);
  Py_VISIT(self->on_check);
  return 0;
}

static int AnalyticalLinks_clear(AnalyticalLinks* self) {
  Py_CLEAR(self->queue);
  Py_CLEAR(self->on_check);
  return 0;
}

static void AnalyticalLinks_dealloc(AnalyticalLinks* self) {
  PyObject_GC_UnTrack(self);
  AnalyticalLinks_clear(self);
  delete self->dims;
  delete self->tally;
  Py_TYPE(self)->tp_free(reinterpret_cast<PyObject*>(self));
}

// send(src, dst, size_bytes, on_delivered, arg=None, *, tag=0)
static PyObject* AnalyticalLinks_send(AnalyticalLinks* self, PyObject* const* args, Py_ssize_t nargs,
                                      PyObject* kwnames) {
  PyObject* bound[6];
  static const char* const names[] = {"src", "dst", "size_bytes", "on_delivered", "arg", "tag"};
  if (!bind_args("send", names, 6, 4, args, nargs, kwnames, bound)) return nullptr;
  long long src = PyLong_AsLongLong(bound[0]), dst = PyLong_AsLongLong(bound[1]);
  long long size = PyLong_AsLongLong(bound[2]);
  if (PyErr_Occurred()) return nullptr;
  if (!analytical_send(self, src, dst, size, py_call(bound[3], bound[4]))) return nullptr;
  Py_RETURN_NONE;
}

static PyObject* AnalyticalLinks_delay_ns(AnalyticalLinks* self, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "delay_ns(src, dst, size_bytes)");
    return nullptr;
  }
  long long src = PyLong_AsLongLong(args[0]), dst = PyLong_AsLongLong(args[1]), size = PyLong_AsLongLong(args[2]);
  if (PyErr_Occurred()) return nullptr;
  return PyLong_FromDouble(analytical_delay_ns(self, src, dst, size));
}

// start_tally(check_every, on_check=None)
static PyObject* AnalyticalLinks_start_tally(AnalyticalLinks* self, PyObject* args) {
  long long every;
  PyObject* on_check = Py_None;
  if (!PyArg_ParseTuple(args, "L|O", &every, &on_check)) return nullptr;
  if (every < 1) {
    PyErr_SetString(PyExc_ValueError, "check_every must be at least 1");
    return nullptr;
  }
  if (self->tally == nullptr) self->tally = new FlatMap<TallyKey, long long, TallyKeyHash>();
  self->check_every = self->until_check = every;
  Py_XDECREF(self->on_check);
  self->on_check = nullptr;
  if (on_check != Py_None) {
    Py_INCREF(on_check);
    self->on_check = on_check;
  }
  Py_RETURN_NONE;
}

static PyObject* AnalyticalLinks_tally(AnalyticalLinks* self, PyObject*) {
  PyObject* out = PyDict_New();
  if (out == nullptr || self->tally == nullptr) return out;
  bool ok = true;
  self->tally->for_each([&](const TallyKey& k, long long& count) {
    if (!ok) return;
    PyObject* key = Py_BuildValue("(LLL)", static_cast<long long>(k.src), static_cast<long long>(k.dst),
                                  static_cast<long long>(k.size));
    PyObject* value = PyLong_FromLongLong(count);
    ok = key != nullptr && value != nullptr && PyDict_SetItem(out, key, value) == 0;
    Py_XDECREF(key);
    Py_XDECREF(value);
  });
  if (!ok) {
    Py_DECREF(out);
    return nullptr;
  }
  return out;
}

static PyMethodDef AnalyticalLinks_methods[] = {
    {"start_tally", reinterpret_cast<PyCFunction>(AnalyticalLinks_start_tally), METH_VARARGS,
     "start_tally(check_every, on_check=None): count every message sent from now by (src, dst, bytes); "
     "on_check() every check_every messages, which may raise to stop the run."},
    {"tally", reinterpret_cast<PyCFunction>(AnalyticalLinks_tally), METH_NOARGS,
     "{(src, dst, bytes): messages} counted since start_tally ({} before it)."},
    {"send", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(AnalyticalLinks_send)),
     METH_FASTCALL | METH_KEYWORDS,
     "send(src, dst, size_bytes, on_delivered, arg=None, *, tag=0): on_delivered(arg) when the message is in."},
    {"delay_ns", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(AnalyticalLinks_delay_ns)),
     METH_FASTCALL, "delay_ns(src, dst, size_bytes): latency + serialization, whole ns (0 to itself)."},
    {nullptr, nullptr, 0, nullptr}};

static PyMemberDef AnalyticalLinks_members[] = {
    {"messages", T_LONGLONG, offsetof(AnalyticalLinks, messages), READONLY, "messages sent"},
    {"bytes_sent", T_LONGLONG, offsetof(AnalyticalLinks, bytes_sent), READONLY, "bytes sent"},
    {nullptr, 0, 0, 0, nullptr}};

static PyObject* AnalyticalLinks_get_native_send(AnalyticalLinks* self, void*);

static PyGetSetDef AnalyticalLinks_getset[] = {
    {"native_send", reinterpret_cast<getter>(AnalyticalLinks_get_native_send), nullptr,
     "the model's send for the kernel's matcher (a capsule astra.native_send; docs/plugins.md)", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

static void init_analytical_links_type() {
  PyTypeObject& t = AnalyticalLinksType;
  t.tp_name = "_astra_kernel.AnalyticalLinks";
  t.tp_basicsize = sizeof(AnalyticalLinks);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  t.tp_doc =
      "AnalyticalLinks(events, dims): upstream's congestion-unaware analytical delays on the EventQueue events; "
      "dims: (stride, npus, kind 0 Ring / 1 Switch / 2 FullyConnected, latency_ns, bytes_per_ns) per dimension.";
  t.tp_new = AnalyticalLinks_new;
  t.tp_init = reinterpret_cast<initproc>(AnalyticalLinks_init);
  t.tp_dealloc = reinterpret_cast<destructor>(AnalyticalLinks_dealloc);
  t.tp_traverse = reinterpret_cast<traverseproc>(AnalyticalLinks_traverse);
  t.tp_clear = reinterpret_cast<inquiry>(AnalyticalLinks_clear);
  t.tp_methods = AnalyticalLinks_methods;
  t.tp_members = AnalyticalLinks_members;
  t.tp_getset = AnalyticalLinks_getset;
}
// ---------------------------------------------------------------------------------
// CongestionLinks: upstream's congestion-aware analytical model (astra-network-
// analytical congestion_aware). A message crosses its route link by link, store and
// forward; a link serves one message at a time, first come first served. Serving B
// bytes keeps a link busy int(B / bandwidth) ns, and the message is at the link's far
// end int(latency + B / bandwidth) ns after it started (both truncated as upstream's
// Link). Routes come from a Python callable: route(src, dst, tag) -> link ids, or, with
// route_buckets > 0, route(src, dst, flow_hash(src, dst, tag) % route_buckets), asked
// once per bucket and kept here.

// Deterministic 32-bit hash of a flow (src, dst, tag): astra_core.topology.physical's
// flow_hash (this is its implementation), which picks among equal-cost paths.
static inline uint64_t flow_hash(int64_t src, int64_t dst, int64_t tag) {
  uint64_t h = (static_cast<uint64_t>(src) * 0x9E3779B1ULL) ^ (static_cast<uint64_t>(dst) * 0x85EBCA77ULL) ^
               (static_cast<uint64_t>(tag) * 0xC2B2AE3DULL);
  h &= 0xFFFFFFFFULL;
  h ^= h >> 16;
  h = (h * 0x7FEB352DULL) & 0xFFFFFFFFULL;
  h ^= h >> 15;
  return h;
}

static PyObject* kernel_flow_hash(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "flow_hash(src, dst, tag)");
    return nullptr;
  }
  int64_t v[3];
  for (int i = 0; i < 3; ++i) {
    long long x = PyLong_AsLongLong(args[i]);
    if (x == -1 && PyErr_Occurred()) return nullptr;
    v[i] = x;
  }
  return PyLong_FromUnsignedLongLong(flow_hash(v[0], v[1], v[2]));
}

struct RouteKey {
  int64_t src, dst;
  uint64_t bucket;
  bool operator==(const RouteKey& o) const { return src == o.src && dst == o.dst && bucket == o.bucket; }
};

struct RouteKeyHash {
  size_t operator()(const RouteKey& k) const {
    return static_cast<size_t>(mix64(static_cast<uint64_t>(k.src) * 0x9E3779B97F4A7C15ULL ^
                                     mix64(static_cast<uint64_t>(k.dst) ^ (k.bucket << 40))));
  }
};

struct CongestionMessage {
  PyObject* route;  // owned tuple of link ids
  Py_ssize_t hop;
  int64_t size;
  Call on_delivered;
};

struct CongestionLink {
  double bytes_per_ns;
  double latency_ns;
  bool busy;
  std::deque<uint32_t> queue;
  long long bytes;
  long long busy_ns;
  long long max_queue;
};

struct CongestionLinks {
  PyObject_HEAD
  EventQueue* queue;  // owned
  PyObject* route;    // owned: route(src, dst, tag)
  long long route_buckets;  // > 0: a route depends on (src, dst, flow_hash % buckets) only: cached
  // owned tuples of ints, which no reference cycle can pass: not visited by the GC
  FlatMap<RouteKey, PyObject*, RouteKeyHash>* routes;
  std::vector<CongestionLink>* links;
  std::vector<CongestionMessage>* messages_in_flight;
  std::vector<uint32_t>* free_messages;
  long long messages;
};

static PyTypeObject CongestionLinksType = {PyVarObject_HEAD_INIT(nullptr, 0)};

static bool congestion_transmit(CongestionLinks* self, Py_ssize_t link_id, uint32_t m) {
  CongestionLink& link = (*self->links)[link_id];
  link.busy = true;
  int64_t size = (*self->messages_in_flight)[m].size;
  double serialization = static_cast<double>(size) / link.bytes_per_ns;
  link.bytes += size;
  double busy = std::trunc(serialization);
  link.busy_ns += static_cast<long long>(busy);
  EventQueue* q = self->queue;
  PyObject* me = reinterpret_cast<PyObject*>(self);
  // Arrival first, then the link free: upstream's order for same-time events.
  push_call(q, q->now + std::trunc(link.latency_ns + serialization), q->now_integral,
            kernel_call(CALL_HOP_ARRIVED, me, m));
  push_call(q, q->now + busy, q->now_integral, kernel_call(CALL_LINK_FREE, me, link_id));
  return true;
}

static bool congestion_enqueue(CongestionLinks* self, uint32_t m) {
  CongestionMessage& msg = (*self->messages_in_flight)[m];
  Py_ssize_t link_id = PyLong_AsSsize_t(PyTuple_GET_ITEM(msg.route, msg.hop));
  if (link_id == -1 && PyErr_Occurred()) return false;
  if (link_id < 0 || link_id >= static_cast<Py_ssize_t>(self->links->size())) {
    PyErr_Format(PyExc_IndexError, "a route crosses link %zd of %zu", link_id, self->links->size());
    return false;
  }
  CongestionLink& link = (*self->links)[link_id];
  if (!link.busy) return congestion_transmit(self, link_id, m);
  link.queue.push_back(m);
  if (static_cast<long long>(link.queue.size()) > link.max_queue) link.max_queue = link.queue.size();
  return true;
}

// Routes a message and starts it on its first link; ``call`` (references move here)
// runs when it has crossed its last.
static bool congestion_send(CongestionLinks* self, int64_t src, int64_t dst, int64_t size, int64_t tag,
                            const Call& call) {
  ++self->messages;
  PyObject* hops = nullptr;
  RouteKey key{src, dst, 0};
  if (self->route_buckets > 0) {
    key.bucket = flow_hash(src, dst, tag) % static_cast<uint64_t>(self->route_buckets);
    PyObject** found = self->routes->find(key);
    if (found != nullptr) {
      hops = *found;
      Py_INCREF(hops);
    }
  }
  if (hops == nullptr) {
    long long third = self->route_buckets > 0 ? static_cast<long long>(key.bucket) : static_cast<long long>(tag);
    PyObject* route = PyObject_CallFunction(self->route, "LLL", static_cast<long long>(src),
                                            static_cast<long long>(dst), third);
    hops = route == nullptr ? nullptr : PySequence_Tuple(route);
    Py_XDECREF(route);
    if (hops == nullptr) {
      Call c = call;
      release(c);
      return false;
    }
    if (self->route_buckets > 0) {
      Py_INCREF(hops);
      self->routes->insert(key, hops);
    }
  }
  if (PyTuple_GET_SIZE(hops) == 0) {
    Py_DECREF(hops);
    EventQueue* q = self->queue;
    push_call(q, q->now, q->now_integral, call);
    return true;
  }
  uint32_t m;
  if (!self->free_messages->empty()) {
    m = self->free_messages->back();
    self->free_messages->pop_back();
  } else {
    m = static_cast<uint32_t>(self->messages_in_flight->size());
    self->messages_in_flight->emplace_back();
  }
  (*self->messages_in_flight)[m] = CongestionMessage{hops, 0, size, call};
  return congestion_enqueue(self, m);
}

static bool congestion_hop_arrived(CongestionLinks* self, uint32_t m) {
  CongestionMessage& msg = (*self->messages_in_flight)[m];
  if (++msg.hop < PyTuple_GET_SIZE(msg.route)) return congestion_enqueue(self, m);
  Call c = msg.on_delivered;
  msg.on_delivered = Call{CALL_NONE, nullptr, nullptr, {0}};
  Py_CLEAR(msg.route);
  self->free_messages->push_back(m);
  bool ok = fire(c);
  release(c);
  return ok;
}

static bool congestion_link_free(CongestionLinks* self, Py_ssize_t link_id) {
  CongestionLink& link = (*self->links)[link_id];
  link.busy = false;
  if (link.queue.empty()) return true;
  uint32_t m = link.queue.front();
  link.queue.pop_front();
  return congestion_transmit(self, link_id, m);
}

static PyObject* CongestionLinks_new(PyTypeObject* type, PyObject*, PyObject*) {
  CongestionLinks* self = reinterpret_cast<CongestionLinks*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->links = new std::vector<CongestionLink>();
  self->routes = new FlatMap<RouteKey, PyObject*, RouteKeyHash>();
  self->messages_in_flight = new std::vector<CongestionMessage>();
  self->free_messages = new std::vector<uint32_t>();
  return reinterpret_cast<PyObject*>(self);
}

static int CongestionLinks_init(CongestionLinks* self, PyObject* args, PyObject* kwds) {
  static const char* names[] = {"events", "route", "bytes_per_ns", "latency_ns", "route_buckets", nullptr};
  PyObject *events, *route, *bandwidth, *latency;
  long long buckets = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OOO|L", const_cast<char**>(names), &EventQueueType, &events,
                                   &route, &bandwidth, &latency, &buckets))
    return -1;
  self->route_buckets = buckets;
  PyObject* bw = PySequence_Fast(bandwidth, "bytes_per_ns: a sequence of numbers");
  PyObject* lat = bw == nullptr ? nullptr : PySequence_Fast(latency, "latency_ns: a sequence of numbers");
  if (lat == nullptr || PySequence_Fast_GET_SIZE(bw) != PySequence_Fast_GET_SIZE(lat)) {
    if (lat != nullptr) PyErr_SetString(PyExc_ValueError, "one bandwidth and one latency per link");
    Py_XDECREF(bw);
    Py_XDECREF(lat);
    return -1;
  }
  self->links->clear();
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(bw); ++i) {
    CongestionLink link{};
    link.bytes_per_ns = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(bw, i));
    link.latency_ns = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(lat, i));
    if (PyErr_Occurred()) {
      Py_DECREF(bw);
      Py_DECREF(lat);
      return -1;
    }
    self->links->push_back(link);
  }
  Py_DECREF(bw);
  Py_DECREF(lat);
  Py_INCREF(events);
  Py_XSETREF(self->queue, reinterpret_cast<EventQueue*>(events));
  Py_INCREF(route);
  Py_XSETREF(self->route, route);
  return 0;
}

static int CongestionLinks_traverse(CongestionLinks* self, visitproc visit, void* arg) {
  Py_VISIT(self->queue);
  Py_VISIT(self->route);
  if (self->messages_in_flight != nullptr) {
    for (CongestionMessage& m : *self->messages_in_flight) {
      Py_VISIT(m.route);
      VISIT_CALL(m.on_delivered);
    }
  }
  return 0;
}

static int CongestionLinks_clear(CongestionLinks* self) {
  Py_CLEAR(self->queue);
  Py_CLEAR(self->route);
  if (self->routes != nullptr) {
    self->routes->for_each([](const RouteKey&, PyObject*& route) { Py_CLEAR(route); });
    self->routes->clear();
  }
  if (self->messages_in_flight != nullptr) {
    for (CongestionMessage& m : *self->messages_in_flight) {
      Py_CLEAR(m.route);
      release(m.on_delivered);
    }
  }
  return 0;
}

static void CongestionLinks_dealloc(CongestionLinks* self) {
  PyObject_GC_UnTrack(self);
  CongestionLinks_clear(self);
  delete self->links;
  delete self->routes;
  delete self->messages_in_flight;
  delete self->free_messages;
  Py_TYPE(self)->tp_free(reinterpret_cast<PyObject*>(self));
}

// send(src, dst, size_bytes, on_delivered, arg=None, *, tag=0)
static PyObject* CongestionLinks_send(CongestionLinks* self, PyObject* const* args, Py_ssize_t nargs,
                                      PyObject* kwnames) {
  PyObject* bound[6];
  static const char* const names[] = {"src", "dst", "size_bytes", "on_delivered", "arg", "tag"};
  if (!bind_args("send", names, 6, 4, args, nargs, kwnames, bound)) return nullptr;
  int64_t src, dst, size, tag = 0;
  if (!read_int64(bound[0], &src) || !read_int64(bound[1], &dst) || !read_int64(bound[2], &size)) return nullptr;
  if (bound[5] != Py_None && !read_int64(bound[5], &tag)) return nullptr;
  if (!congestion_send(self, src, dst, size, tag, py_call(bound[3], bound[4]))) return nullptr;
  Py_RETURN_NONE;
}

// A per-link counter as a list of ints.
static PyObject* link_counter(CongestionLinks* self, long long CongestionLink::*field) {
  PyObject* out = PyList_New(static_cast<Py_ssize_t>(self->links->size()));
  if (out == nullptr) return nullptr;
  for (size_t i = 0; i < self->links->size(); ++i) {
    PyObject* value = PyLong_FromLongLong((*self->links)[i].*field);
    if (value == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyList_SET_ITEM(out, i, value);
  }
  return out;
}

static PyObject* CongestionLinks_get_bytes(CongestionLinks* self, void*) {
  return link_counter(self, &CongestionLink::bytes);
}
static PyObject* CongestionLinks_get_busy(CongestionLinks* self, void*) {
  return link_counter(self, &CongestionLink::busy_ns);
}
static PyObject* CongestionLinks_get_max_queue(CongestionLinks* self, void*) {
  return link_counter(self, &CongestionLink::max_queue);
}

static PyMethodDef CongestionLinks_methods[] = {
    {"send", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(CongestionLinks_send)),
     METH_FASTCALL | METH_KEYWORDS,
     "send(src, dst, size_bytes, on_delivered, arg=None, *, tag=0): on_delivered(arg) when the message has "
     "crossed its route."},
    {nullptr, nullptr, 0, nullptr}};

static PyMemberDef CongestionLinks_members[] = {
    {"messages", T_LONGLONG, offsetof(CongestionLinks, messages), READONLY, "messages sent"},
    {nullptr, 0, 0, 0, nullptr}};

static PyObject* CongestionLinks_get_native_send(CongestionLinks* self, void*);

static PyGetSetDef CongestionLinks_getset[] = {
    {"native_send", reinterpret_cast<getter>(CongestionLinks_get_native_send), nullptr,
     "the model's send for the kernel's matcher (a capsule astra.native_send; docs/plugins.md)", nullptr},
    {"link_bytes", reinterpret_cast<getter>(CongestionLinks_get_bytes), nullptr, "bytes that crossed each link",
     nullptr},
    {"link_busy_ns", reinterpret_cast<getter>(CongestionLinks_get_busy), nullptr, "ns each link transmitted",
     nullptr},
    {"max_queue", reinterpret_cast<getter>(CongestionLinks_get_max_queue), nullptr,
     "the most messages that waited for each link", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

static void init_congestion_links_type() {
  PyTypeObject& t = CongestionLinksType;
  t.tp_name = "_astra_kernel.CongestionLinks";
  t.tp_basicsize = sizeof(CongestionLinks);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  t.tp_doc =
      "CongestionLinks(events, route, bytes_per_ns, latency_ns, route_buckets=0): upstream's congestion-aware "
      "analytical links (store and forward, one message at a time per link, FIFO) on the EventQueue events; "
      "route(src, dst, tag) gives a message's link ids; with route_buckets > 0, route(src, dst, bucket) gives "
      "those of flow bucket flow_hash(src, dst, tag) % route_buckets, asked for once.";
  t.tp_new = CongestionLinks_new;
  t.tp_init = reinterpret_cast<initproc>(CongestionLinks_init);
  t.tp_dealloc = reinterpret_cast<destructor>(CongestionLinks_dealloc);
  t.tp_traverse = reinterpret_cast<traverseproc>(CongestionLinks_traverse);
  t.tp_clear = reinterpret_cast<inquiry>(CongestionLinks_clear);
  t.tp_methods = CongestionLinks_methods;
  t.tp_members = CongestionLinks_members;
  t.tp_getset = CongestionLinks_getset;
}

// ---------------------------------------------------------------------------------
// The C API of compiled network models (docs/plugins.md, "A compiled network model").
// A backend offers ``native_send``, a capsule "astra.native_send" holding an
// AstraNativeSend; the matcher then hands it each message with a token, which the
// model delivers (exactly once) through the kernel's API, a capsule
// "_astra_kernel.C_API" holding an AstraKernelApi. The kernel's own models use it too.

static_assert(sizeof(Call) <= sizeof(AstraToken), "a token holds a call");

static inline AstraToken token_of(const Call& call) {
  AstraToken token;
  memset(&token, 0, sizeof token);
  memcpy(&token, &call, sizeof call);
  return token;
}

static inline Call call_of(const AstraToken& token) {
  Call call;
  memcpy(&call, &token, sizeof call);
  return call;
}

static EventQueue* api_queue(PyObject* events) {
  if (events == nullptr || !PyObject_TypeCheck(events, &EventQueueType)) {
    PyErr_SetString(PyExc_TypeError, "a compiled model's events must be the kernel's EventQueue");
    return nullptr;
  }
  return reinterpret_cast<EventQueue*>(events);
}

static double api_now(PyObject* events) {
  EventQueue* q = api_queue(events);
  return q == nullptr ? -1.0 : q->now;
}

static int api_schedule(PyObject* events, double delay_ns, int integral, AstraStepFn fn, void* ctx, long long arg) {
  EventQueue* q = api_queue(events);
  if (q == nullptr) return -1;
  if (!(delay_ns >= 0 && delay_ns < INFINITY)) {
    PyErr_Format(PyExc_ValueError, "a compiled model scheduled a delay of %R ns", PyFloat_FromDouble(delay_ns));
    return -1;
  }
  Call c{CALL_C_FN, reinterpret_cast<PyObject*>(reinterpret_cast<void*>(fn)), reinterpret_cast<PyObject*>(ctx), {0}};
  c.v.i = arg;
  push_call(q, q->now + delay_ns, integral && q->now_integral, c);
  return 0;
}

static int api_deliver(AstraToken token) {
  Call c = call_of(token);
  bool ok = fire(c);
  release(c);
  return ok ? 0 : -1;
}

static int api_deliver_after(PyObject* events, double delay_ns, int integral, AstraToken token) {
  EventQueue* q = api_queue(events);
  Call c = call_of(token);
  if (q == nullptr || !(delay_ns >= 0 && delay_ns < INFINITY)) {
    if (q != nullptr) PyErr_SetString(PyExc_ValueError, "a compiled model delivered with a bad delay");
    release(c);
    return -1;
  }
  push_call(q, q->now + delay_ns, integral && q->now_integral, c);
  return 0;
}

static void api_discard(AstraToken token) {
  Call c = call_of(token);
  release(c);
}

static AstraKernelApi kernel_api = {1, api_now, api_schedule, api_deliver, api_deliver_after, api_discard};

// The kernel's own models through the same interface.
static int analytical_native_send(void* model, long long src, long long dst, long long size, long long,
                                  AstraToken token) {
  return analytical_send(reinterpret_cast<AnalyticalLinks*>(model), src, dst, size, call_of(token)) ? 0 : -1;
}

static int congestion_native_send(void* model, long long src, long long dst, long long size, long long tag,
                                  AstraToken token) {
  return congestion_send(reinterpret_cast<CongestionLinks*>(model), src, dst, size, tag, call_of(token)) ? 0 : -1;
}

static PyObject* native_send_capsule(void* model, int (*send)(void*, long long, long long, long long, long long,
                                                              AstraToken)) {
  AstraNativeSend* native = new AstraNativeSend{send, model};
  PyObject* capsule = PyCapsule_New(native, "astra.native_send", [](PyObject* c) {
    delete reinterpret_cast<AstraNativeSend*>(PyCapsule_GetPointer(c, "astra.native_send"));
  });
  if (capsule == nullptr) delete native;
  return capsule;
}

static PyObject* AnalyticalLinks_get_native_send(AnalyticalLinks* self, void*) {
  return native_send_capsule(self, analytical_native_send);
}

static PyObject* CongestionLinks_get_native_send(CongestionLinks* self, void*) {
  return native_send_capsule(self, congestion_native_send);
}

// ---------------------------------------------------------------------------------
// MessageMatcher: sends meet receives (upstream analytical CallbackTracker). A
// message is keyed by (tag, src, dst, size) and its order among messages with that
// key: the k-th send matches the k-th receive. When a message arrives, the sender's
// callback runs, then the receiver's if its receive is posted; else the arrival is
// kept and a later receive completes after zero delay (upstream sim_recv).
//
// Per rank it keeps when at least one of its messages was on the network: from the
// send until arrival, for sender and receiver alike.
//
// With a ``symmetry`` (rank symmetry: representatives stand for classes of ranks) a
// message to ``dst`` is timed as sent, and is delivered to dst's representative as
// if from the sender translated the same way (astra_core.system.symmetry); a
// communicator group's chunk tag is translated with it.

struct MatchKey {
  int64_t tag, src, dst, size;
  bool operator==(const MatchKey& o) const { return tag == o.tag && src == o.src && dst == o.dst && size == o.size; }
};

struct MatchKeyHash {
  size_t operator()(const MatchKey& k) const {
    uint64_t h = mix64(static_cast<uint64_t>(k.tag) ^ (static_cast<uint64_t>(k.size) << 29));
    h = mix64(h ^ static_cast<uint64_t>(k.src) ^ (static_cast<uint64_t>(k.dst) << 32));
    return static_cast<size_t>(h);
  }
};

static const uint32_t NO_ENTRY = 0xFFFFFFFFu;

// The entries of one key that only one side has reached: a list through MatchEntry::next.
struct Waiting {
  uint32_t head = NO_ENTRY, tail = NO_ENTRY;
};

struct MatchEntry {
  Call on_sent;      // the sender's callback (CALL_NONE: none)
  Call on_received;  // the receiver's (CALL_NONE: not posted yet)
  double not_before;  // NaN: none
  int64_t src, dst;   // the ranks whose in-flight time it counts in
  uint32_t next;      // the next entry waiting with the same key
  bool not_before_integral, sent, arrived, mirrored, in_map, in_network;
};

struct MessageMatcher {
  PyObject_HEAD
  Clock clock;
  PyObject* backend;      // owned
  PyObject* send;         // owned: backend.send
  PyObject* native;        // owned: the backend's native_send capsule, or nullptr
  AstraNativeSend* native_send;  // its contents
  PyObject* symmetry;     // owned, or nullptr
  FlatMap<MatchKey, Waiting, MatchKeyHash>* waiting;
  std::vector<MatchEntry>* entries;
  std::vector<uint32_t>* free_entries;
  std::vector<int64_t>* busy;
  std::vector<double>* since;
  std::vector<std::vector<double>>* logs;
  std::unordered_map<int64_t, std::pair<int64_t, PyObject*>>* to_rep;  // dst -> (rep, delta), delta owned
  long long messages;
  long long bytes;
  PyObject* weakrefs;
};

static PyTypeObject MessageMatcherType = {PyVarObject_HEAD_INIT(nullptr, 0)};

static uint32_t new_entry(MessageMatcher* m, bool sending) {
  uint32_t i;
  if (!m->free_entries->empty()) {
    i = m->free_entries->back();
    m->free_entries->pop_back();
  } else {
    i = static_cast<uint32_t>(m->entries->size());
    m->entries->emplace_back();
  }
  MatchEntry& e = (*m->entries)[i];
  e.on_sent = Call{CALL_NONE, nullptr, nullptr, {0}};
  e.on_received = Call{CALL_NONE, nullptr, nullptr, {0}};
  e.not_before = NAN;
  e.src = e.dst = 0;
  e.next = NO_ENTRY;
  e.sent = sending;
  e.arrived = e.mirrored = e.in_network = false;
  e.in_map = true;
  return i;
}

static void free_entry_if_done(MessageMatcher* m, uint32_t i) {
  MatchEntry& e = (*m->entries)[i];
  if (e.in_map || e.in_network) return;
  release(e.on_sent);
  release(e.on_received);
  m->free_entries->push_back(i);
}

// The entry of the next send (``sending``) or receive with ``key``: the oldest one
// only the other side has reached, else a new one that waits.
static uint32_t match_entry(MessageMatcher* m, const MatchKey& key, bool sending) {
  Waiting* waiting = m->waiting->find(key);
  if (waiting != nullptr) {
    uint32_t head = waiting->head;
    MatchEntry& first = (*m->entries)[head];
    if (first.sent != sending) {
      if (first.next == NO_ENTRY) {
        m->waiting->erase(key);
      } else {
        waiting->head = first.next;
      }
      first.next = NO_ENTRY;
      first.in_map = false;
      return head;
    }
    uint32_t i = new_entry(m, sending);  // the pool may move; the map does not
    (*m->entries)[waiting->tail].next = i;
    waiting->tail = i;
    return i;
  }
  uint32_t i = new_entry(m, sending);
  m->waiting->insert(key, Waiting{i, i});
  return i;
}

static bool took_off(MessageMatcher* m, int64_t src, int64_t dst) {
  std::vector<int64_t>& busy = *m->busy;
  if (src < 0 || dst < 0 || src >= static_cast<int64_t>(busy.size()) || dst >= static_cast<int64_t>(busy.size())) {
    PyErr_Format(PyExc_IndexError, "message between ranks %lld and %lld: the run has ranks 0 .. %lld",
                 static_cast<long long>(src), static_cast<long long>(dst), static_cast<long long>(busy.size()) - 1);
    return false;
  }
  for (int64_t r : {src, dst}) {
    if (busy[r]++ == 0) {
      double t;
      bool integral;
      if (!m->clock.now(&t, &integral)) return false;
      (*m->since)[r] = t;
    }
  }
  return true;
}

static bool close_flight(MessageMatcher* m, int64_t rank) {
  if (--(*m->busy)[rank] != 0) return true;
  double now;
  bool integral;
  if (!m->clock.now(&now, &integral)) return false;
  std::vector<double>& log = (*m->logs)[rank];
  if (!log.empty() && log.back() == (*m->since)[rank]) {
    log.back() = now;
    return true;
  }
  log.push_back((*m->since)[rank]);
  log.push_back(now);
  return true;
}

// Hands the message of entry ``i`` to the backend.
static bool transmit(MessageMatcher* m, int64_t src, int64_t dst, int64_t size, int64_t tag, uint32_t i) {
  MatchEntry& e = (*m->entries)[i];
  e.in_network = true;
  if (m->native_send != nullptr)
    return m->native_send->send(m->native_send->model, src, dst, size, tag,
                                token_of(kernel_call(CALL_ARRIVED, reinterpret_cast<PyObject*>(m), i))) == 0;
  PyObject* callable = as_callable(kernel_call(CALL_ARRIVED, reinterpret_cast<PyObject*>(m), i));
  if (callable == nullptr) return false;
  PyObject* r = nullptr;
  PyObject* s = PyLong_FromLongLong(src);
  PyObject* d = PyLong_FromLongLong(dst);
  PyObject* n = PyLong_FromLongLong(size);
  PyObject* t = PyLong_FromLongLong(tag);
  PyObject* kw = t == nullptr ? nullptr : Py_BuildValue("(s)", "tag");
  if (s && d && n && t && kw) {
    PyObject* call_args[6] = {s, d, n, callable, Py_None, t};
    r = PyObject_Vectorcall(m->send, call_args, 5, kw);
  }
  Py_XDECREF(s);
  Py_XDECREF(d);
  Py_XDECREF(n);
  Py_XDECREF(t);
  Py_XDECREF(kw);
  Py_DECREF(callable);
  if (r == nullptr) return false;
  Py_DECREF(r);
  return true;
}

// A rank translated by a symmetry's delta (Python calls: symmetric runs are small).
static bool shift_rank(MessageMatcher* m, int64_t rank, PyObject* delta, int64_t* out) {
  PyObject* r = PyObject_CallMethod(m->symmetry, "shift", "LO", static_cast<long long>(rank), delta);
  if (r == nullptr) return false;
  *out = PyLong_AsLongLong(r);
  Py_DECREF(r);
  return !(*out == -1 && PyErr_Occurred());
}

// Sends ``size`` bytes now; ``on_sent`` (references move here) runs when they arrive.
static bool matcher_send(MessageMatcher* m, int64_t src, int64_t dst, int64_t size, int64_t tag, const Call& on_sent,
                         bool collective, double not_before, bool not_before_integral) {
  if (m->symmetry == nullptr) {
    uint32_t i = match_entry(m, MatchKey{tag, src, dst, size}, true);
    MatchEntry& e = (*m->entries)[i];
    e.on_sent = on_sent;
    e.sent = true;
    e.not_before = not_before;
    e.not_before_integral = not_before_integral;
    e.src = src;
    e.dst = dst;
    ++m->messages;
    m->bytes += size;
    if (!took_off(m, src, dst)) return false;
    return transmit(m, src, dst, size, tag, i);
  }
  Call held = on_sent;
  auto found = m->to_rep->find(dst);
  if (found == m->to_rep->end()) {
    PyObject* r = PyObject_CallMethod(m->symmetry, "to_representative", "L", static_cast<long long>(dst));
    long long rep;
    PyObject* delta;
    if (r == nullptr || !PyArg_ParseTuple(r, "LO", &rep, &delta)) {
      Py_XDECREF(r);
      release(held);
      return false;
    }
    Py_INCREF(delta);
    Py_DECREF(r);
    found = m->to_rep->emplace(dst, std::make_pair(static_cast<int64_t>(rep), delta)).first;
  }
  int64_t rep = found->second.first;
  PyObject* delta = found->second.second;
  if (collective) {
    PyObject* r = PyObject_CallMethod(m->symmetry, "shift_tag", "LO", static_cast<long long>(tag), delta);
    if (r == nullptr) {
      release(held);
      return false;
    }
    tag = PyLong_AsLongLong(r);
    Py_DECREF(r);
  }
  int64_t shifted;
  if (!shift_rank(m, src, delta, &shifted)) {
    release(held);
    return false;
  }
  uint32_t i = match_entry(m, MatchKey{tag, shifted, rep, size}, true);
  MatchEntry& e = (*m->entries)[i];
  e.sent = true;
  e.mirrored = true;
  e.on_sent = held;
  e.not_before = not_before;
  e.not_before_integral = not_before_integral;
  e.src = src;
  e.dst = rep;
  ++m->messages;
  m->bytes += size;
  if (!took_off(m, src, rep)) return false;
  return transmit(m, src, dst, size, tag, i);
}

// Posts a receive; ``on_received`` (references move here) runs when the message is in.
static bool matcher_recv(MessageMatcher* m, int64_t src, int64_t dst, int64_t size, int64_t tag,
                         const Call& on_received) {
  uint32_t i = match_entry(m, MatchKey{tag, src, dst, size}, false);
  MatchEntry& e = (*m->entries)[i];
  if (e.arrived) {
    bool ok = m->clock.schedule(0, true, on_received);
    free_entry_if_done(m, i);
    return ok;
  }
  e.on_received = on_received;
  return true;
}

static bool matcher_arrived(MessageMatcher* m, uint32_t i) {
  MatchEntry* e = &(*m->entries)[i];
  if (!std::isnan(e->not_before)) {
    double now;
    bool integral;
    if (!m->clock.now(&now, &integral)) return false;
    double wait = e->not_before - now;
    e->not_before = NAN;
    if (wait > 0)
      return m->clock.schedule(wait, integral && e->not_before_integral,
                               kernel_call(CALL_ARRIVED, reinterpret_cast<PyObject*>(m), i));
  }
  bool ok = true;
  if (e->mirrored && e->on_sent.kind != CALL_NONE) {  // a mirrored message: the sender first
    Call c = e->on_sent;
    e->on_sent = Call{CALL_NONE, nullptr, nullptr, {0}};
    ok = fire(c);
    release(c);
    e = &(*m->entries)[i];  // the callback may have grown the pool
    if (!ok) return false;
  }
  if (!close_flight(m, e->src) || !close_flight(m, e->dst)) return false;
  if (e->on_sent.kind != CALL_NONE) {
    Call c = e->on_sent;
    e->on_sent = Call{CALL_NONE, nullptr, nullptr, {0}};
    ok = fire(c);
    release(c);
    e = &(*m->entries)[i];
    if (!ok) return false;
  }
  e->in_network = false;
  if (e->on_received.kind != CALL_NONE) {
    Call c = e->on_received;
    e->on_received = Call{CALL_NONE, nullptr, nullptr, {0}};
    free_entry_if_done(m, i);
    ok = fire(c);
    release(c);
    return ok;
  }
  e->arrived = true;
  free_entry_if_done(m, i);
  return true;
}

static int MessageMatcher_init(MessageMatcher* m, PyObject* args, PyObject* kwds) {
  static const char* names[] = {"backend", "clock", "npus", "symmetry", nullptr};
  PyObject *backend, *clock, *symmetry = Py_None;
  Py_ssize_t npus;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOn|O", const_cast<char**>(names), &backend, &clock, &npus,
                                   &symmetry))
    return -1;
  PyObject* send = PyObject_GetAttrString(backend, "send");
  if (send == nullptr) return -1;
  Py_INCREF(backend);
  Py_XSETREF(m->backend, backend);
  Py_XSETREF(m->send, send);
  m->clock.set(clock);
  Py_CLEAR(m->native);
  m->native_send = nullptr;
  if (m->clock.queue != nullptr) {  // a compiled model on the kernel's clock: no Python call per message
    PyObject* native = PyObject_GetAttrString(backend, "native_send");
    PyObject* events = native == nullptr ? nullptr : PyObject_GetAttrString(backend, "events");
    if (events == reinterpret_cast<PyObject*>(m->clock.queue) && PyCapsule_IsValid(native, "astra.native_send")) {
      m->native = native;
      m->native_send = reinterpret_cast<AstraNativeSend*>(PyCapsule_GetPointer(native, "astra.native_send"));
      native = nullptr;
    }
    Py_XDECREF(native);
    Py_XDECREF(events);
    PyErr_Clear();  // no native_send or events: the Python path
  }
  if (symmetry != Py_None) {
    Py_INCREF(symmetry);
    Py_XSETREF(m->symmetry, symmetry);
  }
  m->busy->assign(npus, 0);
  m->since->assign(npus, 0.0);
  m->logs->assign(npus, std::vector<double>());
  return 0;
}

static PyObject* MessageMatcher_new(PyTypeObject* type, PyObject*, PyObject*) {
  MessageMatcher* m = reinterpret_cast<MessageMatcher*>(type->tp_alloc(type, 0));
  if (m == nullptr) return nullptr;
  new (&m->clock) Clock();
  m->waiting = new FlatMap<MatchKey, Waiting, MatchKeyHash>();
  m->entries = new std::vector<MatchEntry>();
  m->free_entries = new std::vector<uint32_t>();
  m->busy = new std::vector<int64_t>();
  m->since = new std::vector<double>();
  m->logs = new std::vector<std::vector<double>>();
  m->to_rep = new std::unordered_map<int64_t, std::pair<int64_t, PyObject*>>();
  return reinterpret_cast<PyObject*>(m);
}

static int MessageMatcher_traverse(MessageMatcher* m, visitproc visit, void* arg) {
  Py_VISIT(m->clock.object);
  Py_VISIT(m->backend);
  Py_VISIT(m->send);
  Py_VISIT(m->symmetry);
  Py_VISIT(m->native);
  if (m->entries != nullptr) {
    for (MatchEntry& e : *m->entries) {
      VISIT_CALL(e.on_sent);
      VISIT_CALL(e.on_received);
    }
  }
  if (m->to_rep != nullptr)
    for (auto& entry : *m->to_rep) Py_VISIT(entry.second.second);
  return 0;
}

static int MessageMatcher_clear(MessageMatcher* m) {
  if (m->entries != nullptr) {
    for (MatchEntry& e : *m->entries) {
      release(e.on_sent);
      release(e.on_received);
    }
  }
  if (m->to_rep != nullptr) {
    for (auto& entry : *m->to_rep) Py_CLEAR(entry.second.second);
    m->to_rep->clear();
  }
  m->clock.queue = nullptr;
  Py_CLEAR(m->clock.object);
  Py_CLEAR(m->backend);
  Py_CLEAR(m->send);
  Py_CLEAR(m->symmetry);
  Py_CLEAR(m->native);
  m->native_send = nullptr;
  return 0;
}

static void MessageMatcher_dealloc(MessageMatcher* m) {
  PyObject_GC_UnTrack(m);
  if (m->weakrefs != nullptr) PyObject_ClearWeakRefs(reinterpret_cast<PyObject*>(m));
  MessageMatcher_clear(m);
  delete m->waiting;
  delete m->entries;
  delete m->free_entries;
  delete m->busy;
  delete m->since;
  delete m->logs;
  delete m->to_rep;
  m->clock.~Clock();
  Py_TYPE(m)->tp_free(reinterpret_cast<PyObject*>(m));  // a Python subclass's type: its dealloc lets go
}

// send(src, dst, size, tag, on_sent, arg, collective=False, not_before_ns=None)
static PyObject* MessageMatcher_send(MessageMatcher* m, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* bound[8];
  static const char* const names[] = {"src", "dst", "size", "tag", "on_sent", "arg", "collective", "not_before_ns"};
  if (!bind_args("send", names, 8, 6, args, nargs, kwnames, bound)) return nullptr;
  int64_t src, dst, size, tag;
  if (!read_int64(bound[0], &src) || !read_int64(bound[1], &dst) || !read_int64(bound[2], &size) ||
      !read_int64(bound[3], &tag))
    return nullptr;
  int collective = PyObject_IsTrue(bound[6]);
  if (collective < 0) return nullptr;
  double not_before = NAN;
  bool integral = false;
  if (bound[7] != Py_None && !read_number(bound[7], &not_before, &integral)) return nullptr;
  Call on_sent = bound[4] == Py_None ? Call{CALL_NONE, nullptr, nullptr, {0}} : py_call(bound[4], bound[5]);
  if (!matcher_send(m, src, dst, size, tag, on_sent, collective != 0, not_before, integral)) return nullptr;
  Py_RETURN_NONE;
}

// recv(src, dst, size, tag, on_received, arg)
static PyObject* MessageMatcher_recv(MessageMatcher* m, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* bound[6];
  static const char* const names[] = {"src", "dst", "size", "tag", "on_received", "arg"};
  if (!bind_args("recv", names, 6, 6, args, nargs, kwnames, bound)) return nullptr;
  int64_t src, dst, size, tag;
  if (!read_int64(bound[0], &src) || !read_int64(bound[1], &dst) || !read_int64(bound[2], &size) ||
      !read_int64(bound[3], &tag))
    return nullptr;
  if (!matcher_recv(m, src, dst, size, tag, py_call(bound[4], bound[5]))) return nullptr;
  Py_RETURN_NONE;
}

static PyObject* MessageMatcher_arrived_unreceived(MessageMatcher* m, PyObject*) {
  PyObject* out = PyList_New(0);
  if (out == nullptr) return nullptr;
  bool ok = true;
  m->waiting->for_each([&](const MatchKey& k, Waiting& waiting) {
    for (uint32_t i = waiting.head; ok && i != NO_ENTRY; i = (*m->entries)[i].next) {
      const MatchEntry& e = (*m->entries)[i];
      if (!(e.sent && e.arrived)) continue;
      PyObject* item = Py_BuildValue("(LLLL)", static_cast<long long>(k.src), static_cast<long long>(k.dst),
                                     static_cast<long long>(k.tag), static_cast<long long>(k.size));
      ok = item != nullptr && PyList_Append(out, item) == 0;
      Py_XDECREF(item);
    }
  });
  if (!ok) {
    Py_DECREF(out);
    return nullptr;
  }
  return out;
}

static PyObject* MessageMatcher_get_delivered(MessageMatcher* m, void*) {
  long long in_flight = 0;
  for (int64_t b : *m->busy) in_flight += b;
  return PyLong_FromLongLong(m->messages - in_flight / 2);
}

static PyObject* array_type = nullptr;  // array.array

static PyObject* MessageMatcher_get_in_flight(MessageMatcher* m, void*) {
  PyObject* out = PyDict_New();
  if (out == nullptr) return nullptr;
  for (size_t rank = 0; rank < m->logs->size(); ++rank) {
    const std::vector<double>& log = (*m->logs)[rank];
    if (log.empty()) continue;
    PyObject* bytes = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(log.data()),
                                                static_cast<Py_ssize_t>(log.size() * sizeof(double)));
    PyObject* array = bytes == nullptr ? nullptr : PyObject_CallFunction(array_type, "sO", "d", bytes);
    Py_XDECREF(bytes);
    PyObject* key = PyLong_FromSize_t(rank);
    if (array == nullptr || key == nullptr || PyDict_SetItem(out, key, array) < 0) {
      Py_XDECREF(array);
      Py_XDECREF(key);
      Py_DECREF(out);
      return nullptr;
    }
    Py_DECREF(array);
    Py_DECREF(key);
  }
  return out;
}

static PyMethodDef MessageMatcher_methods[] = {
    {"send", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(MessageMatcher_send)),
     METH_FASTCALL | METH_KEYWORDS,
     "send(src, dst, size, tag, on_sent, arg, collective=False, not_before_ns=None): send size bytes now; "
     "on_sent(arg) when they arrive (None: nothing); not_before_ns: arrival at both ends no earlier."},
    {"recv", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(MessageMatcher_recv)),
     METH_FASTCALL | METH_KEYWORDS,
     "recv(src, dst, size, tag, on_received, arg): on_received(arg) when the matching message is in."},
    {"arrived_unreceived", reinterpret_cast<PyCFunction>(MessageMatcher_arrived_unreceived), METH_NOARGS,
     "(src, dst, tag, bytes) of messages that arrived and no receive matched (representatives' frame)."},
    {nullptr, nullptr, 0, nullptr}};

static PyMemberDef MessageMatcher_members[] = {
    {"messages", T_LONGLONG, offsetof(MessageMatcher, messages), READONLY, "messages sent"},
    {"bytes", T_LONGLONG, offsetof(MessageMatcher, bytes), READONLY, "bytes sent"},
    {"backend", T_OBJECT, offsetof(MessageMatcher, backend), READONLY, "the network backend"},
    {"symmetry", T_OBJECT, offsetof(MessageMatcher, symmetry), READONLY, "the rank symmetry, or None"},
    {nullptr, 0, 0, 0, nullptr}};

static PyGetSetDef MessageMatcher_getset[] = {
    {"delivered", reinterpret_cast<getter>(MessageMatcher_get_delivered), nullptr,
     "messages sent so far that have arrived", nullptr},
    {"in_flight", reinterpret_cast<getter>(MessageMatcher_get_in_flight), nullptr,
     "rank -> array('d') of start, end, ... (ns) when at least one of its messages was in flight", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

static void init_message_matcher_type() {
  PyTypeObject& t = MessageMatcherType;
  t.tp_name = "_astra_kernel.MessageMatcher";
  t.tp_basicsize = sizeof(MessageMatcher);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE;
  t.tp_doc =
      "MessageMatcher(backend, clock, npus, symmetry=None): sends meet receives (the k-th send of a key meets "
      "the k-th receive) and go to the backend; see astra_core.system.p2p.";
  t.tp_new = MessageMatcher_new;
  t.tp_init = reinterpret_cast<initproc>(MessageMatcher_init);
  t.tp_dealloc = reinterpret_cast<destructor>(MessageMatcher_dealloc);
  t.tp_traverse = reinterpret_cast<traverseproc>(MessageMatcher_traverse);
  t.tp_clear = reinterpret_cast<inquiry>(MessageMatcher_clear);
  t.tp_methods = MessageMatcher_methods;
  t.tp_members = MessageMatcher_members;
  t.tp_getset = MessageMatcher_getset;
  t.tp_weaklistoffset = offsetof(MessageMatcher, weakrefs);
}
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
  RankEvents* events;        // owned, bound at start
  MessageMatcher* matcher;   // owned, bound at start
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

static bool phase_exit(WindowedPhase* p) {
  PyObject* stream = p->stream;
  Py_INCREF(stream);
  bool ok = phase_done(stream);
  Py_DECREF(stream);
  return ok;
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
  if (p->sent == n && p->free == p->window) return phase_exit(p);
  return true;
}

// Binds the phase to its stream's rank (events and matcher) and tag; false with an error.
static bool bind_to_stream(PyObject* stream, RankEvents** events_out, MessageMatcher** matcher_out, long long* id) {
  if (stream == nullptr || stream == Py_None) {
    PyErr_SetString(PyExc_RuntimeError, "a phase started before its stream was bound");
    return false;
  }
  PyObject* owner = PyObject_GetAttrString(stream, "owner");
  if (owner == nullptr) return false;
  PyObject* events = PyObject_GetAttrString(owner, "events");
  PyObject* matcher = events == nullptr ? nullptr : PyObject_GetAttrString(owner, "matcher");
  PyObject* tag = matcher == nullptr ? nullptr : PyObject_GetAttrString(stream, "stream_id");
  Py_DECREF(owner);
  bool ok = tag != nullptr;
  if (ok && (!PyObject_TypeCheck(events, &RankEventsType) || !PyObject_TypeCheck(matcher, &MessageMatcherType))) {
    PyErr_SetString(PyExc_TypeError, "a kernel phase runs on a rank whose events and matcher are the kernel's");
    ok = false;
  }
  if (ok) {
    *id = PyLong_AsLongLong(tag);
    ok = !(*id == -1 && PyErr_Occurred());
  }
  if (ok) {
    Py_XSETREF(*events_out, reinterpret_cast<RankEvents*>(events));
    Py_XSETREF(*matcher_out, reinterpret_cast<MessageMatcher*>(matcher));
    events = matcher = nullptr;
  }
  Py_XDECREF(events);
  Py_XDECREF(matcher);
  Py_XDECREF(tag);
  return ok;
}

static bool phase_start(WindowedPhase* p) {
  if (!bind_to_stream(p->stream, &p->events, &p->matcher, &p->tag)) return false;
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
  Py_VISIT(p->events);
  Py_VISIT(p->matcher);
  return 0;
}

static int WindowedPhase_clear(WindowedPhase* p) {
  Py_CLEAR(p->comm_type);
  Py_CLEAR(p->stream);
  Py_CLEAR(p->messages);
  Py_CLEAR(p->packets);
  Py_CLEAR(p->events);
  Py_CLEAR(p->matcher);
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
     "STREAM_INIT: the phase got its queue slot; its first window of packets go through local memory."},
    {"received", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(WindowedPhase_received)),
     METH_FASTCALL, "PACKET_RECEIVED: a message this phase posted a receive for arrived (any argument ignored)."},
    {"general", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(WindowedPhase_general)),
     METH_FASTCALL, "GENERAL: a packet is through local memory (any argument ignored)."},
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
      "WindowedPhase(comm_type, rank, data_size, messages, window, packets, final_data_size, barrier=None, "
      "fast=False): one rank's phase of one chunk, run from its plan (astra_core.system.collectives.plan).";
  t.tp_new = WindowedPhase_new;
  t.tp_init = reinterpret_cast<initproc>(WindowedPhase_init);
  t.tp_dealloc = reinterpret_cast<destructor>(WindowedPhase_dealloc);
  t.tp_traverse = reinterpret_cast<traverseproc>(WindowedPhase_traverse);
  t.tp_clear = reinterpret_cast<inquiry>(WindowedPhase_clear);
  t.tp_methods = WindowedPhase_methods;
  t.tp_members = WindowedPhase_members;
}

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
  PyObject* stream = p->stream;
  Py_INCREF(stream);
  bool ok = phase_done(stream);
  Py_DECREF(stream);
  return ok;
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

// ---------------------------------------------------------------------------------
// The dispatch of a call

static bool fire(const Call& c) {
  switch (c.kind) {
    case CALL_PY: {
      PyObject* r = PyObject_CallOneArg(c.obj, c.arg);
      if (r == nullptr) return false;
      Py_DECREF(r);
      return true;
    }
    case CALL_BUCKET:
      return call_bucket(reinterpret_cast<RankEvents*>(c.obj), c.v.d);
    case CALL_ARRIVED:
      return matcher_arrived(reinterpret_cast<MessageMatcher*>(c.obj), static_cast<uint32_t>(c.v.i));
    case CALL_RECEIVED:
      return phase_received(reinterpret_cast<WindowedPhase*>(c.obj));
    case CALL_GENERAL:
      return phase_general(reinterpret_cast<WindowedPhase*>(c.obj));
    case CALL_REDUCE:
      return phase_reduce(reinterpret_cast<WindowedPhase*>(c.obj), c.v.i);
    case CALL_HOP_ARRIVED:
      return congestion_hop_arrived(reinterpret_cast<CongestionLinks*>(c.obj), static_cast<uint32_t>(c.v.i));
    case CALL_NCCL_SENT:
      return nccl_sent(reinterpret_cast<NcclPhase*>(c.obj), c.v.i);
    case CALL_NCCL_RECEIVED:
      return nccl_received(reinterpret_cast<NcclPhase*>(c.obj), c.v.i);
    case CALL_NCCL_FLOOR:
      return nccl_floor(reinterpret_cast<NcclPhase*>(c.obj));
    case CALL_LINK_FREE:
      return congestion_link_free(reinterpret_cast<CongestionLinks*>(c.obj), static_cast<Py_ssize_t>(c.v.i));
    case CALL_C_FN:
      return reinterpret_cast<AstraStepFn>(reinterpret_cast<void*>(c.obj))(reinterpret_cast<void*>(c.arg), c.v.i) == 0;
    default:
      return true;
  }
}

// ---------------------------------------------------------------------------------
// Module

static PyMethodDef kernel_functions[] = {
    {"flow_hash", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(kernel_flow_hash)), METH_FASTCALL,
     "flow_hash(src, dst, tag): deterministic 32-bit hash of a flow (not Python's salted hash)."},
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
  init_congestion_links_type();
  init_message_matcher_type();
  init_windowed_phase_type();
  init_nccl_phase_type();
  struct {
    const char* name;
    PyTypeObject* type;
  } types[] = {{"EventQueue", &EventQueueType},         {"KernelCall", &KernelCallType},
               {"RankEvents", &RankEventsType},
               {"Stream", &StreamType},         {"AnalyticalLinks", &AnalyticalLinksType},
               {"CongestionLinks", &CongestionLinksType},
               {"MessageMatcher", &MessageMatcherType}, {"WindowedPhase", &WindowedPhaseType},
               {"NcclPhase", &NcclPhaseType}};
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
  return module;
}
