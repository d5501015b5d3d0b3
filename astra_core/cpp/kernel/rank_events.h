// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

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
  Py_VISIT(self->clock.object.ptr());
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
  self->clock.object = py::object();
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
