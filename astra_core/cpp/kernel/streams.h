// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// Streams and their scheduling (upstream StreamBaseline, Sys::insert_stream, schedule,
// proceed_to_next_vnet_baseline); see astra_core.system.rank and .stream. A Stream is
// one chunk of a collective moving through its phases on one rank. Streams wait in a
// ready list, then in one queue per dimension, at most `threshold` running per queue;
// a stream is inserted before the first one that is neither running nor of at least
// its priority.

struct Stream {
  PhasePortObject owner;  // the RankSystem (Python), which phases reach as stream.owner
  DataSetObject dataset;  // the collective's DataSet (Python)
  long long stream_id, priority;
  py::typing::List<PhaseObject> phases_to_go;  // of Phase (dim, algorithm), popped from the front
  py::typing::Optional<PhaseObject> phase = py::none();          // the current Phase, or None
  py::typing::Optional<AlgorithmObject> algorithm = py::none();  // its algorithm, or None
  long long current_queue_id = -1;
  bool initialized = false;
  py::typing::Optional<py::float_> phase_start_ns = py::none();  // the time its current phase got its slot

  Stream(PhasePortObject owner_, DataSetObject dataset_, long long id, py::typing::List<PhaseObject> phases,
         long long priority_)
      : owner(std::move(owner_)), dataset(std::move(dataset_)), stream_id(id), priority(priority_),
        phases_to_go(std::move(phases)) {}

  int traverse(visitproc visit, void* arg) const {
    for (const py::object* o : held()) Py_VISIT(o->ptr());
    Py_VISIT(phases_to_go.ptr());
    return 0;
  }

  void clear() {
    for (py::object* o : held()) *o = py::none();
    phases_to_go = py::list();
  }

  std::array<py::object*, 5> held() { return {&owner, &dataset, &phase, &algorithm, &phase_start_ns}; }
  std::array<const py::object*, 5> held() const { return {&owner, &dataset, &phase, &algorithm, &phase_start_ns}; }
};

static PyTypeObject* stream_type = nullptr;  // set by bind_streams

// The kernel Stream ``o`` (the caller checked its type).
static inline Stream* as_stream(const py::handle& o) { return bound_value<Stream>(o.ptr()); }

// The per-rank queues, kept by RankEvents.
struct StreamQueues {
  std::vector<py::object> ready;                // Streams
  std::vector<std::vector<py::object>> active;  // per dimension, Streams
  std::vector<long long> running;
  long long threshold = 1;
};

static void insert_stream(std::vector<py::object>& queue, const py::handle& stream) {
  size_t i = 0;
  long long priority = as_stream(stream)->priority;
  while (i < queue.size() && (as_stream(queue[i])->initialized || as_stream(queue[i])->priority >= priority)) ++i;
  queue.insert(queue.begin() + i, py::reinterpret_borrow<py::object>(stream));
}

static bool stream_init(const Clock& clock, Stream* s) {
  s->initialized = true;
  double now;
  bool integral;
  if (!clock.now(&now, &integral)) return false;
  PyObject* t = time_object(now, integral);
  if (t == nullptr) return false;
  s->phase_start_ns = py::reinterpret_steal<py::object>(t);
  py::object algorithm = s->algorithm;  // held: start may end the phase
  return py::reinterpret_steal<py::object>(PyObject_CallMethod(algorithm.ptr(), "start", nullptr)).ptr() != nullptr;
}

static bool proceed_to_next_phase(RankEvents* self, const py::handle& stream_object);

static bool schedule_ready(RankEvents* self) {
  while (!self->queues->ready.empty()) {
    py::object stream = std::move(self->queues->ready.front());
    self->queues->ready.erase(self->queues->ready.begin());
    if (!proceed_to_next_phase(self, stream)) return false;
  }
  return true;
}

static bool stream_added(RankEvents* self, long long queue_id) {
  StreamQueues& q = *self->queues;
  size_t i = static_cast<size_t>(q.running[queue_id]);
  while (i < q.active[queue_id].size() && q.running[queue_id] < q.threshold) {
    py::object stream = q.active[queue_id][i];  // held: its start may move it on
    if (!stream_init(self->clock, as_stream(stream))) return false;
    ++q.running[queue_id];
    ++i;
  }
  return true;
}

static bool stream_removed(RankEvents* self, long long queue_id) {
  --self->queues->running[queue_id];
  return schedule_ready(self) && stream_added(self, queue_id);
}

// One phase's span in its collective's log (DataSet.phase_times, a bytearray; astra_core.
// system.records.PhaseTimes reads it): a record of PHASE_RECORD_BYTES, int32 dimension, int32
// collective (Chakra's number), float64 start and end ns, in native byte order.
static const size_t PHASE_RECORD_BYTES = 24;

