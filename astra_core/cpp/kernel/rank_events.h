// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// RankEvents: one rank's events batched per tick (upstream Sys::register_event and
// call_events). The first event registered for a tick queues one event that runs
// the tick's whole bucket, in registration order, including entries registered for
// the same tick while the bucket runs. Also the rank's local-memory timing, which
// the windowed phases read.

struct RankEvents {
  Clock clock;
  // the pending ticks' buckets: a rank has a few at a time, so a list searched from the
  // end (the newest tick first) beats a hash table; emptied call vectors are reused
  std::vector<std::pair<double, std::vector<Call>>> buckets;
  std::vector<std::vector<Call>> spare;
  std::unique_ptr<struct StreamQueues> queues;  // the rank's stream queues (configure_queues), or none
  long long rank;
  long long endpoint_delay_ns;
  double local_mem_bytes_per_ns;
  PyObject* self = nullptr;  // its Python object (borrowed), looked up once (python_self)

  RankEvents(long long rank_, const py::handle& clock_object, long long endpoint, double bw)
      : rank(rank_), endpoint_delay_ns(endpoint), local_mem_bytes_per_ns(bw) {
    clock.set(clock_object.ptr());
  }
  ~RankEvents() { clear(); }

  int traverse(visitproc visit, void* arg) const;
  void clear();
};

static PyTypeObject* rank_events_type = nullptr;  // set by bind_rank_events

// ``o`` as the kernel's RankEvents, or nullptr when it is something else.
static inline RankEvents* kernel_rank_events(PyObject* o) {
  return bound_instance<RankEvents>(o, rank_events_type);
}

// The bucket of ``tick`` in ``self``'s list, or nullptr.
static inline std::vector<Call>* find_bucket(RankEvents* self, double tick) {
  auto& buckets = self->buckets;
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
  if (!self->spare.empty()) {
    calls.swap(self->spare.back());
    self->spare.pop_back();
  }
  calls.push_back(call);
  self->buckets.emplace_back(tick, std::move(calls));
  Call run = bound_call(CALL_BUCKET, python_self(self, self->self), self, 0);
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
  auto& buckets = self->buckets;
  for (size_t b = 0; b < buckets.size(); ++b) {
    if (buckets[b].first != tick) continue;
    std::vector<Call>& calls = buckets[b].second;
    for (Call& c : calls) release(c);  // what an error left unrun
    calls.clear();
    self->spare.push_back(std::move(calls));
    buckets[b] = std::move(buckets.back());
    buckets.pop_back();
    break;
  }
  return ok;
}

static void visit_queues(const RankEvents* self, visitproc visit, void* arg);

int RankEvents::traverse(visitproc visit, void* arg) const {
  Py_VISIT(clock.object.ptr());
  visit_queues(this, visit, arg);
  for (const auto& entry : buckets)
    for (const Call& c : entry.second) VISIT_CALL(c);
  return 0;
}

void RankEvents::clear() {
  std::vector<std::pair<double, std::vector<Call>>> calls;
  calls.swap(buckets);
  for (auto& entry : calls)
    for (Call& c : entry.second) release(c);
  queues.reset();
  clock.queue = nullptr;
  clock.object = py::object();
}

static void bind_stream_queues(py::class_<RankEvents>& events);

static void bind_rank_events(py::module_& module) {
  py::class_<RankEvents> events(
      module, "RankEvents", collected<RankEvents>(),
      "RankEvents(rank, clock, endpoint_delay_ns, local_mem_bytes_per_ns): one rank's events batched per tick "
      "(upstream Sys::register_event), and its local-memory timing.");
  events.def(py::init<long long, py::handle, long long, double>(), py::arg("rank"), py::arg("clock"),
             py::arg("endpoint_delay_ns"), py::arg("local_mem_bytes_per_ns"));
  events.def(
      "register_event",
      [](RankEvents& self, const TimeObject& delay_ns, const Callback& callback, const AnyObject& arg) {
        double delay;
        bool integral;
        if (!read_number(delay_ns.ptr(), &delay, &integral)) throw py::error_already_set();
        if (!(delay >= 0 && delay < INFINITY)) {
          bad_delay(delay_ns.ptr());
          throw py::error_already_set();
        }
        if (!register_call(&self, delay, integral, py_call(callback.ptr(), arg.ptr()))) throw py::error_already_set();
      },
      py::arg("delay_ns"), py::arg("callback"), py::arg("arg") = py::none(),
      "run callback(arg) after delay_ns, batched per tick (upstream Sys).");
  events.def(
      "reduction_delay_ns", [](const RankEvents& self, long long size) { return reduction_delay_ns(&self, size); },
      py::arg("size"), "ns to reduce size received bytes (one write, two reads).");
  events.def(
      "pending",
      [](const RankEvents& self) {
        size_t n = 0;
        for (const auto& entry : self.buckets)
          for (const Call& c : entry.second) n += c.kind != CALL_NONE;
        return n;
      },
      "The number of registered events not yet run.");
  events.def_readonly("rank", &RankEvents::rank, "the rank");
  events.def_readonly("endpoint_delay_ns", &RankEvents::endpoint_delay_ns, "NPU<->memory time of a packet (ns)");
  events.def_readonly("local_mem_bytes_per_ns", &RankEvents::local_mem_bytes_per_ns,
                      "local memory bandwidth (bytes/ns, 0: none given)");
  bind_stream_queues(events);
  rank_events_type = reinterpret_cast<PyTypeObject*>(events.ptr());
}
