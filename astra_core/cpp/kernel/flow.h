// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// FlowLinks: the flow backend's model (backends/flow/astra_flow/network.py describes
// it): messages drain on RDMA queue pairs (src, dst, tag), one after the other; a queue
// pair with messages is one flow over its route, at the max-min fair rate (maxmin.h)
// re-solved at the end of every instant at which flows start, and a reallocation delay
// after flows stop; a message is delivered a pipeline tail after its last byte drained
// (its lone store-and-forward time less the time its wire bytes take at the route's
// bottleneck), less a packet time for each flow behind it in the last round at its
// bottleneck (last_round_lead). Event times are rounded to whole ps, as Python's
// round(t, 3), so that instants that exact arithmetic makes equal stay equal whatever
// the rates' rounding.

// A lone message's store-and-forward pipeline over a route (astra_core/topology/
// pipeline.py gives the closed form): per link j, (P(j), max t up to j, t_j + ... +
// t_last) in ns per byte.
struct PipelineTerm {
  double prefix, slowest, suffix;
};

static std::vector<PipelineTerm> pipeline_terms(const std::vector<double>& ns_per_byte) {
  std::vector<PipelineTerm> terms;
  double prefix = 0.0, slowest = 0.0, suffix = 0.0;
  for (double t : ns_per_byte) suffix += t;
  for (double t : ns_per_byte) {
    prefix += t;
    slowest = std::max(slowest, t);
    terms.push_back({prefix, slowest, suffix});
    suffix -= t;
  }
  return terms;
}

static inline int64_t packets_of(int64_t size, int64_t payload) {
  int64_t packets = size > 0 ? (size + payload - 1) / payload : 0;
  return packets > 1 ? packets : 1;
}

// The transmission part (ns, latencies excluded) of a lone message of ``size`` payload
// bytes in packets of ``payload`` + ``header`` bytes.
static double pipeline_ns(const std::vector<PipelineTerm>& terms, int64_t size, int64_t payload, int64_t header) {
  int64_t packets = packets_of(size, payload);
  double last = static_cast<double>(size - (packets - 1) * payload + header);
  if (packets == 1) return last * terms[0].suffix;
  double full = static_cast<double>(payload + header);
  double middle = static_cast<double>((packets - 2) * (payload + header));
  double best = -INFINITY;
  for (const PipelineTerm& t : terms) {
    double v = full * t.prefix + middle * t.slowest + last * t.suffix;
    if (v > best) best = v;
  }
  return best;
}

// pipeline_ns(ns_per_byte, size_bytes, payload_bytes, header_bytes): the above for Python
// (astra_core.topology.pipeline), so that the ns3 backend and flow workloads time a lone
// message with this one implementation.
static PyObject* kernel_pipeline_ns(PyObject*, PyObject* args) {
  PyObject* speeds;
  long long size, payload, header;
  if (!PyArg_ParseTuple(args, "OLLL", &speeds, &size, &payload, &header)) return nullptr;
  std::vector<double> ns_per_byte;
  if (!read_numbers(speeds, "ns_per_byte: a sequence of numbers", &ns_per_byte)) return nullptr;
  if (ns_per_byte.empty() || payload <= 0 || header < 0 || size < 0)
    return PyErr_Format(PyExc_ValueError, "pipeline_ns needs a link, payload_bytes > 0 and sizes >= 0");
  return PyFloat_FromDouble(pipeline_ns(pipeline_terms(ns_per_byte), size, payload, header));
}

// Python's round(x, 3): the double nearest the decimal that x rounds to (half to even
// on x's exact value). Where x * 1000 is not within its rounding error of a half, the
// nearest integer to it is that decimal's thousandfold and one division gives the
// double; near a half (rarely) the decimal is worked out as Python does.
static double round_ps(double x) {
  double y = x * 1000.0;
  if (std::fabs(y) < 1e15) {
    double r = std::nearbyint(y);
    if (std::fabs(std::fabs(y - r) - 0.5) > std::fabs(y) * 0x1p-51 + 0x1p-60) return r / 1000.0;
  }
  char* text = PyOS_double_to_string(x, 'f', 3, 0, nullptr);
  if (text == nullptr) {
    PyErr_Clear();
    return x;
  }
  double r = PyOS_string_to_double(text, nullptr, nullptr);
  PyMem_Free(text);
  return r;
}

static PyObject* kernel_round_ps(PyObject*, PyObject* arg) {
  double x = PyFloat_AsDouble(arg);
  if (x == -1.0 && PyErr_Occurred()) return nullptr;
  return PyFloat_FromDouble(round_ps(x));
}

struct FlowMessage {
  int64_t size;
  int32_t next;  // the queue pair's next message (-1: none)
  Call on_delivered;
};

// A queue pair (src, dst, tag): one flow of the solver, whose number indexes it.
struct FlowQueuePair {
  int64_t src = 0, dst = 0, tag = 0;
  int32_t head = -1, tail = -1;  // its messages, the head draining
  double latency_ns = 0.0;
  int32_t speeds = -1;  // its route's bottleneck and pipeline terms (FlowModel::speeds)
  // its route: the first route_length links of its solver flow (solver_links); the
  // ACKs' (with ack_weight) reverse route
  int32_t route_length = 0;
  std::vector<int32_t> reverse;
  double wire_sent = 0.0;  // wire bytes drained since the flow became active (or moved)
  int64_t tail_size = -1;  // the last message size whose pipeline tail was worked out
  double tail_ns = 0.0;
  bool active = false, live = false;
};

