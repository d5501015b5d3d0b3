// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// AnalyticalLinks: upstream's congestion-unaware analytical model
// (astra-network-analytical BasicTopology): a message of B bytes between NPUs that
// first differ in dimension d takes hops * latency_d + B / bandwidth_d ns, truncated
// to whole ns; hops: Ring the shorter way round, Switch 2, FullyConnected 1. On a
// physical topology (``route`` given) a message takes the sum over its route of
// int(latency + B / bandwidth) per link: analytical-congestion's hops without queueing.

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

static const AstraKernelApi* kernel_c_api();  // the kernel's C API (native_api.h)

struct AnalyticalLinks {
  py::object events;            // the EventQueue
  EventQueue* queue = nullptr;  // borrowed from events
  std::vector<LinkDim> dims;
  long long messages = 0;
  long long bytes_sent = 0;
  std::optional<FlatMap<TallyKey, long long, TallyKeyHash>> tally;  // empty: not counting
  long long check_every = 0, until_check = 0;
  py::object on_check;  // None: no check
  // a physical topology: route(src, dst, bucket) (None: the dims above), its routes
  // kept per flow bucket, and each link's speed and latency
  py::object route;
  long long route_buckets = 0;
  astra::Routes routes;              // the kernel's routes of a model, through its C API
  std::vector<int32_t> route_links;  // the route being timed
  std::vector<double> link_bytes_per_ns;
  std::vector<double> link_latency_ns;
  AstraNativeSend native_entry{};  // what its native_send capsule points to

  // Raises TypeError (events not an EventQueue, a malformed dimension) or ValueError (a
  // route without one bandwidth and one latency per link).
  AnalyticalLinks(const py::object& events_queue, const py::handle& link_dims, const py::object& routing,
                  const py::handle& bytes_per_ns, const py::handle& latency_ns, long long buckets)
      : events(events_queue), on_check(py::none()), route(routing), route_buckets(buckets),
        routes(kernel_c_api(), route.ptr(), buckets, true) {
    queue = kernel_queue(events.ptr());
    if (queue == nullptr) throw py::type_error("AnalyticalLinks: events must be an EventQueue");
    if (!route.is_none() &&
        (!read_numbers(bytes_per_ns.ptr(), "bytes_per_ns: a sequence of numbers", &link_bytes_per_ns) ||
         !read_numbers(latency_ns.ptr(), "latency_ns: a sequence of numbers", &link_latency_ns) ||
         link_bytes_per_ns.size() != link_latency_ns.size())) {
      if (PyErr_Occurred()) throw py::error_already_set();
      throw py::value_error("a route needs one bandwidth and one latency per link");
    }
    for (const py::handle& item : py::reinterpret_borrow<py::sequence>(link_dims)) {
      LinkDim d;
      if (!PyArg_ParseTuple(item.ptr(), "LLidd", &d.stride, &d.npus, &d.kind, &d.latency_ns, &d.bytes_per_ns))
        throw py::error_already_set();
      dims.push_back(d);
    }
  }

  int traverse(visitproc visit, void* arg) const {
    Py_VISIT(events.ptr());
    Py_VISIT(on_check.ptr());
    Py_VISIT(route.ptr());
    return 0;
  }

  void clear() {
    on_check = py::none();
    route = py::none();
    routes.set(route.ptr());
  }

