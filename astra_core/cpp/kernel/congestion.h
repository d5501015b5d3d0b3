// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// CongestionLinks: upstream's congestion-aware analytical model (astra-network-
// analytical congestion_aware). A message crosses its route link by link, store and
// forward; a link serves one message at a time, first come first served. Serving B
// bytes keeps a link busy int(B / bandwidth) ns, and the message is at the link's far
// end int(latency + B / bandwidth) ns after it started (both truncated as upstream's
// Link). Routes come from a callable (the kernel's ShortestPaths, routing.h, or Python's):
// route(src, dst, tag) -> link ids, or, with route_buckets > 0, route(src, dst,
// flow_hash(src, dst, tag) % route_buckets), asked once per bucket and kept here.

struct RouteKey {
  int64_t src, dst;
  uint64_t bucket;
  bool operator==(const RouteKey& o) const { return src == o.src && dst == o.dst && bucket == o.bucket; }
};

struct RouteKeyHash {
  size_t operator()(const RouteKey& k) const {
    return static_cast<size_t>(mix64(static_cast<uint64_t>(k.src) * 0x9E3779B97F4A7C15ULL ^
                                     mix64(static_cast<uint64_t>(k.dst) ^ (k.bucket << 40))));
  }
};

typedef FlatMap<RouteKey, PyObject*, RouteKeyHash> RouteCache;

// The route of a message (src, dst, tag) as a new reference to a tuple of link ids:
// route(src, dst, tag), or with buckets > 0 route(src, dst, flow_hash(src, dst, tag) %
// buckets), kept in ``cache`` (owned tuples) per bucket. nullptr with an error set.
static PyObject* find_route(PyObject* route, long long buckets, RouteCache* cache, int64_t src, int64_t dst,
                            int64_t tag) {
  RouteKey key{src, dst, 0};
  if (buckets > 0) {
    key.bucket = flow_hash(src, dst, tag) % static_cast<uint64_t>(buckets);
    PyObject** found = cache->find(key);
    if (found != nullptr) {
      Py_INCREF(*found);
      return *found;
    }
  }
  long long third = buckets > 0 ? static_cast<long long>(key.bucket) : static_cast<long long>(tag);
  PyObject* hops;
  if (Py_TYPE(route) == &ShortestPathsType) {  // the kernel's own routing: no Python call
    std::vector<int32_t> links;
    ShortestPaths* paths = reinterpret_cast<ShortestPaths*>(route);
    hops = shortest_route(paths, src, dst, static_cast<uint64_t>(third), &links) ? links_tuple(links) : nullptr;
  } else {
    PyObject* links = PyObject_CallFunction(route, "LLL", static_cast<long long>(src), static_cast<long long>(dst), third);
    hops = links == nullptr ? nullptr : PySequence_Tuple(links);
    Py_XDECREF(links);
  }
  if (hops != nullptr && buckets > 0) {
    Py_INCREF(hops);
    cache->insert(key, hops);
  }
  return hops;
}

// Releases the tuples of a route cache and empties it.
static void clear_routes(RouteCache* cache) {
  if (cache == nullptr) return;
  cache->for_each([](const RouteKey&, PyObject*& route) { Py_CLEAR(route); });
  cache->clear();
}

struct CongestionMessage {
  PyObject* route;  // owned tuple of link ids
  Py_ssize_t hop;
  int64_t size;
  Call on_delivered;
  int64_t src, dst, tag;
  bool resend;  // sent again from its source when its current hop ends (set_links)
};

struct CongestionLink {
  double bytes_per_ns;
  double latency_ns;
  bool busy;
  std::deque<uint32_t> queue;
  long long bytes;
  long long busy_ns;
  long long max_queue;
  bool down;
};

struct CongestionLinks {
  PyObject_HEAD
  EventQueue* queue;  // owned
  PyObject* route;    // owned: route(src, dst, tag)
  long long route_buckets;  // > 0: a route depends on (src, dst, flow_hash % buckets) only: cached
  // owned tuples of ints, which no reference cycle can pass: not visited by the GC
  RouteCache* routes;
  std::vector<CongestionLink>* links;
  std::vector<CongestionMessage>* messages_in_flight;
  std::vector<uint32_t>* free_messages;
  long long messages;
};