struct FlowSpeeds {
  double bottleneck_ns_per_byte;
  std::vector<PipelineTerm> terms;
};

// Idle queue pairs kept for their next message (a ring reuses its pairs step after
// step); past this many, idle ones are dropped (an all-to-all has a million).
static const long long IDLE_QUEUE_PAIRS = 1LL << 16;

struct FlowModel {
  maxmin::Solver solver;
  long long route_buckets;
  RouteCache routes;
  BigVector<FlowQueuePair> qps;                  // by the solver's flow number
  // per queue pair: when its head message started draining; apart from FlowQueuePair
  // for last_round_lead's scan of a link's flows, as the solver's bottleneck
  BigVector<double> head_start;
  FlatMap<RouteKey, int32_t, RouteKeyHash> keys;   // (src, dst, tag) -> number: active or idle
  BigVector<FlowMessage> pool;
  std::vector<int32_t> free_messages;
  std::vector<double> ns_per_byte, latency, link_bytes, link_busy;
  std::vector<char> down;  // per link: out of service (set_links)
  std::map<std::vector<double>, int32_t> speeds_index;  // per sequence of link speeds
  std::vector<FlowSpeeds> speeds;
  std::vector<double> scratch_speeds;
  // a new queue pair's routes and solver links (flow_new_queue_pair): kept, so that a
  // million new pairs do not allocate them each
  std::vector<int32_t> scratch_route, scratch_reverse;
  std::vector<int> scratch_links;
  std::vector<double> scratch_weights;
  int64_t payload, header;
  double ack_weight, cap, reallocation_delay;
  bool reallocation_integral, reallocation_due = false;
  // Stopped flows whose links wait for their re-solve, in the order they stopped (so by
  // due time): (due, how many links of the flow, its rate), the links themselves in
  // stopped_links, one after the other (no allocation per flow). Re-solves fall on the
  // multiples of ``reallocation_delay`` (the next after the stop): a fixed clock, as
  // NICs' periodic rate-update timers, so that flows that share no link never move
  // each other's.
  struct Stopped {
    double due;
    size_t links;
    double rate;
  };
  std::deque<Stopped> stopped;
  std::deque<int32_t> stopped_links;
  // per bundle of the solver: its queued drain event's time and version (a bundle's
  // drain events carry the version; a stale one is dropped when it fires)
  std::vector<double> event_at;
  std::vector<uint32_t> event_version;
  long long idle = 0, messages = 0;

  FlowModel(const std::vector<double>& bytes_per_ns, std::vector<double> latency_ns)
      : solver(static_cast<int>(bytes_per_ns.size()), bytes_per_ns.data()),
        latency(std::move(latency_ns)),
        link_bytes(bytes_per_ns.size(), 0.0),
        link_busy(bytes_per_ns.size(), 0.0),
        down(bytes_per_ns.size(), 0) {
    solver.report_flows = false;
    for (double bw : bytes_per_ns) ns_per_byte.push_back(1 / bw);
  }

  int64_t wire_bytes(int64_t size) const { return size + packets_of(size, payload) * header; }
};

struct FlowLinks {
  PyObject_HEAD
  EventQueue* queue;  // owned
  PyObject* route;    // owned: route(src, dst, bucket)
  FlowModel* m;
};

static PyTypeObject FlowLinksType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// The links of route (src, dst, tag) into ``out``; false with an error set.
static bool flow_route(FlowLinks* self, int64_t src, int64_t dst, int64_t tag, std::vector<int32_t>* out) {
  FlowModel& m = *self->m;
  out->clear();
  if (Py_TYPE(self->route) == &ShortestPathsType && m.route_buckets > 0) {  // no Python call, nothing kept
    uint64_t bucket = flow_hash(src, dst, tag) % static_cast<uint64_t>(m.route_buckets);
    if (!shortest_route(reinterpret_cast<ShortestPaths*>(self->route), src, dst, bucket, out)) return false;
  } else {
    PyObject* hops = find_route(self->route, m.route_buckets, &m.routes, src, dst, tag);
    if (hops == nullptr) return false;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(hops); ++i) {
      long long link = PyLong_AsLongLong(PyTuple_GET_ITEM(hops, i));
      if (link == -1 && PyErr_Occurred()) break;
      out->push_back(link < 0 || link > INT32_MAX ? -1 : static_cast<int32_t>(link));
    }
    Py_DECREF(hops);
    if (PyErr_Occurred()) return false;
  }
  for (int32_t link : *out) {
    if (link >= 0 && link < static_cast<int32_t>(m.latency.size()) && m.down[link]) {
      PyErr_Format(PyExc_ValueError, "the route of %lld -> %lld crosses link %d, which is down",
                   static_cast<long long>(src), static_cast<long long>(dst), link);
      return false;
    }
    if (link < 0 || link >= static_cast<int32_t>(m.latency.size())) {
      PyErr_Format(PyExc_IndexError, "the route of %lld -> %lld crosses link %d of %zu", static_cast<long long>(src),
                   static_cast<long long>(dst), link, m.latency.size());
      return false;
    }
  }
  if (out->empty()) {
    PyErr_Format(PyExc_ValueError, "no route from NPU %lld to NPU %lld", static_cast<long long>(src),
                 static_cast<long long>(dst));
    return false;
  }
  return true;
}

