// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

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

// A kernel phase's rank, bound at the phase's start: its events and matcher.
struct PhaseRank {
  py::object events_object, matcher_object;
  RankEvents* events = nullptr;       // borrowed from events_object
  MessageMatcher* matcher = nullptr;  // borrowed from matcher_object

  // Binds the rank of ``stream`` (its owner's events and matcher, which must be the
  // kernel's) and gives the stream's id; false with an error set.
  bool bind(PyObject* stream, long long* stream_id) {
    if (stream == nullptr || stream == Py_None) {
      PyErr_SetString(PyExc_RuntimeError, "a phase started before its stream was bound");
      return false;
    }
    return python_ok([&] {
      py::handle s(stream);
      bool kernel_stream = Py_TYPE(stream) == stream_type;  // read without a Python call
      py::object owner = kernel_stream ? as_stream(s)->owner : py::object(s.attr("owner"));
      py::object e = owner.attr("events"), m = owner.attr("matcher");
      long long id = kernel_stream ? as_stream(s)->stream_id : PyLong_AsLongLong(py::object(s.attr("stream_id")).ptr());
      if (id == -1 && PyErr_Occurred()) throw py::error_already_set();
      if (!PyObject_TypeCheck(e.ptr(), &RankEventsType) || !PyObject_TypeCheck(m.ptr(), &MessageMatcherType))
        throw py::type_error("a kernel phase runs on a rank whose events and matcher are the kernel's");
      events = reinterpret_cast<RankEvents*>(e.ptr());
      matcher = reinterpret_cast<MessageMatcher*>(m.ptr());
      events_object = std::move(e);
      matcher_object = std::move(m);
      *stream_id = id;
    });
  }

  int traverse(visitproc visit, void* arg) const {
    Py_VISIT(events_object.ptr());
    Py_VISIT(matcher_object.ptr());
    return 0;
  }

  void clear() {
    events = nullptr;
    matcher = nullptr;
    events_object = py::object();
    matcher_object = py::object();
  }
};

struct WindowedPhase {
  py::object comm_type;
  py::object stream = py::none();
  long long rank, data_size, final_data_size;
  py::tuple messages;  // of (dst, src, bytes): shared, as the plans share them
  py::tuple packets;   // of (reduce, bytes)
  // the last message and packet read, and their values: a ring's are one tuple repeated
  PyObject* last_message = nullptr;  // borrowed from `messages`
  PyObject* last_packet = nullptr;   // borrowed from `packets`
  long long message_values[3] = {0, 0, 0}, packet_values[2] = {0, 0};
  long long window, barrier = -1;  // barrier -1: none
  bool fast;
  long long sent = 0, received_count = 0, inserted = 0, free = 0;
  PhaseRank at;
  long long tag = 0;
  PyObject* self = nullptr;  // its Python object (borrowed), set at start

  // messages and packets: sequences (a tuple is kept, not copied). Raises TypeError for
  // a barrier that is not an int.
  WindowedPhase(py::object comm_type_, long long rank_, long long data_size_, const py::handle& messages_,
                long long window_, const py::handle& packets_, long long final_size, const py::handle& barrier_,
                bool fast_)
      : comm_type(std::move(comm_type_)), rank(rank_), data_size(data_size_), final_data_size(final_size),
        messages(py::reinterpret_borrow<py::sequence>(messages_)), packets(py::reinterpret_borrow<py::sequence>(packets_)),
        window(window_), fast(fast_) {
    if (!barrier_.is_none()) {
      barrier = PyLong_AsLongLong(barrier_.ptr());
      if (barrier == -1 && PyErr_Occurred()) throw py::error_already_set();
    }
  }

  int traverse(visitproc visit, void* arg) const {
    for (const py::object* o : {&comm_type, &stream}) Py_VISIT(o->ptr());
    Py_VISIT(messages.ptr());
    Py_VISIT(packets.ptr());
    return at.traverse(visit, arg);
  }

  void clear() {
    comm_type = py::none();
    stream = py::none();
    at.clear();
  }
};

static bool phase_insert(WindowedPhase* p) {
  if (p->inserted >= PyTuple_GET_SIZE(p->packets.ptr())) {
    PyErr_Format(PyExc_IndexError, "windowed phase of rank %lld: packet %lld of %zd", p->rank, p->inserted,
                 PyTuple_GET_SIZE(p->packets.ptr()));
    return false;
  }
  if (PyTuple_GET_ITEM(p->packets.ptr(), p->inserted) != p->last_packet) {
    if (!read_ints(p->packets.ptr(), p->inserted, 2, p->packet_values)) return false;  // a bool is an int
    p->last_packet = PyTuple_GET_ITEM(p->packets.ptr(), p->inserted);
  }
  ++p->inserted;
  const PlanPacket packet{p->packet_values[0] != 0, p->packet_values[1]};
  int64_t delay = p->fast ? FAST_TRANSMISSION_NS : p->at.events->endpoint_delay_ns;
  return register_call(p->at.events, static_cast<double>(delay), true,
                       kernel_call(packet.reduce ? CALL_REDUCE : CALL_GENERAL, p->self,
                                   packet.size));
}

