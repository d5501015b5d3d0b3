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

struct AnalyticalLinks {
  PyObject_HEAD
  EventQueue* queue;  // owned
  std::vector<LinkDim>* dims;
  long long messages;
  long long bytes_sent;
  FlatMap<TallyKey, long long, TallyKeyHash>* tally;  // nullptr: not counting
  long long check_every, until_check;
  PyObject* on_check;  // owned, or nullptr
  // a physical topology: route(src, dst, bucket) (owned, or nullptr: the dims above),
  // its routes kept per flow bucket, and each link's speed and latency
  PyObject* route;
  long long route_buckets;
  RouteCache* routes;
  std::vector<double>* link_bytes_per_ns;
  std::vector<double>* link_latency_ns;
};

static PyTypeObject AnalyticalLinksType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// Whole ns as a double: past int64 (a nonsense input) the run's times must stay
// large, for the reports to refuse them, as Python's ints did.
static inline double analytical_delay_ns(const AnalyticalLinks* self, int64_t src, int64_t dst, int64_t size) {
  for (const LinkDim& d : *self->dims) {
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
static bool tally_message(AnalyticalLinks* self, int64_t src, int64_t dst, int64_t size) {
  TallyKey key{src, dst, size};
  long long* count = self->tally->find(key);
  if (count != nullptr) {
    ++*count;
  } else {
    self->tally->insert(key, 1);
  }
  if (--self->until_check > 0 || self->on_check == nullptr) return true;
  self->until_check = self->check_every;
  PyObject* r = PyObject_CallNoArgs(self->on_check);
  if (r == nullptr) return false;
  Py_DECREF(r);
  return true;
}

// The store-and-forward time over the physical route of (src, dst, tag), whole ns per
// hop, into ``out``; false with an error set (a route that cannot be had).
static bool analytical_route_delay_ns(AnalyticalLinks* self, int64_t src, int64_t dst, int64_t size, int64_t tag,
                                      double* out) {
  *out = 0;
  if (src == dst) return true;
  PyObject* hops = find_route(self->route, self->route_buckets, self->routes, src, dst, tag);
  if (hops == nullptr) return false;
  const std::vector<double>& bw = *self->link_bytes_per_ns;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(hops); ++i) {
    long long link = PyLong_AsLongLong(PyTuple_GET_ITEM(hops, i));
    if (link < 0 || link >= static_cast<long long>(bw.size())) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_IndexError, "a route crosses link %lld of %zu", link, bw.size());
      Py_DECREF(hops);
      return false;
    }
    *out += std::trunc((*self->link_latency_ns)[link] + static_cast<double>(size) / bw[link]);
  }
  Py_DECREF(hops);
  return true;
}

// Times a message and queues ``call`` (its references move here) for its arrival;
// false with an error set (the estimate's check stopped it, or a route failed).
static inline bool analytical_send(AnalyticalLinks* self, int64_t src, int64_t dst, int64_t size, int64_t tag,
                                   const Call& call) {
  double delay = 0;
  if ((self->tally != nullptr && !tally_message(self, src, dst, size)) ||
      (self->route != nullptr && !analytical_route_delay_ns(self, src, dst, size, tag, &delay))) {
    Call c = call;
    release(c);
    return false;
  }
  ++self->messages;
  self->bytes_sent += size;
  if (self->route == nullptr) delay = analytical_delay_ns(self, src, dst, size);
  EventQueue* q = self->queue;
  push_call(q, q->now + delay, q->now_integral, call);
  return true;
}

static PyObject* AnalyticalLinks_new(PyTypeObject* type, PyObject*, PyObject*) {
  AnalyticalLinks* self = reinterpret_cast<AnalyticalLinks*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->dims = new std::vector<LinkDim>();
  self->routes = new RouteCache();
  self->link_bytes_per_ns = new std::vector<double>();
  self->link_latency_ns = new std::vector<double>();
  return reinterpret_cast<PyObject*>(self);
}