// The index of a route's speeds (bottleneck, pipeline terms), shared by the routes of
// one sequence of link speeds (a fat-tree's by hop count).
static int32_t flow_speeds(FlowModel& m, const std::vector<int32_t>& route) {
  std::vector<double>& per_byte = m.scratch_speeds;
  per_byte.clear();
  for (int32_t link : route) per_byte.push_back(m.ns_per_byte[link]);
  auto found = m.speeds_index.find(per_byte);
  if (found != m.speeds_index.end()) return found->second;
  int32_t index = static_cast<int32_t>(m.speeds.size());
  m.speeds.push_back({*std::max_element(per_byte.begin(), per_byte.end()), pipeline_terms(per_byte)});
  m.speeds_index.emplace(per_byte, index);
  return index;
}

static double route_latency(const FlowModel& m, const std::vector<int32_t>& route) {
  double latency = 0.0;
  for (int32_t link : route) latency += m.latency[link];
  return latency;
}

// A queue pair's links on the solver: data at weight 1 on its route, ACKs at ack_weight
// on the reverse route.
static void solver_links(const FlowModel& m, const std::vector<int32_t>& route, const std::vector<int32_t>& reverse,
                         std::vector<int>* links, std::vector<double>* weights) {
  links->assign(route.begin(), route.end());
  weights->assign(route.size(), 1.0);
  for (int32_t link : reverse) {
    auto at = std::find(links->begin(), links->end(), link);
    if (at == links->end()) {
      links->push_back(link);
      weights->push_back(0.0 + m.ack_weight);
    } else {
      (*weights)[at - links->begin()] += m.ack_weight;
    }
  }
}

// A new queue pair's flow on the solver (started): its number, or -1 with an error set.
static int flow_new_queue_pair(FlowLinks* self, int64_t src, int64_t dst, int64_t tag) {
  FlowModel& m = *self->m;
  std::vector<int32_t>& route = m.scratch_route;
  std::vector<int32_t>& reverse = m.scratch_reverse;
  reverse.clear();
  if (!flow_route(self, src, dst, tag, &route)) return -1;
  if (m.ack_weight && !flow_route(self, dst, src, tag, &reverse)) return -1;
  std::vector<int>& links = m.scratch_links;
  std::vector<double>& weights = m.scratch_weights;
  solver_links(m, route, reverse, &links, &weights);
  int id = m.solver.new_flow(static_cast<int>(links.size()), links.data(), weights.data(), m.cap);
  if (id >= static_cast<int>(m.qps.size())) {
    m.qps.resize(id + 1);
    m.head_start.resize(id + 1);
  }
  m.head_start[id] = 0.0;
  FlowQueuePair& qp = m.qps[id];
  std::vector<int32_t> old_reverse = std::move(qp.reverse);
  qp = FlowQueuePair();
  qp.reverse = std::move(old_reverse);  // its storage, reused
  qp.src = src;
  qp.dst = dst;
  qp.tag = tag;
  qp.latency_ns = route_latency(m, route);
  qp.speeds = flow_speeds(m, route);
  qp.route_length = static_cast<int32_t>(route.size());
  qp.reverse.assign(reverse.begin(), reverse.end());
  qp.live = true;
  m.keys.insert(RouteKey{src, dst, static_cast<uint64_t>(tag)}, id);
  return id;
}

// ``now + delay`` on the ps grid, never before now.
static inline double on_ps_grid(double now, double delay) {
  double t = round_ps(now + delay);
  return now > t ? now : t;
}

// When bundle ``b``'s first flow drains (INFINITY: it has none), on the ps grid.
static double bundle_drain_at(FlowModel& m, int b, int* first) {
  *first = m.solver.first_due(b);
  if (*first < 0) return INFINITY;
  const maxmin::Bundle& x = m.solver.bundles[b];
  return on_ps_grid(x.since, std::max(m.solver.flows[*first].tag - x.clock, 0.0) / x.share);
}

// A drain event for bundle ``b`` at its first flow's drain, unless one is queued as soon.
static void flow_schedule(FlowLinks* self, int b) {
  FlowModel& m = *self->m;
  if (b >= static_cast<int>(m.event_at.size())) {
    m.event_at.resize(m.solver.bundles.size(), INFINITY);
    m.event_version.resize(m.solver.bundles.size(), 0);
  }
  int first;
  double when = bundle_drain_at(m, b, &first);
  if (first < 0 || m.event_at[b] <= when) return;  // found when the queued event fires
  m.event_at[b] = when;
  int64_t arg = (static_cast<int64_t>(b) << 32) | ++m.event_version[b];
  push_call(self->queue, when, false, kernel_call(CALL_FLOW_DRAINED, reinterpret_cast<PyObject*>(self), arg));
}

// Drain events for the bundles whose first flow may have changed.
static void flow_reschedule(FlowLinks* self) {
  maxmin::Solver& solver = self->m->solver;
  for (size_t i = 0; i < solver.dirty.size(); ++i) {
    int b = solver.dirty[i];
    solver.bundles[b].dirty = false;
    if (solver.bundles[b].live) flow_schedule(self, b);
  }
  solver.dirty.clear();
}

