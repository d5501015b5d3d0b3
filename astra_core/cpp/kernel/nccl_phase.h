// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// NcclPhase: one rank's part of one NCCL collective, run from its schedule
// (astra_core.system.collectives.nccl: schedule and phase). Lanes send in order, each
// send once the receives it forwards have arrived and with no more than the lane's
// window in flight; the rank also expects its receives, and NCCL's predicted time
// must pass. The phase ends when every send was delivered, every receive arrived and
// the predicted time is over.

struct NcclPhase : BoundPhase {
  long long rank, data_size, final_data_size, floor_ns;
  py::tuple lanes;  // of (sends, window); sends: tuple of (dst, bytes, needs tuple)
  py::tuple recvs;  // of (src, bytes, lane)
  std::vector<long long> next;        // per lane: its next send
  std::vector<long long> delivered;   // per lane: sends delivered
  std::vector<long long> blocked_on;  // per lane: the receive its next send waits for (-1: none)
  std::vector<char> arrived;          // per receive
  std::unordered_map<long long, std::vector<long long>> waiters;  // receive -> lanes waiting for it
  long long open;  // sends to issue and deliver, receives to arrive, and the floor; -1: done
  long long tag = 0;

  // Raises TypeError for lanes not of (sends tuple, window).
  NcclPhase(CommTypeObject comm_type_, long long rank_, long long data_size_, long long final_size, py::tuple lanes_,
            py::tuple recvs_, long long floor)
      : BoundPhase(std::move(comm_type_)), rank(rank_), data_size(data_size_), final_data_size(final_size),
        floor_ns(floor), lanes(std::move(lanes_)), recvs(std::move(recvs_)) {
    size_t n = lanes.size();
    open = static_cast<long long>(recvs.size()) + 1;
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

  int traverse(visitproc visit, void* arg) const {
    Py_VISIT(lanes.ptr());
    Py_VISIT(recvs.ptr());
    return BoundPhase::traverse(visit, arg);
  }

  void clear() {
    lanes = py::tuple();
    recvs = py::tuple();
    BoundPhase::clear();
  }
};

static const long long NCCL_TAG_BASE = 1LL << 48;
static const long long NCCL_LANES_PER_TAG = 4096;

static bool nccl_check(NcclPhase* p) {
  if (p->open != 0) return true;
  p->open = -1;
  return finish_phase(p->stream.ptr());
}

static bool nccl_issue(NcclPhase* p, long long i) {
  PyObject* lane = PyTuple_GET_ITEM(p->lanes.ptr(), i);
  PyObject* sends = PyTuple_GET_ITEM(lane, 0);
  long long window = PyLong_AsLongLong(PyTuple_GET_ITEM(lane, 1));
  if (window == -1 && PyErr_Occurred()) return false;
  long long n = PyTuple_GET_SIZE(sends);
  long long k = p->next[i];
  while (k < n && k - p->delivered[i] < window) {
    PyObject* send = PyTuple_GET_ITEM(sends, k);
    long long dst = PyLong_AsLongLong(PyTuple_GET_ITEM(send, 0));
    long long size = PyLong_AsLongLong(PyTuple_GET_ITEM(send, 1));
    if (PyErr_Occurred()) return false;
    PyObject* needs = PyTuple_GET_ITEM(send, 2);
    long long missing = -1;
    for (Py_ssize_t x = 0; x < PyTuple_GET_SIZE(needs); ++x) {
      long long j = PyLong_AsLongLong(PyTuple_GET_ITEM(needs, x));
      if (j == -1 && PyErr_Occurred()) return false;
      if (!p->arrived[j]) {
        missing = j;
        break;
      }
    }
    if (missing >= 0) {
      if (p->blocked_on[i] != missing) {
        p->blocked_on[i] = missing;
        p->waiters[missing].push_back(i);
      }
      break;
    }
    ++k;
    p->next[i] = k;
    --p->open;
    if (!matcher_send(p->at.matcher, p->rank, dst, size, p->tag + i,
                      kernel_call(CALL_NCCL_SENT, p->self, i), true, NAN, false))
      return false;
  }
  p->next[i] = k;
  return true;
}

static bool nccl_sent(NcclPhase* p, long long i) {
  ++p->delivered[i];
  --p->open;
  return nccl_issue(p, i) && nccl_check(p);
}

static bool nccl_received(NcclPhase* p, long long j) {
  p->arrived[j] = 1;
  --p->open;
  auto found = p->waiters.find(j);
  if (found != p->waiters.end()) {
    std::vector<long long> lanes;
    lanes.swap(found->second);
    p->waiters.erase(found);
    for (long long i : lanes) {
      p->blocked_on[i] = -1;
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
  if (!p->at.bind(p->stream.ptr(), &stream_id)) return false;
  p->tag = NCCL_TAG_BASE + stream_id * NCCL_LANES_PER_TAG;
  for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(p->recvs.ptr()); ++j) {
    PyObject* recv = PyTuple_GET_ITEM(p->recvs.ptr(), j);
    long long src = PyLong_AsLongLong(PyTuple_GET_ITEM(recv, 0));
    long long size = PyLong_AsLongLong(PyTuple_GET_ITEM(recv, 1));
    long long lane = PyLong_AsLongLong(PyTuple_GET_ITEM(recv, 2));
    if (PyErr_Occurred()) return false;
    if (!matcher_recv(p->at.matcher, src, p->rank, size, p->tag + lane,
                      kernel_call(CALL_NCCL_RECEIVED, p->self, j)))
      return false;
  }
  if (!register_call(p->at.events, static_cast<double>(p->floor_ns), true,
                     kernel_call(CALL_NCCL_FLOOR, p->self, 0)))
    return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(p->lanes.ptr()); ++i)
    if (!nccl_issue(p, i)) return false;
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
        for (long long k : p.next) out.append(k);
        return out;
      },
      "per lane: the index of its next send");
  phase.def_property_readonly(
      "arrived",
      [](const NcclPhase& p) {
        py::list out;
        for (char a : p.arrived) out.append(py::bool_(a != 0));
        return out;
      },
      "per receive: whether it arrived");
}
