// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after nccl_phase.h; not compiled on its own.

// ---------------------------------------------------------------------------------
// nccl_replay: one NCCL collective alone, each member from its own start, on a network
// whose message time is a function of its ends and size alone (a congestion-unaware
// one: astra_core.system.collectives.nccl.replay). Each member runs its NcclLanes as
// an NcclPhase does; a message arrives message_ns(src, dst, bytes) after it is sent
// and is matched to the first receive of the same sender, lane and size (one that
// arrives before its receiver started waits for it). No floor: a member ends when
// its last send was delivered or its last receive arrived (its start if neither).

struct ReplayKey {
  long long src, lane, dst, size;
  bool operator==(const ReplayKey& o) const {
    return src == o.src && lane == o.lane && dst == o.dst && size == o.size;
  }
};

struct ReplayKeyHash {
  size_t operator()(const ReplayKey& k) const {
    uint64_t h = mix64(static_cast<uint64_t>(k.src));
    h = mix64(h ^ static_cast<uint64_t>(k.lane));
    h = mix64(h ^ static_cast<uint64_t>(k.dst));
    return static_cast<size_t>(mix64(h ^ static_cast<uint64_t>(k.size)));
  }
};

struct ReplayMember {
  NcclLanes work;
  long long rank;
  double start, end;
  bool started = false;
  std::vector<long long> early;                // receives whose message came before the start
  std::vector<std::pair<double, double>> spans;  // (sent, arrived) of its messages, either end
};

// One event: a member's start (lane -1) or a message's arrival.
struct ReplayEvent {
  double time;
  uint64_t seq;
  size_t src, dst;  // member indices (src only for a start)
  long long lane, size;
  double sent;
  bool operator>(const ReplayEvent& o) const { return time != o.time ? time > o.time : seq > o.seq; }
};

struct Replayer;

// How a replayed member's lanes send: onto the replay's own event heap.
struct ReplaySend {
  Replayer* r;
  size_t member;
  bool operator()(long long lane, long long dst, long long size);
};

struct Replayer {
  std::vector<ReplayMember> members;
  std::unordered_map<long long, size_t> index;  // rank -> member
  std::unordered_map<ReplayKey, std::deque<long long>, ReplayKeyHash> expected;
  std::unordered_map<ReplayKey, double, ReplayKeyHash> times;  // message_ns by (src, 0, dst, bytes)
  std::priority_queue<ReplayEvent, std::vector<ReplayEvent>, std::greater<ReplayEvent>> heap;
  py::object message_ns;
  double now = 0.0;
  uint64_t seq = 0;
  long long messages = 0, message_bytes = 0;
  bool keep = false;
  py::list kept;

  bool send(size_t from, long long lane, long long dst, long long size) {
    auto to = index.find(dst);
    if (to == index.end()) {
      PyErr_Format(PyExc_ValueError, "rank %lld sends %lld B to rank %lld, not a member of the collective",
                   members[from].rank, size, dst);
      return false;
    }
    ReplayKey key{members[from].rank, 0, dst, size};
    auto known = times.find(key);
    double took;
    if (known != times.end()) {
      took = known->second;
    } else {
      PyObject* t = PyObject_CallFunction(message_ns.ptr(), "LLL", members[from].rank, dst, size);
      if (t == nullptr) return false;
      took = PyFloat_AsDouble(t);
      Py_DECREF(t);
      if (took == -1.0 && PyErr_Occurred()) return false;
      times.emplace(key, took);
    }
    heap.push(ReplayEvent{now + took, seq++, from, to->second, lane, size, now});
    return true;
  }

  bool receive(size_t m, long long j) {
    ReplayMember& member = members[m];
    if (now > member.end) member.end = now;
    ReplaySend out{this, m};
    return member.work.received(j, out);
  }

  bool arrive(const ReplayEvent& e) {
    ReplayMember& src = members[e.src];
    ++messages;
    message_bytes += e.size;
    if (keep) kept.append(py::make_tuple(src.rank, members[e.dst].rank, e.size, e.sent, now));
    src.spans.emplace_back(e.sent, now);
    members[e.dst].spans.emplace_back(e.sent, now);
    if (now > src.end) src.end = now;
    ReplaySend out{this, e.src};
    if (!src.work.sent(e.lane, out)) return false;
    auto queue = expected.find(ReplayKey{src.rank, e.lane, members[e.dst].rank, e.size});
    if (queue == expected.end() || queue->second.empty()) {
      PyErr_Format(PyExc_ValueError, "rank %lld sends %lld B to rank %lld on lane %lld, which no receive expects",
                   src.rank, e.size, members[e.dst].rank, e.lane);
      return false;
    }
    long long j = queue->second.front();
    queue->second.pop_front();
    if (members[e.dst].started) return receive(e.dst, j);
    members[e.dst].early.push_back(j);
    return true;
  }