// Routes a message onto its queue pair; ``call`` (references move here) runs when the
// message is in. False with an error set (the call released).
static bool flow_send(FlowLinks* self, int64_t src, int64_t dst, int64_t size, int64_t tag, const Call& call) {
  FlowModel& m = *self->m;
  EventQueue* q = self->queue;
  ++m.messages;
  if (src == dst) {
    push_call(q, q->now, q->now_integral, call);
    return true;
  }
  int32_t* found = m.keys.find(RouteKey{src, dst, static_cast<uint64_t>(tag)});
  int id;
  if (found != nullptr) {
    id = *found;
  } else {
    id = flow_new_queue_pair(self, src, dst, tag);
    if (id < 0) {
      Call c = call;
      release(c);
      return false;
    }
  }
  int32_t message;
  if (!m.free_messages.empty()) {
    message = m.free_messages.back();
    m.free_messages.pop_back();
  } else {
    message = static_cast<int32_t>(m.pool.size());
    m.pool.emplace_back();
  }
  m.pool[message] = FlowMessage{size, -1, call};
  FlowQueuePair& qp = m.qps[id];
  if (qp.tail >= 0) m.pool[qp.tail].next = message;
  else qp.head = message;
  qp.tail = message;
  if (qp.active) return true;
  if (found != nullptr) --m.idle;  // an idle pair again
  qp.active = true;
  m.head_start[id] = q->now;
  m.solver.add(id);
  m.solver.set_work(id, static_cast<double>(m.wire_bytes(size)));
  q->step_pending = true;
  return true;
}

// The rates of the flows the last changes affect, and their drains moved.
static bool flow_solve(FlowLinks* self) {
  FlowModel& m = *self->m;
  m.solver.now = self->queue->now;
  m.solver.solve();
  flow_reschedule(self);
  return true;
}

// Stopped flows' reallocation is due (a multiple of the delay): the links of every flow
// that stopped in the period before are re-solved at the end of this instant.
static bool flow_reallocate(FlowLinks* self) {
  FlowModel& m = *self->m;
  EventQueue* q = self->queue;
  m.reallocation_due = false;
  while (!m.stopped.empty() && m.stopped.front().due <= q->now) {
    FlowModel::Stopped& done = m.stopped.front();
    for (size_t i = 0; i < done.links; ++i) {
      m.solver.touch(m.stopped_links.front(), done.rate);
      m.stopped_links.pop_front();
    }
    m.stopped.pop_front();
  }
  q->step_pending = true;
  if (!m.stopped.empty()) {
    m.reallocation_due = true;
    push_call(q, m.stopped.front().due, m.reallocation_integral && q->now_integral,
              kernel_call(CALL_FLOW_REALLOCATE, reinterpret_cast<PyObject*>(self), 0));
  }
  return true;
}

// Queue pair ``id``'s route (the first links of its solver flow).
static std::vector<int32_t> qp_route(const FlowModel& m, int id) {
  const auto& links = m.solver.flows[id].links;
  return std::vector<int32_t>(links.begin(), links.begin() + m.qps[id].route_length);
}

// ``bytes`` wire bytes of queue pair ``id`` onto its route's links, their ACKs onto the
// reverse's, and the time they keep each link busy at its bandwidth now.
static void count_wire_bytes(FlowModel& m, int id, double bytes) {
  const FlowQueuePair& qp = m.qps[id];
  const int* route = m.solver.flows[id].links.begin();
  for (const int* at = route; at != route + qp.route_length; ++at) {
    int link = *at;
    m.link_bytes[link] += bytes;
    m.link_busy[link] += bytes * m.ns_per_byte[link];
  }
  for (int32_t link : qp.reverse) {
    m.link_bytes[link] += bytes * m.ack_weight;
    m.link_busy[link] += bytes * m.ack_weight * m.ns_per_byte[link];
  }
}

// How much sooner than its fluid drain (ns) the last packet of queue pair ``id``'s head,
// ``wire`` bytes, leaves its bottleneck at ``now``. Flows backlogged at a link send in
// rounds of one packet each (switch and NIC round-robin; a FIFO port interleaves
// senders at line rate alike), and a flow that started its message sooner has its
// packet first in each round. The fluid model ends a message when the whole last round
// has gone out; its last packet left before the full packets of the flows behind it
// in that round: the flows bottlenecked at the same link that started their messages
// later (before now), or at the same time and numbered higher. Never more than the
// time the message took beyond its own bytes at the link's bandwidth.
static double last_round_lead(const FlowModel& m, int id, double wire, double now) {
  int b = m.solver.held_at(id);
  if (b < 0) return 0.0;
  double head_start = m.head_start[id];
  double spare = now - head_start - wire * m.ns_per_byte[b];
  if (!(spare > 0.0)) return 0.0;
  double packet = static_cast<double>(m.payload + m.header);
  int behind = 0;  // flows held at b that started their messages after this one
  for (int bundle : m.solver.held[b]) {
    for (int other : m.solver.bundles[bundle].flows) {
      if (other == id) continue;
      double start = m.head_start[other];
      if (start < now && (start > head_start || (start == head_start && other > id))) {
        ++behind;
        if (behind * packet * m.ns_per_byte[b] >= spare) return spare;  // whole: no need to count on
      }
    }
  }
  return std::min(behind * packet * m.ns_per_byte[b], spare);
}