static bool log_phase(Stream* s, double end_ns) {
  return python_ok([&] {
    py::object times = s->dataset.attr("phase_times");
    if (!PyByteArray_Check(times.ptr())) throw py::type_error("a DataSet's phase_times must be a bytearray");
    int32_t head[2] = {s->phase.attr("dim").cast<int32_t>(),
                       s->algorithm.attr("comm_type").attr("value").cast<int32_t>()};
    double span[2] = {s->phase_start_ns.cast<double>(), end_ns};
    Py_ssize_t size = PyByteArray_GET_SIZE(times.ptr());
    if (PyByteArray_Resize(times.ptr(), size + PHASE_RECORD_BYTES) != 0) throw py::error_already_set();
    char* at = PyByteArray_AS_STRING(times.ptr()) + size;
    memcpy(at, head, sizeof head);
    memcpy(at + sizeof head, span, sizeof span);
  });
}

// The stream's next phase (its first, or after the current one), on its dimension's
// queue; the stream's algorithm gets .stream = the stream as the phase becomes current.
static bool proceed_to_next_phase(RankEvents* self, const py::handle& stream_handle) {
  py::object stream_object = py::reinterpret_borrow<py::object>(stream_handle);  // held: the queues' go below
  Stream* s = as_stream(stream_object);
  StreamQueues& q = *self->queues;
  long long previous = s->current_queue_id;
  double t;
  bool integral;
  if (!self->clock.now(&t, &integral)) return false;
  if (!s->phase.is_none() && !log_phase(s, t)) return false;  // the phase's span, for the collective's record
  Py_ssize_t left = PyList_GET_SIZE(s->phases_to_go.ptr());
  if (left == 0) {
    py::object now = py::reinterpret_steal<py::object>(time_object(t, integral));
    if (!now || !py::reinterpret_steal<py::object>(PyObject_CallMethod(s->dataset.ptr(), "stream_finished", "O",
                                                                       now.ptr())))
      return false;
  }
  if (previous >= 0) {
    std::vector<py::object>& queue = q.active[previous];
    for (size_t i = 0; i < queue.size(); ++i) {
      if (queue[i].is(stream_object)) {
        queue.erase(queue.begin() + i);
        break;
      }
    }
  }
  if (left == 0) {  // retired: unlink its last phase (whose algorithm points back at the stream)
    s->phase = py::none();
    s->algorithm = py::none();
    return previous < 0 || stream_removed(self, previous);
  }
  py::object phase = s->phases_to_go[0];
  if (PySequence_DelItem(s->phases_to_go.ptr(), 0) != 0) return false;
  py::object algorithm = py::reinterpret_steal<py::object>(PyObject_GetAttrString(phase.ptr(), "algorithm"));
  py::object dim = !algorithm ? py::object() : py::reinterpret_steal<py::object>(PyObject_GetAttrString(phase.ptr(), "dim"));
  long long d = !dim ? -1 : PyLong_AsLongLong(dim.ptr());
  if (!dim || d < 0 || d >= static_cast<long long>(q.active.size())) {
    if (dim && !PyErr_Occurred()) PyErr_Format(PyExc_IndexError, "a phase on dimension %lld of %zu", d, q.active.size());
    return false;
  }
  if (PyObject_SetAttrString(algorithm.ptr(), "stream", stream_object.ptr()) < 0) return false;
  s->phase = std::move(phase);
  s->algorithm = std::move(algorithm);
  s->current_queue_id = d;
  s->initialized = false;
  insert_stream(q.active[d], stream_object);
  return (previous < 0 || stream_removed(self, previous)) && stream_added(self, d);
}

// The hand-over from a kernel phase to the next: the kernel's queues when the stream
// is the kernel's, else the owner's Python method. A reference to the stream is held
// meanwhile (the move may drop the phase's own).
static bool finish_phase(PyObject* stream_handle) {
  py::object stream = py::reinterpret_borrow<py::object>(stream_handle);
  if (Py_TYPE(stream.ptr()) == stream_type) {
    py::object events = py::reinterpret_steal<py::object>(PyObject_GetAttrString(as_stream(stream)->owner.ptr(), "events"));
    if (!events) return false;
    RankEvents* rank = kernel_rank_events(events.ptr());
    if (rank == nullptr || !rank->queues) {
      PyErr_SetString(PyExc_TypeError, "a kernel stream's owner has no kernel queues");
      return false;
    }
    return proceed_to_next_phase(rank, stream);
  }
  py::object owner = py::reinterpret_steal<py::object>(PyObject_GetAttrString(stream.ptr(), "owner"));
  return owner && py::reinterpret_steal<py::object>(
                      PyObject_CallMethod(owner.ptr(), "proceed_to_next_phase", "O", stream.ptr()));
}

