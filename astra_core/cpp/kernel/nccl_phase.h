// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// NcclLanes: the lanes and receives of one rank's part of one NCCL collective, run
// from its schedule (astra_core.system.collectives.nccl.schedule). Lanes send in
// order, each send once the receives it forwards have arrived and with no more than
// the lane's window in flight. The kernel's NcclPhase sends through the run's message
// matcher; nccl_replay (below) runs one collective alone on a message-time function.
// Both call the same issue / sent / received, so the two cannot differ.

struct NcclLanes {
  py::tuple lanes;  // of (sends, window); sends: tuple of (dst, bytes, needs tuple)
  py::tuple recvs;  // of (src, bytes, lane)
  std::vector<long long> next;        // per lane: its next send
  std::vector<long long> delivered;   // per lane: sends delivered
  std::vector<long long> blocked_on;  // per lane: the receive its next send waits for (-1: none)
  std::vector<char> arrived;          // per receive
  std::unordered_map<long long, std::vector<long long>> waiters;  // receive -> lanes waiting for it
  long long open;  // sends to issue and deliver, and receives to arrive

  // Raises TypeError for lanes not of (sends tuple, window).
  NcclLanes(py::tuple lanes_, py::tuple recvs_) : lanes(std::move(lanes_)), recvs(std::move(recvs_)) {
    size_t n = lanes.size();
    open = static_cast<long long>(recvs.size());
    for (size_t i = 0; i < n; ++i) {
      PyObject* lane = PyTuple_GET_ITEM(lanes.ptr(), i);
      if (!PyTuple_Check(lane) || PyTuple_GET_SIZE(lane) != 2 || !PyTuple_Check(PyTuple_GET_ITEM(lane, 0)))
        throw py::type_error("lanes: a tuple of (sends tuple, window)");
      open += 2 * PyTuple_GET_SIZE(PyTuple_GET_ITEM(lane, 0));
    }
    next.assign(n, 0);
    delivered.assign(n, 0);
    blocked_on.assign(n, -1);
    arrived.assign(recvs.size(), 0);
  }

  // Sends what lane ``i`` may send now, each through send(lane, dst, bytes) (false: a
  // Python error is set). False with the error set.
  template <class Send>
  bool issue(long long i, Send& send) {
    PyObject* lane = PyTuple_GET_ITEM(lanes.ptr(), i);
    PyObject* sends = PyTuple_GET_ITEM(lane, 0);
    long long window = PyLong_AsLongLong(PyTuple_GET_ITEM(lane, 1));
    if (window == -1 && PyErr_Occurred()) return false;
    long long n = PyTuple_GET_SIZE(sends);
    long long k = next[i];
    while (k < n && k - delivered[i] < window) {
      PyObject* item = PyTuple_GET_ITEM(sends, k);
      long long dst = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 0));
      long long size = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 1));
      if (PyErr_Occurred()) return false;
      PyObject* needs = PyTuple_GET_ITEM(item, 2);
      long long missing = -1;
      for (Py_ssize_t x = 0; x < PyTuple_GET_SIZE(needs); ++x) {
        long long j = PyLong_AsLongLong(PyTuple_GET_ITEM(needs, x));
        if (j == -1 && PyErr_Occurred()) return false;
        if (!arrived[j]) {
          missing = j;
          break;
        }
      }
      if (missing >= 0) {
        if (blocked_on[i] != missing) {
          blocked_on[i] = missing;
          waiters[missing].push_back(i);
        }
        break;
      }
      ++k;
      next[i] = k;
      --open;
      if (!send(i, dst, size)) return false;
    }
    next[i] = k;
    return true;
  }

  // A send of lane ``i`` was delivered: the lane may send more.
  template <class Send>
  bool sent(long long i, Send& send) {
    ++delivered[i];
    --open;
    return issue(i, send);
  }

  // Receive ``j`` arrived: the lanes that waited for it go on.
  template <class Send>
  bool received(long long j, Send& send) {
    arrived[j] = 1;
    --open;
    auto found = waiters.find(j);
    if (found == waiters.end()) return true;
    std::vector<long long> waiting;
    waiting.swap(found->second);
    waiters.erase(found);
    for (long long i : waiting) {
      blocked_on[i] = -1;
      if (!issue(i, send)) return false;
    }
    return true;
  }

  // The receive ``j``: its (src, bytes, lane). False with a Python error set.
  bool recv_at(Py_ssize_t j, long long& src, long long& size, long long& lane) const {
    PyObject* recv = PyTuple_GET_ITEM(recvs.ptr(), j);
    src = PyLong_AsLongLong(PyTuple_GET_ITEM(recv, 0));
    size = PyLong_AsLongLong(PyTuple_GET_ITEM(recv, 1));
    lane = PyLong_AsLongLong(PyTuple_GET_ITEM(recv, 2));
    return !PyErr_Occurred();
  }

  int traverse(visitproc visit, void* arg) const {
    Py_VISIT(lanes.ptr());
    Py_VISIT(recvs.ptr());
    return 0;
  }

  void clear() {
    lanes = py::tuple();
    recvs = py::tuple();
  }
};