static int AnalyticalLinks_init(AnalyticalLinks* self, PyObject* args, PyObject* kwds) {
  static const char* names[] = {"events", "dims", "route", "bytes_per_ns", "latency_ns", "route_buckets", nullptr};
  PyObject *events, *dims, *route = Py_None, *bandwidth = nullptr, *latency = nullptr;
  long long buckets = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O|OOOL", const_cast<char**>(names), &EventQueueType, &events, &dims,
                                   &route, &bandwidth, &latency, &buckets))
    return -1;
  if (route != Py_None) {
    if (bandwidth == nullptr || latency == nullptr ||
        !read_numbers(bandwidth, "bytes_per_ns: a sequence of numbers", self->link_bytes_per_ns) ||
        !read_numbers(latency, "latency_ns: a sequence of numbers", self->link_latency_ns) ||
        self->link_bytes_per_ns->size() != self->link_latency_ns->size()) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a route needs one bandwidth and one latency per link");
      return -1;
    }
    Py_INCREF(route);
    Py_XSETREF(self->route, route);
    self->route_buckets = buckets;
  }
  PyObject* seq = PySequence_Fast(dims, "dims: a sequence of (stride, npus, kind, latency_ns, bytes_per_ns)");
  if (seq == nullptr) return -1;
  self->dims->clear();
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
    LinkDim d;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "LLidd", &d.stride, &d.npus, &d.kind, &d.latency_ns,
                          &d.bytes_per_ns)) {
      Py_DECREF(seq);
      return -1;
    }
    self->dims->push_back(d);
  }
  Py_DECREF(seq);
  Py_INCREF(events);
  Py_XSETREF(self->queue, reinterpret_cast<EventQueue*>(events));
  return 0;
}

static int AnalyticalLinks_traverse(AnalyticalLinks* self, visitproc visit, void* arg) {
  Py_VISIT(self->queue);
  Py_VISIT(self->on_check);
  Py_VISIT(self->route);
  return 0;
}

static int AnalyticalLinks_clear(AnalyticalLinks* self) {
  Py_CLEAR(self->queue);
  Py_CLEAR(self->on_check);
  Py_CLEAR(self->route);
  clear_routes(self->routes);
  return 0;
}

static void AnalyticalLinks_dealloc(AnalyticalLinks* self) {
  PyObject_GC_UnTrack(self);
  AnalyticalLinks_clear(self);
  delete self->dims;
  delete self->tally;
  delete self->routes;
  delete self->link_bytes_per_ns;
  delete self->link_latency_ns;
  Py_TYPE(self)->tp_free(reinterpret_cast<PyObject*>(self));
}

// send(src, dst, size_bytes, on_delivered, arg=None, *, tag=0)
static PyObject* AnalyticalLinks_send(AnalyticalLinks* self, PyObject* const* args, Py_ssize_t nargs,
                                      PyObject* kwnames) {
  PyObject* bound[6];
  static const char* const names[] = {"src", "dst", "size_bytes", "on_delivered", "arg", "tag"};
  if (!bind_args("send", names, 6, 4, args, nargs, kwnames, bound)) return nullptr;
  long long src = PyLong_AsLongLong(bound[0]), dst = PyLong_AsLongLong(bound[1]);
  long long size = PyLong_AsLongLong(bound[2]);
  long long tag = bound[5] == Py_None ? 0 : PyLong_AsLongLong(bound[5]);
  if (PyErr_Occurred()) return nullptr;
  if (!analytical_send(self, src, dst, size, tag, py_call(bound[3], bound[4]))) return nullptr;
  Py_RETURN_NONE;
}

static PyObject* AnalyticalLinks_delay_ns(AnalyticalLinks* self, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "delay_ns(src, dst, size_bytes)");
    return nullptr;
  }
  long long src = PyLong_AsLongLong(args[0]), dst = PyLong_AsLongLong(args[1]), size = PyLong_AsLongLong(args[2]);
  if (PyErr_Occurred()) return nullptr;
  if (self->route == nullptr) return PyLong_FromDouble(analytical_delay_ns(self, src, dst, size));
  double delay;
  if (!analytical_route_delay_ns(self, src, dst, size, 0, &delay)) return nullptr;
  return PyLong_FromDouble(delay);
}

// start_tally(check_every, on_check=None)
static PyObject* AnalyticalLinks_start_tally(AnalyticalLinks* self, PyObject* args) {
  long long every;
  PyObject* on_check = Py_None;
  if (!PyArg_ParseTuple(args, "L|O", &every, &on_check)) return nullptr;
  if (every < 1) {
    PyErr_SetString(PyExc_ValueError, "check_every must be at least 1");
    return nullptr;
  }
  if (self->tally == nullptr) self->tally = new FlatMap<TallyKey, long long, TallyKeyHash>();
  self->check_every = self->until_check = every;
  Py_XDECREF(self->on_check);
  self->on_check = nullptr;
  if (on_check != Py_None) {
    Py_INCREF(on_check);
    self->on_check = on_check;
  }
  Py_RETURN_NONE;
}