// Queue pair ``id``'s head message has drained (now): it is delivered a pipeline tail
// later, less its last-round lead; the pair drains its next message or goes idle.
static void flow_head_drained(FlowLinks* self, int id) {
  FlowModel& m = *self->m;
  EventQueue* q = self->queue;
  FlowQueuePair& qp = m.qps[id];
  double now = q->now;
  int32_t message = qp.head;
  FlowMessage& head = m.pool[message];
  int64_t size = head.size;
  Call call = head.on_delivered;
  head.on_delivered = Call{CALL_NONE, nullptr, nullptr, {0}};
  qp.head = head.next;
  if (qp.head < 0) qp.tail = -1;
  m.free_messages.push_back(message);
  if (size != qp.tail_size) {
    const FlowSpeeds& speeds = m.speeds[qp.speeds];
    double lone = pipeline_ns(speeds.terms, size, m.payload, m.header);
    qp.tail_ns = qp.latency_ns + lone - static_cast<double>(m.wire_bytes(size)) * speeds.bottleneck_ns_per_byte;
    qp.tail_size = size;
  }
  double due = round_ps(now + qp.tail_ns - last_round_lead(m, id, static_cast<double>(m.wire_bytes(size)), now));
  if (due >= now) push_call(q, due, false, call);
  else push_call(q, now, q->now_integral, call);
  qp.wire_sent += static_cast<double>(m.wire_bytes(size));
  if (qp.head >= 0) {
    m.head_start[id] = now;
    m.solver.set_work(id, static_cast<double>(m.wire_bytes(m.pool[qp.head].size)));
    return;
  }
  count_wire_bytes(m, id, qp.wire_sent);
  qp.wire_sent = 0.0;
  qp.active = false;
  if (m.reallocation_delay > 0) {  // its links wait for their reallocation (flow_reallocate)
    const auto& links = m.solver.flows[id].links;
    double due_at = (std::floor(now / m.reallocation_delay) + 1) * m.reallocation_delay;
    m.stopped.push_back({due_at, links.size(), m.solver.rate_of(id)});
    m.stopped_links.insert(m.stopped_links.end(), links.begin(), links.end());
  }
  m.solver.remove(id, m.reallocation_delay == 0);
  if (m.idle < IDLE_QUEUE_PAIRS) {
    ++m.idle;
  } else {
    m.keys.erase(RouteKey{qp.src, qp.dst, static_cast<uint64_t>(qp.tag)});
    m.solver.free_flow(id);
    qp.live = false;
    qp.reverse.clear();  // its storage stays for the pair that reuses the number
  }
  if (m.reallocation_delay == 0) {
    q->step_pending = true;
  } else if (!m.reallocation_due) {
    m.reallocation_due = true;
    push_call(q, m.stopped.front().due, m.reallocation_integral && q->now_integral,
              kernel_call(CALL_FLOW_REALLOCATE, reinterpret_cast<PyObject*>(self), 0));
  }
}

// The drain event ``arg`` (bundle << 32 | version): its flows due now drain their head
// messages.
static bool flow_drained(FlowLinks* self, int64_t arg) {
  FlowModel& m = *self->m;
  int b = static_cast<int>(arg >> 32);
  if (static_cast<uint32_t>(arg) != m.event_version[b]) return true;  // a sooner drain replaced it
  m.event_at[b] = INFINITY;
  m.solver.now = self->queue->now;
  while (m.solver.bundles[b].live) {
    int id;
    if (bundle_drain_at(m, b, &id) > self->queue->now) break;
    flow_head_drained(self, id);
  }
  if (m.solver.bundles[b].live) m.solver.mark_dirty(b);  // its next flow, or this one at its new rate
  flow_reschedule(self);
  return true;
}