// ---------------------------------------------------------------------------------
// NcclPhase: one rank's NcclLanes in a run. The rank also expects its receives, and
// NCCL's predicted time must pass. The phase ends when every send was delivered,
// every receive arrived and the predicted time is over.

struct NcclPhase : BoundPhase {
  long long rank, data_size, final_data_size, floor_ns;
  NcclLanes work;
  long long open;  // the lanes' open work and the floor; -1: done
  long long tag = 0;

  // Raises TypeError for lanes not of (sends tuple, window).
  NcclPhase(CommTypeObject comm_type_, long long rank_, long long data_size_, long long final_size, py::tuple lanes_,
            py::tuple recvs_, long long floor)
      : BoundPhase(std::move(comm_type_)), rank(rank_), data_size(data_size_), final_data_size(final_size),
        floor_ns(floor), work(std::move(lanes_), std::move(recvs_)), open(1) {}

  int traverse(visitproc visit, void* arg) const {
    if (int r = work.traverse(visit, arg)) return r;
    return BoundPhase::traverse(visit, arg);
  }

  void clear() {
    work.clear();
    BoundPhase::clear();
  }
};

static const long long NCCL_TAG_BASE = 1LL << 48;
static const long long NCCL_LANES_PER_TAG = 4096;

// How an NcclPhase's lanes send: through the run's message matcher.
struct NcclMatcherSend {
  NcclPhase* p;
  bool operator()(long long lane, long long dst, long long size) const {
    return matcher_send(p->at.matcher, p->rank, dst, size, p->tag + lane,
                        kernel_call(CALL_NCCL_SENT, p->self, lane), true, NAN, false);
  }
};

static bool nccl_check(NcclPhase* p) {
  if (p->open != 0 || p->work.open != 0) return true;
  p->open = -1;
  return finish_phase(p->stream.ptr());
}

static bool nccl_sent(NcclPhase* p, long long i) {
  NcclMatcherSend send{p};
  return p->work.sent(i, send) && nccl_check(p);
}

static bool nccl_received(NcclPhase* p, long long j) {
  NcclMatcherSend send{p};
  return p->work.received(j, send) && nccl_check(p);
}

static bool nccl_floor(NcclPhase* p) {
  --p->open;
  return nccl_check(p);
}

static bool nccl_start(NcclPhase* p) {
  long long stream_id;
  if (!p->at.bind(p->stream.ptr(), &stream_id)) return false;
  p->tag = NCCL_TAG_BASE + stream_id * NCCL_LANES_PER_TAG;
  for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(p->work.recvs.ptr()); ++j) {
    long long src, size, lane;
    if (!p->work.recv_at(j, src, size, lane)) return false;
    if (!matcher_recv(p->at.matcher, src, p->rank, size, p->tag + lane,
                      kernel_call(CALL_NCCL_RECEIVED, p->self, j)))
      return false;
  }
  if (!register_call(p->at.events, static_cast<double>(p->floor_ns), true,
                     kernel_call(CALL_NCCL_FLOOR, p->self, 0)))
    return false;
  NcclMatcherSend send{p};
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(p->work.lanes.ptr()); ++i)
    if (!p->work.issue(i, send)) return false;
  return true;
}

static void bind_nccl_phase(py::module_& module) {
  py::class_<NcclPhase> phase(module, "NcclPhase", collected<NcclPhase>(),
                              "NcclPhase(comm_type, rank, data_size, final_data_size, lanes, recvs, floor_ns): one "
                              "rank's part of one NCCL collective (astra_core.system.collectives.nccl.phase).");
  phase.def(py::init<CommTypeObject, long long, long long, long long, py::tuple, py::tuple, long long>(),
            py::arg("comm_type"), py::arg("rank"), py::arg("data_size"), py::arg("final_data_size"), py::arg("lanes"),
            py::arg("recvs"), py::arg("floor_ns"));
  def_phase<NcclPhase>(phase, nccl_start,
                       "STREAM_INIT: post the receives, start NCCL's predicted time and issue every lane.");
  phase.def_readonly("rank", &NcclPhase::rank, "the rank");
  phase.def_readonly("data_size", &NcclPhase::data_size, "bytes entering the phase");
  phase.def_readonly("final_data_size", &NcclPhase::final_data_size, "bytes leaving it");
  phase.def_readonly("floor_ns", &NcclPhase::floor_ns, "NCCL's predicted time (ns)");
  phase.def_property_readonly(
      "next_sends",
      [](const NcclPhase& p) {
        py::list out;
        for (long long k : p.work.next) out.append(k);
        return out;
      },
      "per lane: the index of its next send");
  phase.def_property_readonly(
      "arrived",
      [](const NcclPhase& p) {
        py::list out;
        for (char a : p.work.arrived) out.append(py::bool_(a != 0));
        return out;
      },
      "per receive: whether it arrived");
}