static bool phase_reduce(WindowedPhase* p, int64_t size) {
  return register_call(p->at.events, static_cast<double>(reduction_delay_ns(p->at.events, size)), true,
                       kernel_call(CALL_GENERAL, p->self, 0));
}

static bool phase_received(WindowedPhase* p) {
  ++p->received_count;
  return phase_insert(p);
}

static bool phase_general(WindowedPhase* p) {
  ++p->free;
  if (p->barrier >= 0 && p->sent >= p->barrier && p->received_count < p->barrier) return true;  // banked
  const long long n = PyTuple_GET_SIZE(p->messages.ptr());
  while (p->free && p->sent < n && p->sent < p->inserted) {
    if (PyTuple_GET_ITEM(p->messages.ptr(), p->sent) != p->last_message) {
      if (!read_ints(p->messages.ptr(), p->sent, 3, p->message_values)) return false;
      p->last_message = PyTuple_GET_ITEM(p->messages.ptr(), p->sent);
    }
    const PlanMessage msg{p->message_values[0], p->message_values[1], p->message_values[2]};
    if (!matcher_send(p->at.matcher, p->at.events->rank, msg.dst, msg.size, p->tag, Call{CALL_NONE, nullptr, nullptr, {0}},
                      true, NAN, false))
      return false;
    if (!matcher_recv(p->at.matcher, msg.src, p->at.events->rank, msg.size, p->tag,
                      kernel_call(CALL_RECEIVED, p->self, 0)))
      return false;
    ++p->sent;
    --p->free;
  }
  if (p->sent == n && p->free == p->window) return finish_phase(p->stream.ptr());
  return true;
}

static bool phase_start(WindowedPhase* p) {
  if (!p->at.bind(p->stream.ptr(), &p->tag)) return false;
  for (long long i = 0; i < p->window; ++i)
    if (!phase_insert(p)) return false;
  return true;
}

static void bind_windowed_phase(py::module_& module) {
  py::class_<WindowedPhase> phase(
      module, "WindowedPhase", collected<WindowedPhase>(),
      "WindowedPhase(comm_type, rank, data_size, messages, window, packets, final_data_size, barrier=None, "
      "fast=False): one rank's phase of one chunk, run from its plan (astra_core.system.collectives.plan).");
  phase.def(py::init<py::object, long long, long long, py::handle, long long, py::handle, long long, py::handle, bool>(),
            py::arg("comm_type"), py::arg("rank"), py::arg("data_size"), py::arg("messages"), py::arg("window"),
            py::arg("packets"), py::arg("final_data_size"), py::arg("barrier") = py::none(), py::arg("fast") = false);
  phase.def(
      "start",
      [](py::handle self) {
        WindowedPhase* p = self.cast<WindowedPhase*>();
        p->self = self.ptr();
        if (!phase_start(p)) throw py::error_already_set();
      },
      "STREAM_INIT: the phase got its queue slot; its first window of packets go through local memory.");
  phase.def(
      "received",
      [](WindowedPhase& p, py::args) {
        if (!phase_received(&p)) throw py::error_already_set();
      },
      "PACKET_RECEIVED: a message this phase posted a receive for arrived (any argument ignored).");
  phase.def(
      "general",
      [](WindowedPhase& p, py::args) {
        if (!phase_general(&p)) throw py::error_already_set();
      },
      "GENERAL: a packet is through local memory (any argument ignored).");
  phase.def_readonly("comm_type", &WindowedPhase::comm_type, "the collective (CommType)");
  phase.def_readwrite("stream", &WindowedPhase::stream, "the stream this phase belongs to");
  phase.def_readonly("rank", &WindowedPhase::rank, "the rank");
  phase.def_readonly("data_size", &WindowedPhase::data_size, "bytes entering the phase");
  phase.def_readonly("final_data_size", &WindowedPhase::final_data_size, "bytes leaving it");
  phase.def_readonly("window", &WindowedPhase::window, "packets in flight at once");
  phase.def_readonly("sent", &WindowedPhase::sent, "messages sent so far");
  phase.def_readonly("received_count", &WindowedPhase::received_count, "messages received so far");
  phase.def_readonly("inserted", &WindowedPhase::inserted, "packets into local memory so far");
  phase.def_readonly("free", &WindowedPhase::free, "free send slots");
}