// Links change at this instant (set_links): ``bandwidth[i]`` bytes/ns for link
// ``changed[i]`` (0: down), and with ``route`` (not None) the routing over the links up
// now. Every live queue pair takes the path that routing gives it (switches rehash
// their flows over the next hops left, as ECMP without resilient hashing does), so the
// routes are always those of the links up, and a link that comes back carries its
// flows again. An active flow that moves keeps the bytes it drained (counted on its old
// links) and drains the rest on its new path: the fluid model loses no byte, as RoCE's
// retransmission would resend them. Flows whose rates the change can reach (those
// linked to the changed links and moved flows through shared links) are re-solved
// from scratch at the end of the instant; the others keep their rates and drains.
static bool flow_set_links(FlowLinks* self, const std::vector<int32_t>& changed, const std::vector<double>& bandwidth,
                           PyObject* route) {
  FlowModel& m = *self->m;
  EventQueue* q = self->queue;
  double now = q->now;
  size_t n_links = m.latency.size();
  std::vector<char> touched(n_links, 0);
  for (size_t i = 0; i < changed.size(); ++i) {
    int32_t link = changed[i];
    touched[link] = 1;
    m.down[link] = bandwidth[i] == 0.0;
    if (bandwidth[i] > 0.0) m.ns_per_byte[link] = 1 / bandwidth[i];
  }
  if (route != Py_None) {
    Py_INCREF(route);
    Py_SETREF(self->route, route);
    clear_routes(&m.routes);
  }
  // the queue pairs that move, with their new paths
  struct Move {
    int id;
    std::vector<int32_t> route, reverse;
  };
  std::vector<Move> moves;
  std::vector<char> moving(m.qps.size(), 0);
  for (size_t id = 0; route != Py_None && id < m.qps.size(); ++id) {
    FlowQueuePair& qp = m.qps[id];
    if (!qp.live) continue;
    Move move{static_cast<int>(id), {}, {}};
    if (!flow_route(self, qp.src, qp.dst, qp.tag, &move.route)) return false;
    if (m.ack_weight && !flow_route(self, qp.dst, qp.src, qp.tag, &move.reverse)) return false;
    const int* links_now = m.solver.flows[id].links.begin();
    bool same = static_cast<int32_t>(move.route.size()) == qp.route_length &&
                std::equal(move.route.begin(), move.route.end(), links_now);
    if (same && move.reverse == qp.reverse) continue;
    moving[id] = 1;
    moves.push_back(std::move(move));
  }
  // the active flows the changes reach: linked to a changed link or a moved flow's links
  std::vector<int> reached, frontier, on_link;
  std::vector<char> seen(m.qps.size(), 0), link_seen(n_links, 0);
  auto reach_link = [&](int link) {
    if (link_seen[link]) return;
    link_seen[link] = 1;
    frontier.push_back(link);
  };
  for (size_t link = 0; link < n_links; ++link)
    if (touched[link]) reach_link(static_cast<int>(link));
  for (const Move& move : moves) {
    if (!m.qps[move.id].active) continue;
    for (int link : m.solver.flows[move.id].links) reach_link(link);
    for (int32_t link : move.route) reach_link(link);
    for (int32_t link : move.reverse) reach_link(link);
  }
  while (!frontier.empty()) {
    int link = frontier.back();
    frontier.pop_back();
    on_link.clear();
    m.solver.flows_on(link, &on_link);
    for (int id : on_link) {
      if (seen[id]) continue;
      seen[id] = 1;
      reached.push_back(id);
      for (int other : m.solver.flows[id].links) reach_link(other);
    }
  }
  std::sort(reached.begin(), reached.end());
  m.solver.now = now;
  for (int id : reached) m.solver.remove(id, true);  // their work left stays with them
  for (size_t i = 0; i < changed.size(); ++i)
    if (bandwidth[i] > 0.0) m.solver.capacity[changed[i]] = bandwidth[i];
  std::vector<int> links;
  std::vector<double> weights;
  for (Move& move : moves) {
    FlowQueuePair& qp = m.qps[move.id];
    if (qp.active) {  // bytes drained so far on the old path; the rest on the new
      double left = std::max(m.solver.work_left(move.id), 0.0);
      double drained = static_cast<double>(m.wire_bytes(m.pool[qp.head].size)) - left;
      count_wire_bytes(m, move.id, qp.wire_sent + drained);
      qp.wire_sent = -drained;
    }
    solver_links(m, move.route, move.reverse, &links, &weights);
    m.solver.set_links(move.id, static_cast<int>(links.size()), links.data(), weights.data());
    qp.route_length = static_cast<int32_t>(move.route.size());
    qp.reverse = std::move(move.reverse);
  }
  for (int id : reached) m.solver.add(id);
  for (size_t id = 0; id < m.qps.size(); ++id) {  // latencies and pipeline tails of the paths changed
    FlowQueuePair& qp = m.qps[id];
    if (!qp.live) continue;
    const int* links_now = m.solver.flows[id].links.begin();
    bool crosses = moving[id];
    for (int k = 0; k < qp.route_length; ++k) crosses = crosses || touched[links_now[k]];
    if (!crosses) continue;
    std::vector<int32_t> path = qp_route(m, static_cast<int>(id));
    qp.latency_ns = route_latency(m, path);
    qp.speeds = flow_speeds(m, path);
    qp.tail_size = -1;
  }
  q->step_pending = true;
  return true;
}

static PyObject* FlowLinks_new(PyTypeObject* type, PyObject*, PyObject*) {
  return type->tp_alloc(type, 0);
}

static int FlowLinks_init(FlowLinks* self, PyObject* args, PyObject* kwds) {
  static const char* names[] = {"events",        "route",        "bytes_per_ns", "latency_ns",
                                "route_buckets", "payload_bytes", "header_bytes", "ack_weight",
                                "cap_bytes_per_ns", "reallocation_delay_ns", nullptr};
  PyObject *events, *route, *bandwidth, *latency, *delay;
  long long buckets, payload, header;
  double ack_weight, cap;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OOOLLLddO", const_cast<char**>(names), &EventQueueType, &events,
                                   &route, &bandwidth, &latency, &buckets, &payload, &header, &ack_weight, &cap,
                                   &delay))
    return -1;
  std::vector<double> bw, lat;
  if (!read_numbers(bandwidth, "bytes_per_ns: a sequence of numbers", &bw) ||
      !read_numbers(latency, "latency_ns: a sequence of numbers", &lat))
    return -1;
  double delay_ns;
  bool delay_integral;
  if (!read_number(delay, &delay_ns, &delay_integral)) return -1;
  if (bw.size() != lat.size()) {
    PyErr_SetString(PyExc_ValueError, "one bandwidth and one latency per link");
    return -1;
  }
  for (double b : bw)
    if (!(b > 0 && b < INFINITY)) {
      PyErr_SetString(PyExc_ValueError, "every link's bandwidth must be positive and finite");
      return -1;
    }
  if (payload <= 0 || header < 0 || !(delay_ns >= 0 && delay_ns < INFINITY) || !(ack_weight >= 0) || !(cap >= 0)) {
    PyErr_SetString(PyExc_ValueError, "payload_bytes must be > 0; header_bytes, ack_weight, cap and delay >= 0");
    return -1;
  }
  FlowModel* m = new FlowModel(bw, std::move(lat));
  m->route_buckets = buckets;
  m->payload = payload;
  m->header = header;
  m->ack_weight = ack_weight;
  m->cap = cap;
  m->reallocation_delay = delay_ns;
  m->reallocation_integral = delay_integral;
  delete self->m;
  self->m = m;
  Py_INCREF(events);
  Py_XSETREF(self->queue, reinterpret_cast<EventQueue*>(events));
  Py_INCREF(route);
  Py_XSETREF(self->route, route);
  return 0;
}

