// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// ShortestPaths: the physical topology's default routing (astra_routing.h's
// RoutingGraph) for Python and for the kernel's models, and flow_hash for Python.

static PyObject* kernel_flow_hash(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "flow_hash(src, dst, tag)");
    return nullptr;
  }
  int64_t v[3];
  for (int i = 0; i < 3; ++i) {
    long long x = PyLong_AsLongLong(args[i]);
    if (x == -1 && PyErr_Occurred()) return nullptr;
    v[i] = x;
  }
  return PyLong_FromUnsignedLongLong(flow_hash(v[0], v[1], v[2]));
}

struct ShortestPaths {
  PyObject_HEAD
  RoutingGraph* graph;
};

static PyTypeObject ShortestPathsType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// The path of flow bucket ``bucket`` from rank src to rank dst; false with an error set.
static bool shortest_route(ShortestPaths* self, int64_t src, int64_t dst, uint64_t bucket,
                           std::vector<int32_t>* out) {
  RoutingGraph* g = self->graph;
  if (g == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "ShortestPaths.__init__ was not called");
    return false;
  }
  int64_t ranks = static_cast<int64_t>(g->hosts.size());
  if (src < 0 || src >= ranks || dst < 0 || dst >= ranks) {
    PyErr_Format(PyExc_IndexError, "no NPU rank %lld (ranks are 0..%lld)",
                 static_cast<long long>(src < 0 || src >= ranks ? src : dst), static_cast<long long>(ranks - 1));
    return false;
  }
  if (g->route(g->hosts[src], g->hosts[dst], bucket, out)) return true;
  PyErr_Format(PyExc_ValueError, "no path from NPU %lld to NPU %lld", static_cast<long long>(src),
               static_cast<long long>(dst));
  return false;
}

static PyObject* links_tuple(const std::vector<int32_t>& links) {
  PyObject* out = PyTuple_New(static_cast<Py_ssize_t>(links.size()));
  for (size_t i = 0; out != nullptr && i < links.size(); ++i) {
    PyObject* link = PyLong_FromLong(links[i]);
    if (link == nullptr) Py_CLEAR(out);
    else PyTuple_SET_ITEM(out, i, link);
  }
  return out;
}

static int ShortestPaths_init(ShortestPaths* self, PyObject* args, PyObject*) {
  int nodes;
  PyObject *switches, *src, *dst, *latency, *down = nullptr;
  if (!PyArg_ParseTuple(args, "iOOOO|O", &nodes, &switches, &src, &dst, &latency, &down)) return -1;
  auto g = std::make_unique<RoutingGraph>();
  std::vector<int32_t> switch_ids, down_ids, link_src, link_dst;
  std::vector<double> latency_ns;
  if (!read_numbers(switches, "switches: node ids", &switch_ids) ||
      !read_numbers(src, "link_src: node ids", &link_src) || !read_numbers(dst, "link_dst: node ids", &link_dst) ||
      !read_numbers(latency, "link_latency: ns", &latency_ns) ||
      (down != nullptr && !read_numbers(down, "down: link ids", &down_ids)))
    return -1;
  if (!g->build(nodes, switch_ids, std::move(link_src), std::move(link_dst), std::move(latency_ns), down_ids)) {
    PyErr_SetString(PyExc_ValueError,
                    "ShortestPaths: node ids must be in 0..nodes-1, one source, end and latency per link, and links "
                    "down must be link ids");
    return -1;
  }
  delete self->graph;
  self->graph = g.release();
  return 0;
}

static void ShortestPaths_dealloc(ShortestPaths* self) {
  delete self->graph;
  Py_TYPE(self)->tp_free(reinterpret_cast<PyObject*>(self));
}

// paths(src_rank, dst_rank, bucket) -> tuple of link ids
static PyObject* ShortestPaths_call(ShortestPaths* self, PyObject* args, PyObject* kwds) {
  long long src, dst;
  unsigned long long bucket;
  if (kwds != nullptr || !PyArg_ParseTuple(args, "LLK", &src, &dst, &bucket)) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "ShortestPaths(src_rank, dst_rank, bucket)");
    return nullptr;
  }
  std::vector<int32_t> links;
  if (!shortest_route(self, src, dst, bucket, &links)) return nullptr;
  return links_tuple(links);
}

static void init_shortest_paths_type() {
  PyTypeObject& t = ShortestPathsType;
  t.tp_name = "_astra_kernel.ShortestPaths";
  t.tp_basicsize = sizeof(ShortestPaths);
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc =
      "ShortestPaths(nodes_count, switches, link_src, link_dst, link_latency_ns, down=()): the default routing of "
      "a physical topology, over its links but those in down (which keep their ids); paths(src_rank, dst_rank, "
      "bucket) gives the link ids of flow bucket bucket's shortest path (ECMP: flow_hash(bucket, node, 0) picks "
      "among equal next hops).";
  t.tp_new = PyType_GenericNew;
  t.tp_init = reinterpret_cast<initproc>(ShortestPaths_init);
  t.tp_dealloc = reinterpret_cast<destructor>(ShortestPaths_dealloc);
  t.tp_call = reinterpret_cast<ternaryfunc>(ShortestPaths_call);
}

// ---------------------------------------------------------------------------------
// The route cache of the kernel's AnalyticalLinks (compiled models have astra_routes.h). Routes come
// from a callable (the kernel's ShortestPaths above, or Python's): route(src, dst,
// tag) -> link ids, or, with route_buckets > 0, route(src, dst, flow_hash(src, dst,
// tag) % route_buckets), asked once per bucket and kept.

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