static PyTypeObject CongestionLinksType = {PyVarObject_HEAD_INIT(nullptr, 0)};

static bool congestion_transmit(CongestionLinks* self, Py_ssize_t link_id, uint32_t m) {
  CongestionLink& link = (*self->links)[link_id];
  link.busy = true;
  int64_t size = (*self->messages_in_flight)[m].size;
  double serialization = static_cast<double>(size) / link.bytes_per_ns;
  link.bytes += size;
  double busy = std::trunc(serialization);
  link.busy_ns += static_cast<long long>(busy);
  EventQueue* q = self->queue;
  PyObject* me = reinterpret_cast<PyObject*>(self);
  // Arrival first, then the link free: upstream's order for same-time events.
  push_call(q, q->now + std::trunc(link.latency_ns + serialization), q->now_integral,
            kernel_call(CALL_HOP_ARRIVED, me, m));
  push_call(q, q->now + busy, q->now_integral, kernel_call(CALL_LINK_FREE, me, link_id));
  return true;
}

static bool congestion_enqueue(CongestionLinks* self, uint32_t m) {
  CongestionMessage& msg = (*self->messages_in_flight)[m];
  Py_ssize_t link_id = PyLong_AsSsize_t(PyTuple_GET_ITEM(msg.route, msg.hop));
  if (link_id == -1 && PyErr_Occurred()) return false;
  if (link_id < 0 || link_id >= static_cast<Py_ssize_t>(self->links->size())) {
    PyErr_Format(PyExc_IndexError, "a route crosses link %zd of %zu", link_id, self->links->size());
    return false;
  }
  CongestionLink& link = (*self->links)[link_id];
  if (!link.busy) return congestion_transmit(self, link_id, m);
  link.queue.push_back(m);
  if (static_cast<long long>(link.queue.size()) > link.max_queue) link.max_queue = link.queue.size();
  return true;
}

// Routes a message and starts it on its first link; ``call`` (references move here)
// runs when it has crossed its last.
static bool congestion_send(CongestionLinks* self, int64_t src, int64_t dst, int64_t size, int64_t tag,
                            const Call& call) {
  ++self->messages;
  PyObject* hops = find_route(self->route, self->route_buckets, self->routes, src, dst, tag);
  if (hops == nullptr) {
    Call c = call;
    release(c);
    return false;
  }
  if (PyTuple_GET_SIZE(hops) == 0) {
    Py_DECREF(hops);
    EventQueue* q = self->queue;
    push_call(q, q->now, q->now_integral, call);
    return true;
  }
  uint32_t m;
  if (!self->free_messages->empty()) {
    m = self->free_messages->back();
    self->free_messages->pop_back();
  } else {
    m = static_cast<uint32_t>(self->messages_in_flight->size());
    self->messages_in_flight->emplace_back();
  }
  (*self->messages_in_flight)[m] = CongestionMessage{hops, 0, size, call, src, dst, tag, false};
  return congestion_enqueue(self, m);
}

// Message ``m`` starts again from its source, on the route the routing gives now.
static bool congestion_resend(CongestionLinks* self, uint32_t m) {
  CongestionMessage& msg = (*self->messages_in_flight)[m];
  PyObject* hops = find_route(self->route, self->route_buckets, self->routes, msg.src, msg.dst, msg.tag);
  if (hops == nullptr) return false;
  Py_SETREF(msg.route, hops);
  msg.hop = 0;
  msg.resend = false;
  return congestion_enqueue(self, m);
}

static bool congestion_hop_arrived(CongestionLinks* self, uint32_t m) {
  CongestionMessage& msg = (*self->messages_in_flight)[m];
  if (msg.resend) return congestion_resend(self, m);
  if (++msg.hop < PyTuple_GET_SIZE(msg.route)) return congestion_enqueue(self, m);
  Call c = msg.on_delivered;
  msg.on_delivered = Call{CALL_NONE, nullptr, nullptr, {0}};
  Py_CLEAR(msg.route);
  self->free_messages->push_back(m);
  bool ok = fire(c);
  release(c);
  return ok;
}

static bool congestion_link_free(CongestionLinks* self, Py_ssize_t link_id) {
  CongestionLink& link = (*self->links)[link_id];
  link.busy = false;
  if (link.queue.empty()) return true;
  uint32_t m = link.queue.front();
  link.queue.pop_front();
  return congestion_transmit(self, link_id, m);
}

