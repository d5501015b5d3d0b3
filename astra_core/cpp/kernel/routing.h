// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// ShortestPaths: the physical topology's default routing (astra_core/topology/
// physical.py): shortest paths by total latency, then by hop count, relaying through
// switches only (through any node where no such path exists: tori and other switchless
// fabrics); where several next hops are equally short, flow_hash(bucket, node, 0)
// picks one at every hop, so each hop's choice is independent and a flow keeps one
// path. Distances to a switch come from one Dijkstra per switch (on demand, kept);
// distances to a host are those of the switches it hangs on plus the last link, as a
// Dijkstra to the host would find them, without running one per host.

// Deterministic 32-bit hash of a flow (src, dst, tag): astra_core.topology.physical's
// flow_hash (this is its implementation), which picks among equal-cost paths.
static inline uint64_t flow_hash(int64_t src, int64_t dst, int64_t tag) {
  uint64_t h = (static_cast<uint64_t>(src) * 0x9E3779B1ULL) ^ (static_cast<uint64_t>(dst) * 0x85EBCA77ULL) ^
               (static_cast<uint64_t>(tag) * 0xC2B2AE3DULL);
  h &= 0xFFFFFFFFULL;
  h ^= h >> 16;
  h = (h * 0x7FEB352DULL) & 0xFFFFFFFFULL;
  h ^= h >> 15;
  return h;
}

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

struct Distance {
  double latency;
  int64_t hops;  // -1: unreachable
  bool operator==(const Distance& o) const { return latency == o.latency && hops == o.hops; }
  bool operator<(const Distance& o) const { return latency < o.latency || (latency == o.latency && hops < o.hops); }
};

static const Distance UNREACHABLE = {INFINITY, -1};

// A hop toward a host that hangs on one switch, from another switch: (that switch, the
// bits of its last link's latency, the node the hop leaves).
struct HopKey {
  int32_t via, node;
  uint64_t latency_bits;
  bool operator==(const HopKey& o) const { return via == o.via && node == o.node && latency_bits == o.latency_bits; }
};

struct HopKeyHash {
  size_t operator()(const HopKey& k) const {
    return static_cast<size_t>(mix64((static_cast<uint64_t>(static_cast<uint32_t>(k.via)) << 32 |
                                      static_cast<uint32_t>(k.node)) ^ mix64(k.latency_bits)));
  }
};

struct RoutingGraph {
  int nodes;
  std::vector<char> is_switch;
  std::vector<int32_t> hosts;  // node of each rank
  std::vector<int32_t> link_src, link_dst;
  std::vector<double> latency;
  std::vector<std::vector<int32_t>> out_links, in_links;  // in link-id order
  std::unordered_map<int64_t, std::vector<Distance>> to;  // key dst (relay: switches) or -1 - dst (any node)
  std::vector<std::pair<int32_t, int32_t>> scratch;       // a hop's equal choices: (link, next node)
  // Toward a host that hangs on one switch, a hop from any other switch has the same
  // equal choices whichever host it is: the distances it compares are that switch's
  // table plus the same last-link latency, and no other switch links to the host. Kept
  // per HopKey as (first, count) in shared_choices: an all-to-all routes to every host
  // through every switch, and a route is one hop per switch it crosses.
  FlatMap<HopKey, std::pair<int32_t, int32_t>, HopKeyHash> shared_hops;
  std::vector<std::pair<int32_t, int32_t>> shared_choices;

  // Distances of every node to ``dst`` (Dijkstra over the reversed links, ties in
  // (latency, hops, node) order); with ``relay_any`` any node relays, else switches.
  const std::vector<Distance>& distances_to(int32_t dst, bool relay_any) {
    int64_t key = relay_any ? -1 - static_cast<int64_t>(dst) : dst;
    auto found = to.find(key);
    if (found != to.end()) return found->second;
    std::vector<Distance> dist(nodes, UNREACHABLE);
    dist[dst] = Distance{0.0, 0};
    typedef std::tuple<double, int64_t, int32_t> Item;
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
    heap.emplace(0.0, 0, dst);
    while (!heap.empty()) {
      auto [lat, hops, node] = heap.top();
      heap.pop();
      if (dist[node] < Distance{lat, hops}) continue;
      if (node != dst && !relay_any && !is_switch[node]) continue;  // a host ends a path, never relays
      for (int32_t link : in_links[node]) {
        int32_t prev = link_src[link];
        Distance cand{lat + latency[link], hops + 1};
        if (dist[prev].hops < 0 || cand < dist[prev]) {
          dist[prev] = cand;
          heap.emplace(cand.latency, cand.hops, prev);
        }
      }
    }
    return to.emplace(key, std::move(dist)).first->second;
  }

  // What the distances to one node need: its own table (a switch, or any node relaying),
  // or those of the switches a host hangs on with the links from them.
  struct Target {
    int32_t dst;
    bool relay_any;
    const std::vector<Distance>* table;
    std::vector<std::pair<const std::vector<Distance>*, int32_t>> via;  // (switch's table, its link to dst)
  };

  Target target(int32_t dst, bool relay_any) {
    Target t{dst, relay_any, nullptr, {}};
    if (relay_any || is_switch[dst]) {
      t.table = &distances_to(dst, relay_any);
      return t;
    }
    for (int32_t link : in_links[dst])
      if (is_switch[link_src[link]]) t.via.emplace_back(&distances_to(link_src[link], false), link);
    return t;
  }

  // target(dst, false) per node, worked out once: route() asks for it per flow, and its
  // tables' addresses hold (``to`` only grows; an unordered_map keeps its values in place).
  std::vector<Target> plain_targets;
  std::vector<char> plain_ready;