static int FlowLinks_traverse(FlowLinks* self, visitproc visit, void* arg) {
  Py_VISIT(self->queue);
  Py_VISIT(self->route);
  if (self->m != nullptr)
    for (FlowMessage& message : self->m->pool) VISIT_CALL(message.on_delivered);
  return 0;
}

static int FlowLinks_clear(FlowLinks* self) {
  Py_CLEAR(self->queue);
  Py_CLEAR(self->route);
  if (self->m != nullptr) {
    clear_routes(&self->m->routes);
    for (FlowMessage& message : self->m->pool) release(message.on_delivered);
  }
  return 0;
}

static void FlowLinks_dealloc(FlowLinks* self) {
  PyObject_GC_UnTrack(self);
  FlowLinks_clear(self);
  delete self->m;
  Py_TYPE(self)->tp_free(reinterpret_cast<PyObject*>(self));
}

static bool flow_ready(FlowLinks* self) {
  if (self->m != nullptr && self->queue != nullptr) return true;
  PyErr_SetString(PyExc_RuntimeError, "FlowLinks.__init__ was not called");
  return false;
}

// send(src, dst, size_bytes, on_delivered, arg=None, *, tag=0)
static PyObject* FlowLinks_send(FlowLinks* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* bound[6];
  static const char* const names[] = {"src", "dst", "size_bytes", "on_delivered", "arg", "tag"};
  if (!flow_ready(self) || !bind_args("send", names, 6, 4, args, nargs, kwnames, bound)) return nullptr;
  int64_t src, dst, size, tag = 0;
  if (!read_int64(bound[0], &src) || !read_int64(bound[1], &dst) || !read_int64(bound[2], &size)) return nullptr;
  if (bound[5] != Py_None && !read_int64(bound[5], &tag)) return nullptr;
  if (size < 0) return PyErr_Format(PyExc_ValueError, "a message of %lld bytes", static_cast<long long>(size));
  if (!flow_send(self, src, dst, size, tag, py_call(bound[3], bound[4]))) return nullptr;
  Py_RETURN_NONE;
}

static PyObject* FlowLinks_solve(FlowLinks* self, PyObject*) {
  if (!flow_ready(self) || !flow_solve(self)) return nullptr;
  Py_RETURN_NONE;
}

// lone_message_ns(src, dst, size_bytes, tag=0)
static PyObject* FlowLinks_lone_message_ns(FlowLinks* self, PyObject* args) {
  long long src, dst, size, tag = 0;
  if (!flow_ready(self) || !PyArg_ParseTuple(args, "LLL|L", &src, &dst, &size, &tag)) return nullptr;
  if (src == dst) return PyFloat_FromDouble(0.0);
  std::vector<int32_t> route;
  if (!flow_route(self, src, dst, tag, &route)) return nullptr;
  FlowModel& m = *self->m;
  const FlowSpeeds& speeds = m.speeds[flow_speeds(m, route)];
  return PyFloat_FromDouble(route_latency(m, route) + pipeline_ns(speeds.terms, size, m.payload, m.header) - 1e-3);
}

static PyObject* FlowLinks_get_link_bytes(FlowLinks* self, void*) {
  if (!flow_ready(self)) return nullptr;
  return number_list(self->m->link_bytes);
}

static PyObject* FlowLinks_get_link_busy_ns(FlowLinks* self, void*) {
  if (!flow_ready(self)) return nullptr;
  return number_list(self->m->link_busy);
}

static PyObject* FlowLinks_get_peak_flows(FlowLinks* self, void*) {
  return flow_ready(self) ? number_list(self->m->solver.peak) : nullptr;
}

static PyObject* FlowLinks_get_flows_solved(FlowLinks* self, void*) {
  return flow_ready(self) ? PyLong_FromLongLong(self->m->solver.flows_solved) : nullptr;
}

static PyObject* FlowLinks_get_messages(FlowLinks* self, void*) {
  return flow_ready(self) ? PyLong_FromLongLong(self->m->messages) : nullptr;
}

