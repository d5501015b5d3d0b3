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

static PyTypeObject* matcher_type = nullptr;  // set by bind_message_matcher

struct MessageMatcher {
  Clock clock;
  py::object backend;
  py::object send;                        // backend.send
  py::object native = py::none();         // the backend's native_send capsule, or None
  AstraNativeSend* native_send = nullptr;  // its contents
  py::object symmetry;                    // None: none
  FlatMap<MatchKey, Waiting, MatchKeyHash> waiting;
  BigVector<MatchEntry> entries;
  std::vector<uint32_t> free_entries;
  std::vector<int64_t> busy;
  std::vector<double> since;
  std::vector<std::vector<double>> logs;  // per rank: intervals closed since in_flight was last read
  py::object flights;  // rank -> array('d'): the intervals in_flight has handed out (null: none yet)
  std::unordered_map<int64_t, std::pair<int64_t, py::object>> to_rep;  // dst -> (rep, delta)
  // (sender << 32 | receiver) -> the sender translated by the receiver's delta to its
  // representative: Symmetry.shift, a function of the two alone, asked once per pair
  std::unordered_map<uint64_t, int64_t> shifted;
  // A collective chunk's tag is its group's id times tag_base plus a count (0: not known,
  // every tag asked); (group << 32 | receiver) -> what Symmetry.shift_tag adds to the
  // tag, which depends on the group and the translation alone
  int64_t tag_base = 0;
  std::unordered_map<uint64_t, int64_t> tag_moves;
  long long messages = 0;
  long long bytes = 0;
  PyObject* self = nullptr;  // its Python object (borrowed), looked up once (python_self)

  // A compiled model on the kernel's clock (its native_send on the same queue) takes
  // messages with no Python call each.
  MessageMatcher(py::object backend_, const py::handle& clock_object, Py_ssize_t npus, py::object symmetry_)
      : backend(std::move(backend_)), symmetry(std::move(symmetry_)) {
    send = backend.attr("send");
    clock.set(clock_object.ptr());
    if (clock.queue != nullptr && py::hasattr(backend, "native_send") && py::hasattr(backend, "events")) {
      py::object capsule = backend.attr("native_send");
      if (backend.attr("events").ptr() == clock.object.ptr() &&
          PyCapsule_IsValid(capsule.ptr(), "astra.native_send")) {
        native_send = reinterpret_cast<AstraNativeSend*>(PyCapsule_GetPointer(capsule.ptr(), "astra.native_send"));
        native = std::move(capsule);
      }
    }
    if (!symmetry.is_none() && py::hasattr(symmetry, "tag_base")) tag_base = symmetry.attr("tag_base").cast<int64_t>();
    busy.assign(npus, 0);
    since.assign(npus, 0.0);
    logs.assign(npus, std::vector<double>());
  }

  ~MessageMatcher() { clear(); }  // the entries' calls hold references of their own

  int traverse(visitproc visit, void* arg) const {
    for (const py::object* o : {&clock.object, &backend, &send, &symmetry, &native, &flights}) Py_VISIT(o->ptr());
    for (const MatchEntry& e : entries) {
      VISIT_CALL(e.on_sent);
      VISIT_CALL(e.on_received);
    }
    for (const auto& entry : to_rep) Py_VISIT(entry.second.second.ptr());
    return 0;
  }

  void clear() {
    for (MatchEntry& e : entries) {
      release(e.on_sent);
      release(e.on_received);
    }
    to_rep.clear();
    shifted.clear();
    tag_moves.clear();
    clock.queue = nullptr;
    native_send = nullptr;
    for (py::object* o : {&clock.object, &backend, &send, &symmetry, &native, &flights}) *o = py::object();
  }
};

static uint32_t new_entry(MessageMatcher* m, bool sending) {
  uint32_t i;
  if (!m->free_entries.empty()) {
    i = m->free_entries.back();
    m->free_entries.pop_back();
  } else {
    i = static_cast<uint32_t>(m->entries.size());
    m->entries.emplace_back();
  }
  MatchEntry& e = m->entries[i];
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
  MatchEntry& e = m->entries[i];
  if (e.in_map || e.in_network) return;
  release(e.on_sent);
  release(e.on_received);
  m->free_entries.push_back(i);
}

