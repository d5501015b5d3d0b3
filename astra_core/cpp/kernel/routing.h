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

// A new tuple of link ids; nullptr with an error set.
static PyObject* links_tuple(const std::vector<int32_t>& links) {
  PyObject* out = PyTuple_New(static_cast<Py_ssize_t>(links.size()));
  for (size_t i = 0; out != nullptr && i < links.size(); ++i) {
    PyObject* link = PyLong_FromLong(links[i]);
    if (link == nullptr) Py_CLEAR(out);
    else PyTuple_SET_ITEM(out, i, link);
  }
  return out;
}

// The default routing of a physical topology; its Python face is bound in bind_routing.
struct ShortestPaths {
  RoutingGraph graph;

  // Raises ValueError (py::value_error) when the topology's ids do not hold together.
  ShortestPaths(int nodes, const py::handle& switches, const py::handle& link_src, const py::handle& link_dst,
                const py::handle& link_latency, const py::handle& down) {
    std::vector<int32_t> switch_ids, down_ids, src, dst;
    std::vector<double> latency_ns;
    if (!read_numbers(switches.ptr(), "switches: node ids", &switch_ids) ||
        !read_numbers(link_src.ptr(), "link_src: node ids", &src) ||
        !read_numbers(link_dst.ptr(), "link_dst: node ids", &dst) ||
        !read_numbers(link_latency.ptr(), "link_latency: ns", &latency_ns) ||
        !read_numbers(down.ptr(), "down: link ids", &down_ids))
      throw py::error_already_set();
    if (!graph.build(nodes, switch_ids, std::move(src), std::move(dst), std::move(latency_ns), down_ids))
      throw py::value_error(
          "ShortestPaths: node ids must be in 0..nodes-1, one source, end and latency per link, and links down "
          "must be link ids");
  }

  // The path of flow bucket ``bucket`` from rank src to rank dst; false with an error set.
  bool route(int64_t src, int64_t dst, uint64_t bucket, std::vector<int32_t>* out) {
    int64_t ranks = static_cast<int64_t>(graph.hosts.size());
    if (src < 0 || src >= ranks || dst < 0 || dst >= ranks) {
      PyErr_Format(PyExc_IndexError, "no NPU rank %lld (ranks are 0..%lld)",
                   static_cast<long long>(src < 0 || src >= ranks ? src : dst), static_cast<long long>(ranks - 1));
      return false;
    }
    if (graph.route(graph.hosts[src], graph.hosts[dst], bucket, out)) return true;
    PyErr_Format(PyExc_ValueError, "no path from NPU %lld to NPU %lld", static_cast<long long>(src),
                 static_cast<long long>(dst));
    return false;
  }

  py::tuple operator()(int64_t src, int64_t dst, uint64_t bucket) {
    std::vector<int32_t> links;
    PyObject* out = route(src, dst, bucket, &links) ? links_tuple(links) : nullptr;
    if (out == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::tuple>(out);
  }
};

static PyTypeObject* shortest_paths_type = nullptr;  // set by bind_routing

// ``route`` as the kernel's own routing (no Python call to route a message), else nullptr.
static ShortestPaths* kernel_routing(PyObject* route) {
  if (Py_TYPE(route) != shortest_paths_type) return nullptr;
  return bound_value<ShortestPaths>(route);
}

static void bind_routing(py::module_& module) {
  py::class_<ShortestPaths> paths(
      module, "ShortestPaths",
      "ShortestPaths(nodes_count, switches, link_src, link_dst, link_latency_ns, down=()): the default routing of "
      "a physical topology, over its links but those in down (which keep their ids); paths(src_rank, dst_rank, "
      "bucket) gives the link ids of flow bucket bucket's shortest path (ECMP: flow_hash(bucket, node, 0) picks "
      "among equal next hops).");
  paths.def(py::init<int, py::handle, py::handle, py::handle, py::handle, py::handle>(), py::arg("nodes_count"),
            py::arg("switches"), py::arg("link_src"), py::arg("link_dst"), py::arg("link_latency_ns"),
            py::arg("down") = py::tuple());
  paths.def("__call__", &ShortestPaths::operator(), py::arg("src_rank"), py::arg("dst_rank"), py::arg("bucket"),
            "The link ids of flow bucket ``bucket``'s path from src_rank to dst_rank (IndexError: no such rank; "
            "ValueError: no path).");
  shortest_paths_type = reinterpret_cast<PyTypeObject*>(paths.ptr());
}