// Whether the rest of a message's route (the link it is on or waits for, and after)
// crosses a link that is down; -1 with an error set.
static int congestion_crosses_down(CongestionLinks* self, const CongestionMessage& msg) {
  for (Py_ssize_t h = msg.hop; h < PyTuple_GET_SIZE(msg.route); ++h) {
    Py_ssize_t link = PyLong_AsSsize_t(PyTuple_GET_ITEM(msg.route, h));
    if (link == -1 && PyErr_Occurred()) return -1;
    if (link >= 0 && link < static_cast<Py_ssize_t>(self->links->size()) && (*self->links)[link].down) return 1;
  }
  return 0;
}

// Links change now (set_links): ``bandwidth[i]`` bytes/ns for link ``changed[i]`` (0:
// down), and with ``route`` (not None) the routing over the links up now, which every
// message sent from now on takes. A message transmitting keeps its times. One whose
// route ahead crosses a link that went down is sent again from its source on its new
// route (RoCE's go-back-N retransmission): at once if it waits in a link's queue,
// else when its current hop ends (a message on the link that went down is lost there).
static bool congestion_set_links(CongestionLinks* self, const std::vector<int32_t>& changed,
                                 const std::vector<double>& bandwidth, PyObject* route) {
  std::vector<CongestionLink>& links = *self->links;
  bool went_down = false;
  for (size_t i = 0; i < changed.size(); ++i) {
    CongestionLink& link = links[changed[i]];
    went_down = went_down || (bandwidth[i] == 0.0 && !link.down);
    link.down = bandwidth[i] == 0.0;
    if (bandwidth[i] > 0.0) link.bytes_per_ns = bandwidth[i];
  }
  if (route != Py_None) {
    Py_INCREF(route);
    Py_SETREF(self->route, route);
    clear_routes(self->routes);
  }
  if (!went_down) return true;
  std::vector<CongestionMessage>& messages = *self->messages_in_flight;
  std::vector<char> queued(messages.size(), 0);
  std::vector<uint32_t> resend;
  for (CongestionLink& link : links) {
    std::deque<uint32_t> kept;
    for (uint32_t m : link.queue) {
      queued[m] = 1;
      int crosses = congestion_crosses_down(self, messages[m]);
      if (crosses < 0) return false;
      if (crosses) resend.push_back(m);
      else kept.push_back(m);
    }
    link.queue.swap(kept);
  }
  for (size_t m = 0; m < messages.size(); ++m) {
    if (messages[m].route == nullptr || queued[m]) continue;
    int crosses = congestion_crosses_down(self, messages[m]);
    if (crosses < 0) return false;
    messages[m].resend = crosses == 1;
  }
  for (uint32_t m : resend)
    if (!congestion_resend(self, m)) return false;
  return true;
}

static PyObject* CongestionLinks_new(PyTypeObject* type, PyObject*, PyObject*) {
  CongestionLinks* self = reinterpret_cast<CongestionLinks*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->links = new std::vector<CongestionLink>();
  self->routes = new RouteCache();
  self->messages_in_flight = new std::vector<CongestionMessage>();
  self->free_messages = new std::vector<uint32_t>();
  return reinterpret_cast<PyObject*>(self);
}

static int CongestionLinks_init(CongestionLinks* self, PyObject* args, PyObject* kwds) {
  static const char* names[] = {"events", "route", "bytes_per_ns", "latency_ns", "route_buckets", nullptr};
  PyObject *events, *route, *bandwidth, *latency;
  long long buckets = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OOO|L", const_cast<char**>(names), &EventQueueType, &events,
                                   &route, &bandwidth, &latency, &buckets))
    return -1;
  self->route_buckets = buckets;
  PyObject* bw = PySequence_Fast(bandwidth, "bytes_per_ns: a sequence of numbers");
  PyObject* lat = bw == nullptr ? nullptr : PySequence_Fast(latency, "latency_ns: a sequence of numbers");
  if (lat == nullptr || PySequence_Fast_GET_SIZE(bw) != PySequence_Fast_GET_SIZE(lat)) {
    if (lat != nullptr) PyErr_SetString(PyExc_ValueError, "one bandwidth and one latency per link");
    Py_XDECREF(bw);
    Py_XDECREF(lat);
    return -1;
  }
  self->links->clear();
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(bw); ++i) {
    CongestionLink link{};
    link.bytes_per_ns = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(bw, i));
    link.latency_ns = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(lat, i));
    if (PyErr_Occurred()) {
      Py_DECREF(bw);
      Py_DECREF(lat);
      return -1;
    }
    self->links->push_back(link);
  }
  Py_DECREF(bw);
  Py_DECREF(lat);
  Py_INCREF(events);
  Py_XSETREF(self->queue, reinterpret_cast<EventQueue*>(events));
  Py_INCREF(route);
  Py_XSETREF(self->route, route);
  return 0;
}

