// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

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
  BigVector<MatchEntry>* entries;
  std::vector<uint32_t>* free_entries;
  std::vector<int64_t>* busy;
  std::vector<double>* since;
  std::vector<std::vector<double>>* logs;  // per rank: intervals closed since in_flight was last read
  PyObject* flights;  // rank -> array('d'): the intervals in_flight has handed out (owned), or nullptr
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

// Records a send under ``key`` and hands it to the backend (to ``dst``); it counts in
// the in-flight time of ``src`` and ``flight_dst`` (the receiver, or its representative).
static bool post_send(MessageMatcher* m, const MatchKey& key, int64_t src, int64_t flight_dst, int64_t dst,
                      int64_t size, int64_t tag, const Call& on_sent, bool mirrored, double not_before,
                      bool not_before_integral) {
  uint32_t i = match_entry(m, key, true);
  MatchEntry& e = (*m->entries)[i];
  e.on_sent = on_sent;
  e.sent = true;
  e.mirrored = mirrored;
  e.not_before = not_before;
  e.not_before_integral = not_before_integral;
  e.src = src;
  e.dst = flight_dst;
  ++m->messages;
  m->bytes += size;
  if (!took_off(m, src, flight_dst)) return false;
  return transmit(m, src, dst, size, tag, i);
}

// Sends ``size`` bytes now; ``on_sent`` (references move here) runs when they arrive.
static bool matcher_send(MessageMatcher* m, int64_t src, int64_t dst, int64_t size, int64_t tag, const Call& on_sent,
                         bool collective, double not_before, bool not_before_integral) {
  if (m->symmetry == nullptr)
    return post_send(m, MatchKey{tag, src, dst, size}, src, dst, dst, size, tag, on_sent, false, not_before,
                     not_before_integral);
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
  return post_send(m, MatchKey{tag, shifted, rep, size}, src, rep, dst, size, tag, held, true, not_before,
                   not_before_integral);
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
  m->entries = new BigVector<MatchEntry>();
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
  Py_VISIT(m->flights);
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
  Py_CLEAR(m->flights);
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

// Moves ``log`` onto the end of ``array`` (joining a touching interval) and frees it.
static bool flush_log(std::vector<double>& log, PyObject* array) {
  size_t start = 0;
  Py_ssize_t n = PySequence_Size(array);
  if (n < 0) return false;
  if (n > 0) {
    PyObject* last = PySequence_GetItem(array, n - 1);
    if (last == nullptr) return false;
    bool touching = PyFloat_AsDouble(last) == log[0];
    Py_DECREF(last);
    if (touching) {  // the interval closed at the last read goes on
      PyObject* end = PyFloat_FromDouble(log[1]);
      if (end == nullptr || PySequence_SetItem(array, n - 1, end) < 0) {
        Py_XDECREF(end);
        return false;
      }
      Py_DECREF(end);
      start = 2;
    }
  }
  if (start < log.size()) {
    PyObject* view = PyMemoryView_FromMemory(reinterpret_cast<char*>(log.data() + start),
                                             static_cast<Py_ssize_t>((log.size() - start) * sizeof(double)),
                                             PyBUF_READ);
    PyObject* r = view == nullptr ? nullptr : PyObject_CallMethod(array, "frombytes", "O", view);
    Py_XDECREF(view);
    if (r == nullptr) return false;
    Py_DECREF(r);
  }
  std::vector<double>().swap(log);
  return true;
}

// The in-flight intervals per rank. The logs move into the arrays handed out (no copy
// kept: a run's last read costs no second copy of them), which later reads extend.
static PyObject* MessageMatcher_get_in_flight(MessageMatcher* m, void*) {
  if (m->flights == nullptr && (m->flights = PyDict_New()) == nullptr) return nullptr;
  for (size_t rank = 0; rank < m->logs->size(); ++rank) {
    std::vector<double>& log = (*m->logs)[rank];
    if (log.empty()) continue;
    PyObject* key = PyLong_FromSize_t(rank);
    if (key == nullptr) return nullptr;
    PyObject* array = PyDict_GetItemWithError(m->flights, key);  // borrowed
    if (array == nullptr) {
      array = PyErr_Occurred() ? nullptr : PyObject_CallFunction(array_type, "s", "d");
      if (array == nullptr || PyDict_SetItem(m->flights, key, array) < 0) {
        Py_XDECREF(array);
        Py_DECREF(key);
        return nullptr;
      }
      Py_DECREF(array);  // the dict holds it
    }
    Py_DECREF(key);
    if (!flush_log(log, array)) return nullptr;
  }
  return PyDict_Copy(m->flights);
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