  const Target& plain_target(int32_t dst) {
    if (plain_targets.empty()) {
      plain_targets.resize(nodes);
      plain_ready.assign(nodes, 0);
    }
    if (!plain_ready[dst]) {
      plain_targets[dst] = target(dst, false);
      plain_ready[dst] = 1;
    }
    return plain_targets[dst];
  }

  // The distance from ``node`` to the target, as a Dijkstra to it would find it.
  Distance distance(const Target& t, int32_t node) const {
    if (t.table != nullptr) return (*t.table)[node];
    if (node == t.dst) return Distance{0.0, 0};
    Distance best = UNREACHABLE;
    for (const auto& [table, link] : t.via) {  // through a switch dst hangs on
      const Distance& d = (*table)[node];
      if (d.hops < 0) continue;
      Distance cand{d.latency + latency[link], d.hops + 1};
      if (best.hops < 0 || cand < best) best = cand;
    }
    if (!is_switch[node]) {  // over a direct link from a host, which may only start a path
      for (int32_t link : out_links[node])
        if (link_dst[link] == t.dst) {
          Distance cand{latency[link], 1};
          if (best.hops < 0 || cand < best) best = cand;
        }
    }
    return best;
  }

  // The links of the shortest path of flow bucket ``bucket`` from node src to node
  // dst into ``out``; false when none exists.
  bool route(int32_t src, int32_t dst, uint64_t bucket, std::vector<int32_t>* out) {
    out->clear();
    const Target* relayed = &plain_target(dst);
    Target any;  // where switches alone relay no path: any node relays
    if (distance(*relayed, src).hops < 0) {
      any = target(dst, true);
      if (distance(any, src).hops < 0) return false;
      relayed = &any;
    }
    const Target& t = *relayed;
    // the switch dst hangs on and its link to dst, where it is one (shared_hops)
    int32_t via_link = t.table == nullptr && t.via.size() == 1 ? t.via[0].second : -1;
    int32_t via = via_link >= 0 ? link_src[via_link] : -1;
    uint64_t via_bits = 0;
    if (via_link >= 0) std::memcpy(&via_bits, &latency[via_link], sizeof via_bits);
    int32_t node = src;
    while (node != dst) {
      const std::pair<int32_t, int32_t>* choices;
      size_t count;
      if (via >= 0 && node != via && is_switch[node]) {
        HopKey key{via, node, via_bits};
        const std::pair<int32_t, int32_t>* kept = shared_hops.find(key);
        if (kept == nullptr) {
          hop_choices(t, node, &scratch);
          std::pair<int32_t, int32_t> range(static_cast<int32_t>(shared_choices.size()),
                                            static_cast<int32_t>(scratch.size()));
          shared_choices.insert(shared_choices.end(), scratch.begin(), scratch.end());
          kept = &shared_hops.insert(key, range);
        }
        choices = shared_choices.data() + kept->first;
        count = static_cast<size_t>(kept->second);
      } else {
        hop_choices(t, node, &scratch);
        choices = scratch.data();
        count = scratch.size();
      }
      if (count == 0) return false;
      const auto& hop = choices[count == 1 ? 0 : flow_hash(static_cast<int64_t>(bucket), node, 0) % count];
      out->push_back(hop.first);
      node = hop.second;
    }
    return true;
  }

  // The next hops from ``node`` on shortest paths to the target, (link, next node) in
  // link order, into ``choices``.
  void hop_choices(const Target& t, int32_t node, std::vector<std::pair<int32_t, int32_t>>* choices) const {
    Distance best = distance(t, node);
    choices->clear();
    for (int32_t link : out_links[node]) {
      int32_t next = link_dst[link];
      if (!t.relay_any && next != t.dst && !is_switch[next]) continue;
      Distance d = distance(t, next);
      if (d.hops >= 0 && Distance{d.latency + latency[link], d.hops + 1} == best) choices->emplace_back(link, next);
    }
  }
};

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
  std::vector<int32_t> switch_ids, down_ids;
  if (!read_numbers(switches, "switches: node ids", &switch_ids) ||
      !read_numbers(src, "link_src: node ids", &g->link_src) || !read_numbers(dst, "link_dst: node ids", &g->link_dst) ||
      !read_numbers(latency, "link_latency: ns", &g->latency) ||
      (down != nullptr && !read_numbers(down, "down: link ids", &down_ids)))
    return -1;
  size_t links = g->link_src.size();
  bool ok = nodes > 0 && g->link_dst.size() == links && g->latency.size() == links;
  std::vector<char> is_down(links, 0);
  for (int32_t link : down_ids) ok = ok && 0 <= link && static_cast<size_t>(link) < links && (is_down[link] = 1);
  g->nodes = nodes;
  g->is_switch.assign(nodes > 0 ? nodes : 0, 0);
  for (int32_t s : switch_ids) ok = ok && 0 <= s && s < nodes && (g->is_switch[s] = 1);
  g->out_links.resize(g->is_switch.size());
  g->in_links.resize(g->is_switch.size());
  for (size_t i = 0; ok && i < links; ++i) {
    ok = 0 <= g->link_src[i] && g->link_src[i] < nodes && 0 <= g->link_dst[i] && g->link_dst[i] < nodes;
    if (!ok) break;
    if (is_down[i]) continue;  // a link down keeps its id but carries no path
    g->out_links[g->link_src[i]].push_back(static_cast<int32_t>(i));
    g->in_links[g->link_dst[i]].push_back(static_cast<int32_t>(i));
  }
  if (!ok) {
    PyErr_SetString(PyExc_ValueError,
                    "ShortestPaths: node ids must be in 0..nodes-1, one source, end and latency per link, and links "
                    "down must be link ids");
    return -1;
  }
  for (int32_t n = 0; n < nodes; ++n)
    if (!g->is_switch[n]) g->hosts.push_back(n);
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