  // Whole ns as a double: past int64 (a nonsense input) the run's times must stay
  // large, for the reports to refuse them, as Python's ints did.
  double dims_delay_ns(int64_t src, int64_t dst, int64_t size) const {
    for (const LinkDim& d : dims) {
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
  bool count(int64_t src, int64_t dst, int64_t size) {
    TallyKey key{src, dst, size};
    if (long long* n = tally->find(key)) ++*n;
    else tally->insert(key, 1);
    if (--until_check > 0 || on_check.is_none()) return true;
    until_check = check_every;
    PyObject* r = PyObject_CallNoArgs(on_check.ptr());
    Py_XDECREF(r);
    return r != nullptr;
  }

  // The store-and-forward time over the physical route of (src, dst, tag), whole ns per
  // hop, into ``out``; false with an error set (a route that cannot be had).
  bool route_delay_ns(int64_t src, int64_t dst, int64_t size, int64_t tag, double* out) {
    *out = 0;
    if (src == dst) return true;
    if (!routes.find(src, dst, tag, &route_links)) return false;
    for (int32_t link : route_links) {
      if (link < 0 || static_cast<size_t>(link) >= link_bytes_per_ns.size()) {
        PyErr_Format(PyExc_IndexError, "a route crosses link %d of %zu", link, link_bytes_per_ns.size());
        return false;
      }
      *out += std::trunc(link_latency_ns[link] + static_cast<double>(size) / link_bytes_per_ns[link]);
    }
    return true;
  }

  // Times a message and queues ``call`` (its references move here) for its arrival;
  // false with an error set (the estimate's check stopped it, or a route failed).
  bool send(int64_t src, int64_t dst, int64_t size, int64_t tag, const Call& call) {
    double delay = 0;
    if ((tally && !count(src, dst, size)) || (!route.is_none() && !route_delay_ns(src, dst, size, tag, &delay))) {
      Call c = call;
      release(c);
      return false;
    }
    ++messages;
    bytes_sent += size;
    if (route.is_none()) delay = dims_delay_ns(src, dst, size);
    push_call(queue, queue->now + delay, queue->now_integral, call);
    return true;
  }

  long long delay_ns(int64_t src, int64_t dst, int64_t size) {
    double delay = 0;
    if (route.is_none()) delay = dims_delay_ns(src, dst, size);
    else if (!route_delay_ns(src, dst, size, 0, &delay)) throw py::error_already_set();
    return static_cast<long long>(delay);
  }

  void start_tally(long long every, const py::object& check) {
    if (every < 1) throw py::value_error("check_every must be at least 1");
    if (!tally) tally.emplace();
    check_every = until_check = every;
    on_check = check;
  }

  py::dict tally_dict() {
    py::dict out;
    if (tally)
      tally->for_each([&](const TallyKey& k, long long& n) { out[py::make_tuple(k.src, k.dst, k.size)] = n; });
    return out;
  }
};

// The model's send for the kernel's matcher (native_api.h).
static PyObject* analytical_native_send_capsule(AnalyticalLinks* links);

static void bind_analytical_links(py::module_& module) {
  py::class_<AnalyticalLinks> links(
      module, "AnalyticalLinks", collected<AnalyticalLinks>(),
      "AnalyticalLinks(events, dims, route=None, bytes_per_ns=(), latency_ns=(), route_buckets=0): upstream's "
      "congestion-unaware analytical delays on the EventQueue events; dims: (stride, npus, kind 0 Ring / 1 Switch / "
      "2 FullyConnected, latency_ns, bytes_per_ns) per dimension; with route (route(src, dst, tag) -> link ids, "
      "or with route_buckets > 0 route(src, dst, bucket)), the sum over a message's route of int(latency + bytes / "
      "bandwidth) per link instead.");
  links.def(py::init<py::object, py::handle, py::object, py::handle, py::handle, long long>(), py::arg("events"),
            py::arg("dims"), py::arg("route") = py::none(), py::arg("bytes_per_ns") = py::tuple(),
            py::arg("latency_ns") = py::tuple(), py::arg("route_buckets") = 0);
  links.def(
      "send",
      [](AnalyticalLinks& self, int64_t src, int64_t dst, int64_t size, const Callback& on_delivered,
         const AnyObject& arg, int64_t tag) {
        if (!self.send(src, dst, size, tag, py_call(on_delivered.ptr(), arg.ptr()))) throw py::error_already_set();
      },
      py::arg("src"), py::arg("dst"), py::arg("size_bytes"), py::arg("on_delivered"), py::arg("arg") = py::none(),
      py::kw_only(), py::arg("tag") = 0, "on_delivered(arg) when the message is in.");
  links.def("delay_ns", &AnalyticalLinks::delay_ns, py::arg("src"), py::arg("dst"), py::arg("size_bytes"),
            "latency + serialization, whole ns (0 to itself; tag 0 on a route).");
  links.def("start_tally", &AnalyticalLinks::start_tally, py::arg("check_every"), py::arg("on_check") = py::none(),
            "count every message sent from now by (src, dst, bytes); on_check() every check_every messages, which "
            "may raise to stop the run.");
  links.def("tally", &AnalyticalLinks::tally_dict, "{(src, dst, bytes): messages} counted since start_tally ({} before it).");
  links.def_readonly("messages", &AnalyticalLinks::messages, "messages sent");
  links.def_readonly("bytes_sent", &AnalyticalLinks::bytes_sent, "bytes sent");
  links.def_property_readonly(
      "native_send",
      [](AnalyticalLinks& self) { return py::reinterpret_steal<py::object>(analytical_native_send_capsule(&self)); },
      "the model's send for the kernel's matcher (a capsule astra.native_send; docs/plugins.md)");
}