static void bind_streams(py::module_& module) {
  py::class_<Stream> stream(module, "Stream", collected<Stream>(),
                            "Stream(owner, dataset, stream_id, phases, priority): one chunk of a collective moving "
                            "through its phases on one rank (astra_core.system.stream); the algorithm of each phase "
                            "gets .stream = this stream as the phase becomes current.");
  stream.def(py::init<PhasePortObject, DataSetObject, long long, py::typing::List<PhaseObject>, long long>(),
             py::arg("owner"), py::arg("dataset"),
             py::arg("stream_id"), py::arg("phases"), py::arg("priority"));
  stream.def(
      "init",
      [](Stream& self) {
        py::object events = self.owner.attr("events");
        RankEvents* rank = kernel_rank_events(events.ptr());
        if (rank == nullptr) throw py::type_error("a kernel stream's owner has no kernel events");
        if (!stream_init(rank->clock, &self)) throw py::error_already_set();
      },
      "The stream got a slot on its queue: start the current phase.");
  stream.def_readonly("owner", &Stream::owner, "the rank's system layer (a PhasePort)");
  stream.def_readonly("dataset", &Stream::dataset, "the collective's DataSet");
  stream.def_readonly("stream_id", &Stream::stream_id, "the chunk's message tag");
  stream.def_readonly("priority", &Stream::priority, "higher goes first among waiting streams");
  stream.def_readonly("phases_to_go", &Stream::phases_to_go, "the phases after the current one");
  stream.def_readonly("phase", &Stream::phase, "the current Phase, or None");
  stream.def_readonly("algorithm", &Stream::algorithm, "the current phase's algorithm, or None");
  stream.def_readonly("current_queue_id", &Stream::current_queue_id, "its queue (-1: none yet)");
  stream.def_readonly("initialized", &Stream::initialized, "its current phase has started");
  stream.def_readonly("phase_start_ns", &Stream::phase_start_ns, "when the current phase started");
  stream_type = reinterpret_cast<PyTypeObject*>(stream.ptr());
}

// -- RankEvents: the stream queues

static void visit_queues(const RankEvents* self, visitproc visit, void* arg) {
  if (!self->queues) return;
  for (const py::object& stream : self->queues->ready) visit(stream.ptr(), arg);
  for (auto& queue : self->queues->active)
    for (const py::object& stream : queue) visit(stream.ptr(), arg);
}

static StreamQueues& queues_of(RankEvents& self) {
  if (!self.queues) throw std::runtime_error("the rank's stream queues are not configured");
  return *self.queues;
}

// A kernel Stream given by Python; TypeError naming ``method`` otherwise.
static const py::handle& kernel_stream(const py::handle& stream, const char* method) {
  if (Py_TYPE(stream.ptr()) != stream_type) throw py::type_error(std::string(method) + ": not a kernel Stream");
  return stream;
}

static void bind_stream_queues(py::class_<RankEvents>& events) {
  events.def(
      "configure_queues",
      [](RankEvents& self, Py_ssize_t dims, long long threshold) {
        self.queues = std::make_unique<StreamQueues>();
        self.queues->active.assign(dims, std::vector<py::object>());
        self.queues->running.assign(dims, 0);
        self.queues->threshold = threshold < 1 ? 1 : threshold;
      },
      py::arg("dimensions"), py::arg("active_chunks_per_dimension"),
      "the rank's stream queues, one per dimension.");
  events.def(
      "add_streams",
      [](RankEvents& self, const py::typing::List<StreamObject>& streams) {
        StreamQueues& queues = queues_of(self);
        for (const py::handle& stream : streams) {
          insert_stream(queues.ready, kernel_stream(stream, "add_streams"));
          if (!schedule_ready(&self)) throw py::error_already_set();
        }
      },
      py::arg("streams"), "queue a collective's streams (by priority) and start what may start.");
  events.def(
      "proceed_to_next_phase",
      [](RankEvents& self, const StreamObject& stream) {
        queues_of(self);
        if (!proceed_to_next_phase(&self, kernel_stream(stream, "proceed_to_next_phase")))
          throw py::error_already_set();
      },
      py::arg("stream"), "finish the stream's current phase and queue its next one (or retire it).");
  events.def(
      "active_streams",
      [](RankEvents& self) {
        py::typing::List<py::typing::List<StreamObject>> out;
        for (const auto& queue : queues_of(self).active) {
          py::list streams;
          for (const py::object& stream : queue) streams.append(stream);
          out.append(streams);
        }
        return out;
      },
      "Per dimension: the streams on its queue (running ones first).");
}