  bool begin(size_t m) {
    ReplayMember& member = members[m];
    member.started = true;
    for (long long j : member.early)
      if (!receive(m, j)) return false;
    member.early.clear();
    ReplaySend out{this, m};
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(member.work.lanes.ptr()); ++i)
      if (!member.work.issue(i, out)) return false;
    return true;
  }

  bool run() {
    for (size_t m = 0; m < members.size(); ++m) heap.push(ReplayEvent{members[m].start, seq++, m, m, -1, 0, 0.0});
    while (!heap.empty()) {
      ReplayEvent e = heap.top();
      heap.pop();
      now = e.time;
      if (!(e.lane < 0 ? begin(e.src) : arrive(e))) return false;
    }
    for (const ReplayMember& member : members)
      if (member.work.open != 0) {
        PyErr_Format(PyExc_ValueError,
                     "rank %lld's part of the collective cannot finish: a send or receive waits forever", member.rank);
        return false;
      }
    return true;
  }
};

bool ReplaySend::operator()(long long lane, long long dst, long long size) { return r->send(member, lane, dst, size); }

// A member's message spans merged: sorted, disjoint (touching ones joined, empty ones dropped).
static py::list merged_spans(std::vector<std::pair<double, double>>& spans) {
  std::sort(spans.begin(), spans.end());
  py::list out;
  double lo = 0.0, hi = 0.0;
  bool open = false;
  for (const auto& [start, end] : spans) {
    if (end <= start) continue;
    if (open && start <= hi) {
      if (end > hi) hi = end;
      continue;
    }
    if (open) out.append(py::make_tuple(lo, hi));
    lo = start, hi = end, open = true;
  }
  if (open) out.append(py::make_tuple(lo, hi));
  return out;
}

static py::tuple kernel_nccl_replay(py::tuple parts, py::tuple starts_ns, py::object message_ns, bool keep_messages) {
  if (parts.size() != starts_ns.size()) throw py::value_error("nccl_replay: one start per member");
  Replayer r;
  r.message_ns = std::move(message_ns);
  r.keep = keep_messages;
  r.members.reserve(parts.size());
  for (size_t m = 0; m < parts.size(); ++m) {
    py::tuple part = parts[m].cast<py::tuple>();
    if (part.size() != 3) throw py::type_error("nccl_replay: a member is (rank, lanes, recvs)");
    double start = starts_ns[m].cast<double>();
    r.members.push_back(ReplayMember{NcclLanes(part[1].cast<py::tuple>(), part[2].cast<py::tuple>()),
                                     part[0].cast<long long>(), start, start});
    if (!r.index.emplace(r.members.back().rank, m).second) throw py::value_error("nccl_replay: a member twice");
  }
  for (ReplayMember& member : r.members)
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(member.work.recvs.ptr()); ++j) {
      long long src, size, lane;
      if (!member.work.recv_at(j, src, size, lane)) throw py::error_already_set();
      r.expected[ReplayKey{src, lane, member.rank, size}].push_back(j);
    }
  if (!r.run()) throw py::error_already_set();
  py::list ends, flights;
  for (ReplayMember& member : r.members) {
    ends.append(member.end);
    flights.append(merged_spans(member.spans));
  }
  return py::make_tuple(ends, r.messages, r.message_bytes, flights, keep_messages ? py::object(r.kept) : py::none());
}

static void bind_nccl_replay(py::module_& module) {
  module.def("nccl_replay", &kernel_nccl_replay, py::arg("parts"), py::arg("starts_ns"), py::arg("message_ns"),
             py::arg("keep_messages") = false,
             "nccl_replay(parts, starts_ns, message_ns, keep_messages=False) -> (ends_ns, messages, message_bytes, "
             "flights, sent)\n\nOne NCCL collective replayed alone (astra_core.system.collectives.nccl.replay): "
             "parts, one (rank, lanes, recvs) per member as Schedule.frozen gives them; starts_ns, each member's "
             "start; message_ns(src, dst, bytes), a message's time. Per member in order: its end (ns) and its "
             "messages' merged (sent, arrived) spans; the messages' count and bytes; sent, every message as "
             "(src, dst, bytes, sent, arrived) when keep_messages. Raises ValueError for a send to no member, a "
             "send no receive expects, or a member that cannot finish.");
}