static PyObject* AnalyticalLinks_tally(AnalyticalLinks* self, PyObject*) {
  PyObject* out = PyDict_New();
  if (out == nullptr || self->tally == nullptr) return out;
  bool ok = true;
  self->tally->for_each([&](const TallyKey& k, long long& count) {
    if (!ok) return;
    PyObject* key = Py_BuildValue("(LLL)", static_cast<long long>(k.src), static_cast<long long>(k.dst),
                                  static_cast<long long>(k.size));
    PyObject* value = PyLong_FromLongLong(count);
    ok = key != nullptr && value != nullptr && PyDict_SetItem(out, key, value) == 0;
    Py_XDECREF(key);
    Py_XDECREF(value);
  });
  if (!ok) {
    Py_DECREF(out);
    return nullptr;
  }
  return out;
}

static PyMethodDef AnalyticalLinks_methods[] = {
    {"start_tally", reinterpret_cast<PyCFunction>(AnalyticalLinks_start_tally), METH_VARARGS,
     "start_tally(check_every, on_check=None): count every message sent from now by (src, dst, bytes); "
     "on_check() every check_every messages, which may raise to stop the run."},
    {"tally", reinterpret_cast<PyCFunction>(AnalyticalLinks_tally), METH_NOARGS,
     "{(src, dst, bytes): messages} counted since start_tally ({} before it)."},
    {"send", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(AnalyticalLinks_send)),
     METH_FASTCALL | METH_KEYWORDS,
     "send(src, dst, size_bytes, on_delivered, arg=None, *, tag=0): on_delivered(arg) when the message is in."},
    {"delay_ns", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(AnalyticalLinks_delay_ns)),
     METH_FASTCALL, "delay_ns(src, dst, size_bytes): latency + serialization, whole ns (0 to itself; tag 0 on a route)."},
    {nullptr, nullptr, 0, nullptr}};

static PyMemberDef AnalyticalLinks_members[] = {
    {"messages", T_LONGLONG, offsetof(AnalyticalLinks, messages), READONLY, "messages sent"},
    {"bytes_sent", T_LONGLONG, offsetof(AnalyticalLinks, bytes_sent), READONLY, "bytes sent"},
    {nullptr, 0, 0, 0, nullptr}};

static PyObject* AnalyticalLinks_get_native_send(AnalyticalLinks* self, void*);

static PyGetSetDef AnalyticalLinks_getset[] = {
    {"native_send", reinterpret_cast<getter>(AnalyticalLinks_get_native_send), nullptr,
     "the model's send for the kernel's matcher (a capsule astra.native_send; docs/plugins.md)", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

static void init_analytical_links_type() {
  PyTypeObject& t = AnalyticalLinksType;
  t.tp_name = "_astra_kernel.AnalyticalLinks";
  t.tp_basicsize = sizeof(AnalyticalLinks);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  t.tp_doc =
      "AnalyticalLinks(events, dims, route=None, bytes_per_ns=(), latency_ns=(), route_buckets=0): upstream's "
      "congestion-unaware analytical delays on the EventQueue events; dims: (stride, npus, kind 0 Ring / 1 Switch / "
      "2 FullyConnected, latency_ns, bytes_per_ns) per dimension; with route (route(src, dst, tag) -> link ids, "
      "or with route_buckets > 0 route(src, dst, bucket)), the sum over a message's route of int(latency + bytes / "
      "bandwidth) per link instead.";
  t.tp_new = AnalyticalLinks_new;
  t.tp_init = reinterpret_cast<initproc>(AnalyticalLinks_init);
  t.tp_dealloc = reinterpret_cast<destructor>(AnalyticalLinks_dealloc);
  t.tp_traverse = reinterpret_cast<traverseproc>(AnalyticalLinks_traverse);
  t.tp_clear = reinterpret_cast<inquiry>(AnalyticalLinks_clear);
  t.tp_methods = AnalyticalLinks_methods;
  t.tp_members = AnalyticalLinks_members;
  t.tp_getset = AnalyticalLinks_getset;
}