static int CongestionLinks_traverse(CongestionLinks* self, visitproc visit, void* arg) {
  Py_VISIT(self->queue);
  Py_VISIT(self->route);
  if (self->messages_in_flight != nullptr) {
    for (CongestionMessage& m : *self->messages_in_flight) {
      Py_VISIT(m.route);
      VISIT_CALL(m.on_delivered);
    }
  }
  return 0;
}

static int CongestionLinks_clear(CongestionLinks* self) {
  Py_CLEAR(self->queue);
  Py_CLEAR(self->route);
  clear_routes(self->routes);
  if (self->messages_in_flight != nullptr) {
    for (CongestionMessage& m : *self->messages_in_flight) {
      Py_CLEAR(m.route);
      release(m.on_delivered);
    }
  }
  return 0;
}

static void CongestionLinks_dealloc(CongestionLinks* self) {
  PyObject_GC_UnTrack(self);
  CongestionLinks_clear(self);
  delete self->links;
  delete self->routes;
  delete self->messages_in_flight;
  delete self->free_messages;
  Py_TYPE(self)->tp_free(reinterpret_cast<PyObject*>(self));
}

// send(src, dst, size_bytes, on_delivered, arg=None, *, tag=0)
static PyObject* CongestionLinks_send(CongestionLinks* self, PyObject* const* args, Py_ssize_t nargs,
                                      PyObject* kwnames) {
  PyObject* bound[6];
  static const char* const names[] = {"src", "dst", "size_bytes", "on_delivered", "arg", "tag"};
  if (!bind_args("send", names, 6, 4, args, nargs, kwnames, bound)) return nullptr;
  int64_t src, dst, size, tag = 0;
  if (!read_int64(bound[0], &src) || !read_int64(bound[1], &dst) || !read_int64(bound[2], &size)) return nullptr;
  if (bound[5] != Py_None && !read_int64(bound[5], &tag)) return nullptr;
  if (!congestion_send(self, src, dst, size, tag, py_call(bound[3], bound[4]))) return nullptr;
  Py_RETURN_NONE;
}