// The entry of the next send (``sending``) or receive with ``key``: the oldest one
// only the other side has reached, else a new one that waits.
static uint32_t match_entry(MessageMatcher* m, const MatchKey& key, bool sending) {
  Waiting* waiting = m->waiting.find(key);
  if (waiting != nullptr) {
    uint32_t head = waiting->head;
    MatchEntry& first = m->entries[head];
    if (first.sent != sending) {
      if (first.next == NO_ENTRY) {
        m->waiting.erase(key);
      } else {
        waiting->head = first.next;
      }
      first.next = NO_ENTRY;
      first.in_map = false;
      return head;
    }
    uint32_t i = new_entry(m, sending);  // the pool may move; the map does not
    m->entries[waiting->tail].next = i;
    waiting->tail = i;
    return i;
  }
  uint32_t i = new_entry(m, sending);
  m->waiting.insert(key, Waiting{i, i});
  return i;
}

static bool took_off(MessageMatcher* m, int64_t src, int64_t dst) {
  std::vector<int64_t>& busy = m->busy;
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
      m->since[r] = t;
    }
  }
  return true;
}

static bool close_flight(MessageMatcher* m, int64_t rank) {
  if (--m->busy[rank] != 0) return true;
  double now;
  bool integral;
  if (!m->clock.now(&now, &integral)) return false;
  std::vector<double>& log = m->logs[rank];
  if (!log.empty() && log.back() == m->since[rank]) {
    log.back() = now;
    return true;
  }
  log.push_back(m->since[rank]);
  log.push_back(now);
  return true;
}

// Hands the message of entry ``i`` to the backend.
static bool transmit(MessageMatcher* m, int64_t src, int64_t dst, int64_t size, int64_t tag, uint32_t i) {
  MatchEntry& e = m->entries[i];
  e.in_network = true;
  Call arrived = bound_call(CALL_ARRIVED, python_self(m, m->self), m, i);
  if (m->native_send != nullptr)
    return m->native_send->send(m->native_send->model, src, dst, size, tag, token_of(arrived)) == 0;
  py::object callable = py::reinterpret_steal<py::object>(as_callable(arrived));
  if (!callable) return false;
  static PyObject* tag_name = Py_BuildValue("(s)", "tag");  // the keyword names, kept for the process
  py::object s = py::reinterpret_steal<py::object>(PyLong_FromLongLong(src));
  py::object d = py::reinterpret_steal<py::object>(PyLong_FromLongLong(dst));
  py::object n = py::reinterpret_steal<py::object>(PyLong_FromLongLong(size));
  py::object t = py::reinterpret_steal<py::object>(PyLong_FromLongLong(tag));
  if (!s || !d || !n || !t || tag_name == nullptr) return false;
  PyObject* call_args[6] = {s.ptr(), d.ptr(), n.ptr(), callable.ptr(), Py_None, t.ptr()};
  return py::reinterpret_steal<py::object>(PyObject_Vectorcall(m->send.ptr(), call_args, 5, tag_name)).ptr() != nullptr;
}

// A symmetry's answer as an int64 (Python calls: symmetric runs are small); false with an error set.
static bool symmetry_int(MessageMatcher* m, const char* method, int64_t value, PyObject* delta, int64_t* out) {
  py::object r = py::reinterpret_steal<py::object>(
      PyObject_CallMethod(m->symmetry.ptr(), method, "LO", static_cast<long long>(value), delta));
  if (!r) return false;
  *out = PyLong_AsLongLong(r.ptr());
  return !(*out == -1 && PyErr_Occurred());
}

// ``tag`` as seen from ``dst``'s representative (``delta`` takes ``dst`` there), asked of
// the symmetry once per group and receiver; false with an error set.
static bool shift_tag(MessageMatcher* m, int64_t& tag, int64_t dst, PyObject* delta) {
  if (m->tag_base <= 0 || tag < 0) return symmetry_int(m, "shift_tag", tag, delta, &tag);
  const uint64_t key = (static_cast<uint64_t>(tag / m->tag_base) << 32) | static_cast<uint32_t>(dst);
  auto known = m->tag_moves.find(key);
  if (known != m->tag_moves.end()) {
    tag += known->second;
    return true;
  }
  int64_t moved;
  if (!symmetry_int(m, "shift_tag", tag, delta, &moved)) return false;
  m->tag_moves.emplace(key, moved - tag);
  tag = moved;
  return true;
}