// The active flows as (links, weights, cap, rate), by queue pair number.
static PyObject* FlowLinks_get_flows(FlowLinks* self, void*) {
  if (!flow_ready(self)) return nullptr;
  FlowModel& m = *self->m;
  PyObject* out = PyList_New(0);
  for (size_t id = 0; out != nullptr && id < m.qps.size(); ++id) {
    if (!m.qps[id].active) continue;
    const maxmin::Flow& f = m.solver.flows[id];
    PyObject* links = PyTuple_New(static_cast<Py_ssize_t>(f.links.size()));
    PyObject* weights = PyTuple_New(static_cast<Py_ssize_t>(f.links.size()));
    for (size_t k = 0; links != nullptr && weights != nullptr && k < f.links.size(); ++k) {
      PyTuple_SET_ITEM(links, k, PyLong_FromLong(f.links[k]));
      PyTuple_SET_ITEM(weights, k, PyFloat_FromDouble(f.weights[k]));
    }
    PyObject* item = links == nullptr || weights == nullptr
                         ? nullptr
                         : Py_BuildValue("(OOdd)", links, weights, f.cap, m.solver.rate_of(static_cast<int>(id)));
    Py_XDECREF(links);
    Py_XDECREF(weights);
    if (item == nullptr || PyList_Append(out, item) < 0) Py_CLEAR(out);
    Py_XDECREF(item);
  }
  return out;
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

// set_links(links, bytes_per_ns, route=None) 
static PyObject* FlowLinks_set_links(FlowLinks* self, PyObject* args) {
  std::vector<int32_t> changed;
  std::vector<double> bandwidth;
  PyObject* route;
  if (!flow_ready(self) || !read_link_changes(args, self->m->latency.size(), &changed, &bandwidth, &route) ||
      !flow_set_links(self, changed, bandwidth, route))
    return nullptr;
  Py_RETURN_NONE;
}

static PyObject* FlowLinks_get_native_send(FlowLinks* self, void*);

static PyMethodDef FlowLinks_methods[] = {
    {"send", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(FlowLinks_send)),
     METH_FASTCALL | METH_KEYWORDS,
     "send(src, dst, size_bytes, on_delivered, arg=None, *, tag=0): on_delivered(arg) when the message is in"},
    {"solve", reinterpret_cast<PyCFunction>(FlowLinks_solve), METH_NOARGS,
     "solve(): re-solve the rates after this instant's changes (the queue's step_end)"},
    {"set_links", reinterpret_cast<PyCFunction>(FlowLinks_set_links), METH_VARARGS,
     "set_links(links, bytes_per_ns, route=None): links change bandwidth now (0: down); with route, the routing "
     "over the links up, which every queue pair's path follows from now"},
    {"lone_message_ns", reinterpret_cast<PyCFunction>(FlowLinks_lone_message_ns), METH_VARARGS,
     "lone_message_ns(src, dst, size_bytes, tag=0): a message alone on the idle network, less 1 ps"},
    {nullptr, nullptr, 0, nullptr}};

static PyGetSetDef FlowLinks_getset[] = {
    {"native_send", reinterpret_cast<getter>(FlowLinks_get_native_send), nullptr,
     "the model's send for the kernel's matcher (a capsule astra.native_send; docs/plugins.md)", nullptr},
    {"link_bytes", reinterpret_cast<getter>(FlowLinks_get_link_bytes), nullptr,
     "per link: data and ACK wire bytes that crossed it (counted when a flow goes idle)", nullptr},
    {"link_busy_ns", reinterpret_cast<getter>(FlowLinks_get_link_busy_ns), nullptr,
     "per link: ns its wire bytes took at its bandwidth when they were counted", nullptr},
    {"peak_flows", reinterpret_cast<getter>(FlowLinks_get_peak_flows), nullptr, "per link: the most flows at once",
     nullptr},
    {"flows_solved", reinterpret_cast<getter>(FlowLinks_get_flows_solved), nullptr,
     "flows refilled over all re-solves", nullptr},
    {"messages", reinterpret_cast<getter>(FlowLinks_get_messages), nullptr, "messages sent", nullptr},
    {"flows", reinterpret_cast<getter>(FlowLinks_get_flows), nullptr,
     "the active flows as (links, weights, cap, rate): a queue pair's data and ACK links", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

static void init_flow_links_type() {
  PyTypeObject& t = FlowLinksType;
  t.tp_name = "_astra_kernel.FlowLinks";
  t.tp_basicsize = sizeof(FlowLinks);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  t.tp_doc =
      "FlowLinks(events, route, bytes_per_ns, latency_ns, route_buckets, payload_bytes, header_bytes, ack_weight, "
      "cap_bytes_per_ns, reallocation_delay_ns): the flow backend's max-min fair queue pairs on the EventQueue "
      "events (astra_flow.network); route(src, dst, bucket) gives the link ids of flow bucket flow_hash(src, dst, "
      "tag) % route_buckets, asked for once. Set events.step_end to its solve.";
  t.tp_new = FlowLinks_new;
  t.tp_init = reinterpret_cast<initproc>(FlowLinks_init);
  t.tp_dealloc = reinterpret_cast<destructor>(FlowLinks_dealloc);
  t.tp_traverse = reinterpret_cast<traverseproc>(FlowLinks_traverse);
  t.tp_clear = reinterpret_cast<inquiry>(FlowLinks_clear);
  t.tp_methods = FlowLinks_methods;
  t.tp_getset = FlowLinks_getset;
}