// A per-link counter as a list of ints.
static PyObject* link_counter(CongestionLinks* self, long long CongestionLink::*field) {
  PyObject* out = PyList_New(static_cast<Py_ssize_t>(self->links->size()));
  if (out == nullptr) return nullptr;
  for (size_t i = 0; i < self->links->size(); ++i) {
    PyObject* value = PyLong_FromLongLong((*self->links)[i].*field);
    if (value == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyList_SET_ITEM(out, i, value);
  }
  return out;
}

static PyObject* CongestionLinks_get_bytes(CongestionLinks* self, void*) {
  return link_counter(self, &CongestionLink::bytes);
}
static PyObject* CongestionLinks_get_busy(CongestionLinks* self, void*) {
  return link_counter(self, &CongestionLink::busy_ns);
}
static PyObject* CongestionLinks_get_max_queue(CongestionLinks* self, void*) {
  return link_counter(self, &CongestionLink::max_queue);
}

// The arguments of a model's set_links(links, bytes_per_ns, route=None) over ``n_links``
// links: false with an error set for a link id out of range or a bandwidth that is
// negative or not finite.
static bool read_link_changes(PyObject* args, size_t n_links, std::vector<int32_t>* changed,
                              std::vector<double>* bandwidth, PyObject** route) {
  PyObject *links_obj, *bandwidth_obj;
  *route = Py_None;
  if (!PyArg_ParseTuple(args, "OO|O", &links_obj, &bandwidth_obj, route) ||
      !read_numbers(links_obj, "links: link ids", changed) ||
      !read_numbers(bandwidth_obj, "bytes_per_ns: a sequence of numbers", bandwidth))
    return false;
  if (changed->size() != bandwidth->size()) {
    PyErr_SetString(PyExc_ValueError, "set_links: one bandwidth per link");
    return false;
  }
  for (size_t i = 0; i < changed->size(); ++i) {
    int32_t link = (*changed)[i];
    if (link < 0 || static_cast<size_t>(link) >= n_links) {
      PyErr_Format(PyExc_IndexError, "set_links: no link %d (links are 0..%zu)", link, n_links - 1);
      return false;
    }
    if (!((*bandwidth)[i] >= 0 && (*bandwidth)[i] < INFINITY)) {
      PyErr_Format(PyExc_ValueError, "set_links: link %d: bandwidth must be >= 0 and finite", link);
      return false;
    }
  }
  return true;
}

static PyObject* CongestionLinks_set_links(CongestionLinks* self, PyObject* args) {
  std::vector<int32_t> changed;
  std::vector<double> bandwidth;
  PyObject* route;
  if (!read_link_changes(args, self->links->size(), &changed, &bandwidth, &route) ||
      !congestion_set_links(self, changed, bandwidth, route))
    return nullptr;
  Py_RETURN_NONE;
}

static PyMethodDef CongestionLinks_methods[] = {
    {"send", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(CongestionLinks_send)),
     METH_FASTCALL | METH_KEYWORDS,
     "send(src, dst, size_bytes, on_delivered, arg=None, *, tag=0): on_delivered(arg) when the message has "
     "crossed its route."},
    {"set_links", reinterpret_cast<PyCFunction>(CongestionLinks_set_links), METH_VARARGS,
     "set_links(links, bytes_per_ns, route=None): links change bandwidth now (0: down); with route, the routing "
     "over the links up, which messages sent from now take (those whose route ahead went down are sent again)"},
    {nullptr, nullptr, 0, nullptr}};

static PyMemberDef CongestionLinks_members[] = {
    {"messages", T_LONGLONG, offsetof(CongestionLinks, messages), READONLY, "messages sent"},
    {nullptr, 0, 0, 0, nullptr}};

static PyObject* CongestionLinks_get_native_send(CongestionLinks* self, void*);

static PyGetSetDef CongestionLinks_getset[] = {
    {"native_send", reinterpret_cast<getter>(CongestionLinks_get_native_send), nullptr,
     "the model's send for the kernel's matcher (a capsule astra.native_send; docs/plugins.md)", nullptr},
    {"link_bytes", reinterpret_cast<getter>(CongestionLinks_get_bytes), nullptr, "bytes that crossed each link",
     nullptr},
    {"link_busy_ns", reinterpret_cast<getter>(CongestionLinks_get_busy), nullptr, "ns each link transmitted",
     nullptr},
    {"max_queue", reinterpret_cast<getter>(CongestionLinks_get_max_queue), nullptr,
     "the most messages that waited for each link", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

static void init_congestion_links_type() {
  PyTypeObject& t = CongestionLinksType;
  t.tp_name = "_astra_kernel.CongestionLinks";
  t.tp_basicsize = sizeof(CongestionLinks);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  t.tp_doc =
      "CongestionLinks(events, route, bytes_per_ns, latency_ns, route_buckets=0): upstream's congestion-aware "
      "analytical links (store and forward, one message at a time per link, FIFO) on the EventQueue events; "
      "route(src, dst, tag) gives a message's link ids; with route_buckets > 0, route(src, dst, bucket) gives "
      "those of flow bucket flow_hash(src, dst, tag) % route_buckets, asked for once.";
  t.tp_new = CongestionLinks_new;
  t.tp_init = reinterpret_cast<initproc>(CongestionLinks_init);
  t.tp_dealloc = reinterpret_cast<destructor>(CongestionLinks_dealloc);
  t.tp_traverse = reinterpret_cast<traverseproc>(CongestionLinks_traverse);
  t.tp_clear = reinterpret_cast<inquiry>(CongestionLinks_clear);
  t.tp_methods = CongestionLinks_methods;
  t.tp_members = CongestionLinks_members;
  t.tp_getset = CongestionLinks_getset;
}