// Records a send under ``key`` and hands it to the backend (to ``dst``); it counts in
// the in-flight time of ``src`` and ``flight_dst`` (the receiver, or its representative).
static bool post_send(MessageMatcher* m, const MatchKey& key, int64_t src, int64_t flight_dst, int64_t dst,
                      int64_t size, int64_t tag, const Call& on_sent, bool mirrored, double not_before,
                      bool not_before_integral) {
  uint32_t i = match_entry(m, key, true);
  MatchEntry& e = m->entries[i];
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
  if (m->symmetry.is_none())
    return post_send(m, MatchKey{tag, src, dst, size}, src, dst, dst, size, tag, on_sent, false, not_before,
                     not_before_integral);
  Call held = on_sent;
  auto found = m->to_rep.find(dst);
  bool ok = python_ok([&] {
    if (found != m->to_rep.end()) return;
    py::tuple r = m->symmetry.attr("to_representative")(dst);
    found = m->to_rep.emplace(dst, std::make_pair(r[0].cast<int64_t>(), py::object(r[1]))).first;
  });
  if (ok && collective) ok = shift_tag(m, tag, dst, found->second.second.ptr());
  const uint64_t pair = (static_cast<uint64_t>(src) << 32) | static_cast<uint32_t>(dst);
  auto known = m->shifted.find(pair);
  int64_t shifted = 0;
  if (ok && known != m->shifted.end()) {
    shifted = known->second;
  } else if (ok && (ok = symmetry_int(m, "shift", src, found->second.second.ptr(), &shifted))) {
    m->shifted.emplace(pair, shifted);
  }
  if (!ok) {
    release(held);
    return false;
  }
  return post_send(m, MatchKey{tag, shifted, found->second.first, size}, src, found->second.first, dst, size, tag,
                   held, true, not_before, not_before_integral);
}

// Posts a receive; ``on_received`` (references move here) runs when the message is in.
static bool matcher_recv(MessageMatcher* m, int64_t src, int64_t dst, int64_t size, int64_t tag,
                         const Call& on_received) {
  uint32_t i = match_entry(m, MatchKey{tag, src, dst, size}, false);
  MatchEntry& e = m->entries[i];
  if (e.arrived) {
    bool ok = m->clock.schedule(0, true, on_received);
    free_entry_if_done(m, i);
    return ok;
  }
  e.on_received = on_received;
  return true;
}

static bool matcher_arrived(MessageMatcher* m, uint32_t i) {
  MatchEntry* e = &m->entries[i];
  if (!std::isnan(e->not_before)) {
    double now;
    bool integral;
    if (!m->clock.now(&now, &integral)) return false;
    double wait = e->not_before - now;
    e->not_before = NAN;
    if (wait > 0)
      return m->clock.schedule(wait, integral && e->not_before_integral,
                               bound_call(CALL_ARRIVED, python_self(m, m->self), m, i));
  }
  bool ok = true;
  if (e->mirrored && e->on_sent.kind != CALL_NONE) {  // a mirrored message: the sender first
    Call c = e->on_sent;
    e->on_sent = Call{CALL_NONE, nullptr, nullptr, {0}};
    ok = fire(c);
    release(c);
    e = &m->entries[i];  // the callback may have grown the pool
    if (!ok) return false;
  }
  if (!close_flight(m, e->src) || !close_flight(m, e->dst)) return false;
  if (e->on_sent.kind != CALL_NONE) {
    Call c = e->on_sent;
    e->on_sent = Call{CALL_NONE, nullptr, nullptr, {0}};
    ok = fire(c);
    release(c);
    e = &m->entries[i];
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



static PyObject* array_type = nullptr;  // array.array

// Moves ``log`` onto the end of ``array`` (joining a touching interval) and frees it.
static void flush_log(std::vector<double>& log, const py::object& array) {
  size_t start = 0;
  size_t n = py::len(array);
  if (n > 0 && array[py::int_(n - 1)].cast<double>() == log[0]) {  // the interval closed at the last read goes on
    array[py::int_(n - 1)] = log[1];
    start = 2;
  }
  if (start < log.size()) {
    py::memoryview view = py::memoryview::from_memory(log.data() + start, (log.size() - start) * sizeof(double));
    array.attr("frombytes")(view);
  }
  std::vector<double>().swap(log);
}

// The in-flight intervals per rank. The logs move into the arrays handed out (no copy
// kept: a run's last read costs no second copy of them), which later reads extend.
static py::dict matcher_in_flight(MessageMatcher* m) {
  if (!m->flights) m->flights = py::dict();
  py::dict flights = py::reinterpret_borrow<py::dict>(m->flights);
  for (size_t rank = 0; rank < m->logs.size(); ++rank) {
    std::vector<double>& log = m->logs[rank];
    if (log.empty()) continue;
    py::int_ key(rank);
    if (!flights.contains(key)) flights[key] = py::reinterpret_borrow<py::object>(array_type)("d");
    flush_log(log, flights[key]);
  }
  return flights.attr("copy")();  // a copy: later reads extend the arrays, not the dict handed out
}

static void bind_message_matcher(py::module_& module) {
  py::class_<MessageMatcher> matcher(
      module, "MessageMatcher", collected<MessageMatcher>(),
      "MessageMatcher(backend, clock, npus, symmetry=None): sends meet receives (the k-th send of a key meets "
      "the k-th receive) and go to the backend; see astra_core.system.p2p.");
  matcher.def(py::init<py::object, py::handle, Py_ssize_t, py::object>(), py::arg("backend"), py::arg("clock"),
              py::arg("npus"), py::arg("symmetry") = py::none());
  matcher.def(
      "send",
      [](MessageMatcher& m, int64_t src, int64_t dst, int64_t size, int64_t tag,
         const py::typing::Optional<Callback>& on_sent, const AnyObject& arg, bool collective,
         const OptionalTime& not_before_ns) {
        double not_before = NAN;
        bool integral = false;
        if (!not_before_ns.is_none() && !read_number(not_before_ns.ptr(), &not_before, &integral))
          throw py::error_already_set();
        Call call = on_sent.is_none() ? Call{CALL_NONE, nullptr, nullptr, {0}} : py_call(on_sent.ptr(), arg.ptr());
        if (!matcher_send(&m, src, dst, size, tag, call, collective, not_before, integral))
          throw py::error_already_set();
      },
      py::arg("src"), py::arg("dst"), py::arg("size"), py::arg("tag"), py::arg("on_sent"), py::arg("arg"),
      py::arg("collective") = false, py::arg("not_before_ns") = py::none(),
      "send size bytes now; on_sent(arg) when they arrive (None: nothing); not_before_ns: arrival at both ends no "
      "earlier.");
  matcher.def(
      "recv",
      [](MessageMatcher& m, int64_t src, int64_t dst, int64_t size, int64_t tag, const Callback& on_received,
         const AnyObject& arg) {
        if (!matcher_recv(&m, src, dst, size, tag, py_call(on_received.ptr(), arg.ptr()))) throw py::error_already_set();
      },
      py::arg("src"), py::arg("dst"), py::arg("size"), py::arg("tag"), py::arg("on_received"), py::arg("arg"),
      "on_received(arg) when the matching message is in.");
  matcher.def(
      "arrived_unreceived",
      [](MessageMatcher& m) {
        py::typing::List<py::typing::Tuple<int64_t, int64_t, int64_t, int64_t>> out;
        m.waiting.for_each([&](const MatchKey& k, Waiting& waiting) {
          for (uint32_t i = waiting.head; i != NO_ENTRY; i = m.entries[i].next)
            if (m.entries[i].sent && m.entries[i].arrived) out.append(py::make_tuple(k.src, k.dst, k.tag, k.size));
        });
        return out;
      },
      "(src, dst, tag, bytes) of messages that arrived and no receive matched (representatives' frame).");
  matcher.def_readonly("messages", &MessageMatcher::messages, "messages sent");
  matcher.def_readonly("bytes", &MessageMatcher::bytes, "bytes sent");
  matcher.def_readonly("backend", &MessageMatcher::backend, "the network backend");
  matcher.def_readonly("symmetry", &MessageMatcher::symmetry, "the rank symmetry, or None");
  matcher.def_property_readonly(
      "delivered",
      [](const MessageMatcher& m) {
        long long in_flight = 0;
        for (int64_t b : m.busy) in_flight += b;
        return m.messages - in_flight / 2;
      },
      "messages sent so far that have arrived");
  matcher.def_property_readonly(
      "in_flight",
      [](MessageMatcher& m) { return matcher_in_flight(&m); },
      "rank -> array('d') of start, end, ... (ns) when at least one of its messages was in flight");
  matcher_type = reinterpret_cast<PyTypeObject*>(matcher.ptr());
}
