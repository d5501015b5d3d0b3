// The flow backend's model, a compiled network model on the kernel's public interface
// (astra_kernel_api.h, astra_flat_map.h, astra_maxmin.h, astra_pipeline.h): it uses no
// Python C API. backends/flow/astra_flow/network.py describes it.
//
// Messages drain on RDMA queue pairs (src, dst, tag), one after the other; a queue
// pair with messages is one flow over its route, at the max-min fair rate
// (astra_maxmin.h) re-solved at the end of every instant at which flows start, and a
// reallocation delay after flows stop; a message is delivered a pipeline tail after its
// last byte drained (its lone store-and-forward time less the time its wire bytes take
// at the route's bottleneck), less a packet time for each flow behind it in the last
// round at its bottleneck (last_round_lead). Event times are rounded to whole ps, as
// Python's round(t, 3) (api->round_ps), so that instants that exact arithmetic makes
// equal stay equal whatever the rates' rounding.
//
// Python drives it through the extern "C" functions at the end (astra_flow.links,
// through astra.plugin.load): a model is a handle (its address); arrays travel as
// addresses; a function that fails returns -1 (or 0 for a handle) with a Python
// exception set.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "astra_deliveries.h"
#include "astra_flat_map.h"
#include "astra_kernel_api.h"
#include "astra_maxmin.h"
#include "astra_pipeline.h"
#include "astra_routes.h"

namespace astra_flow {

using astra::BigVector;
using astra::FlatMap;
using astra::PipelineTerm;
using astra::packets_of;
using astra::pipeline_ns;
using astra::pipeline_terms;
using astra::RouteKey;
using astra::RouteKeyHash;
namespace maxmin = astra::maxmin;

struct FlowMessage {
  int64_t size;
  int32_t next;  // the queue pair's next message (-1: none)
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

struct Model {
  const AstraKernelApi* api;
  PyObject* events;  // the kernel's EventQueue, kept alive by the Python side
  std::unique_ptr<astra::Routes> routes;  // its routing is kept alive by the Python side
  std::unique_ptr<FlowModel> m;
  std::unique_ptr<astra::Deliveries> deliveries;  // of the pool's messages, by message
  AstraNativeSend native;
};

// The links of route (src, dst, tag) into ``out``; false with an error set.
static bool flow_route(Model* self, int64_t src, int64_t dst, int64_t tag, std::vector<int32_t>* out) {
  FlowModel& m = *self->m;
  if (!self->routes->find(src, dst, tag, out)) return false;
  char text[160];
  for (int32_t link : *out) {
    if (link >= 0 && link < static_cast<int32_t>(m.latency.size()) && m.down[link]) {
      snprintf(text, sizeof text, "the route of %lld -> %lld crosses link %d, which is down",
               static_cast<long long>(src), static_cast<long long>(dst), link);
      return self->api->fail(ASTRA_VALUE_ERROR, text) == 0;
    }
    if (link < 0 || link >= static_cast<int32_t>(m.latency.size())) {
      snprintf(text, sizeof text, "the route of %lld -> %lld crosses link %d of %zu", static_cast<long long>(src),
               static_cast<long long>(dst), link, m.latency.size());
      return self->api->fail(ASTRA_INDEX_ERROR, text) == 0;
    }
  }
  if (out->empty()) {
    snprintf(text, sizeof text, "no route from NPU %lld to NPU %lld", static_cast<long long>(src),
             static_cast<long long>(dst));
    return self->api->fail(ASTRA_VALUE_ERROR, text) == 0;
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
static int flow_new_queue_pair(Model* self, int64_t src, int64_t dst, int64_t tag) {
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
static inline double on_ps_grid(const AstraKernelApi* api, double now, double delay) {
  double t = api->round_ps(now + delay);
  return now > t ? now : t;
}

// When bundle ``b``'s first flow drains (INFINITY: it has none), on the ps grid.
static double bundle_drain_at(const AstraKernelApi* api, FlowModel& m, int b, int* first) {
  *first = m.solver.first_due(b);
  if (*first < 0) return INFINITY;
  const maxmin::Bundle& x = m.solver.bundles[b];
  return on_ps_grid(api, x.since, std::max(m.solver.flows[*first].tag - x.clock, 0.0) / x.share);
}

static int flow_drained(void* ctx, long long arg);
static int flow_reallocate(void* ctx, long long);

// The next reallocation event, at the first stopped flow's due time (a whole number
// where the delay and the clock are).
static int schedule_reallocation(Model* self) {
  FlowModel& m = *self->m;
  int integral = m.reallocation_integral ? self->api->now_integral(self->events) : 0;
  return self->api->schedule_at(self->events, m.stopped.front().due, integral > 0, flow_reallocate, self, 0);
}

// A drain event for bundle ``b`` at its first flow's drain, unless one is queued as soon.
static int flow_schedule(Model* self, int b) {
  FlowModel& m = *self->m;
  if (b >= static_cast<int>(m.event_at.size())) {
    m.event_at.resize(m.solver.bundles.size(), INFINITY);
    m.event_version.resize(m.solver.bundles.size(), 0);
  }
  int first;
  double when = bundle_drain_at(self->api, m, b, &first);
  if (first < 0 || m.event_at[b] <= when) return 0;  // found when the queued event fires
  m.event_at[b] = when;
  int64_t arg = (static_cast<int64_t>(b) << 32) | ++m.event_version[b];
  return self->api->schedule_at(self->events, when, 0, flow_drained, self, arg);
}

// Drain events for the bundles whose first flow may have changed.
static int flow_reschedule(Model* self) {
  maxmin::Solver& solver = self->m->solver;
  for (size_t i = 0; i < solver.dirty.size(); ++i) {
    int b = solver.dirty[i];
    solver.bundles[b].dirty = false;
    if (solver.bundles[b].live && flow_schedule(self, b) < 0) return -1;
  }
  solver.dirty.clear();
  return 0;
}

// Routes a message onto its queue pair; ``token`` is delivered when the message is in.
// -1 with an exception set (the token discarded).
static int flow_send(void* model, long long src, long long dst, long long size, long long tag, AstraToken token) {
  Model* self = static_cast<Model*>(model);
  FlowModel& m = *self->m;
  ++m.messages;
  if (size < 0) {
    self->api->discard(token);
    char text[64];
    snprintf(text, sizeof text, "a message of %lld bytes", size);
    return self->api->fail(ASTRA_VALUE_ERROR, text);
  }
  if (src == dst) return self->api->deliver_after(self->events, 0, 1, token);
  int32_t* found = m.keys.find(RouteKey{src, dst, static_cast<uint64_t>(tag)});
  int id;
  if (found != nullptr) {
    id = *found;
  } else {
    id = flow_new_queue_pair(self, src, dst, tag);
    if (id < 0) {
      self->api->discard(token);
      return -1;
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
  if (!self->deliveries->put(message, token)) {
    m.free_messages.push_back(message);
    return -1;
  }
  m.pool[message] = FlowMessage{size, -1};
  FlowQueuePair& qp = m.qps[id];
  if (qp.tail >= 0) m.pool[qp.tail].next = message;
  else qp.head = message;
  qp.tail = message;
  if (qp.active) return 0;
  if (found != nullptr) --m.idle;  // an idle pair again
  qp.active = true;
  m.head_start[id] = self->api->now(self->events);
  m.solver.add(id);
  m.solver.set_work(id, static_cast<double>(m.wire_bytes(size)));
  return self->api->request_step_end(self->events);
}

// The rates of the flows the last changes affect, and their drains moved: the queue's
// step_end.
static int flow_solve(void* ctx, long long) {
  Model* self = static_cast<Model*>(ctx);
  FlowModel& m = *self->m;
  m.solver.now = self->api->now(self->events);
  m.solver.solve();
  return flow_reschedule(self);
}

// Stopped flows' reallocation is due (a multiple of the delay): the links of every flow
// that stopped in the period before are re-solved at the end of this instant.
static int flow_reallocate(void* ctx, long long) {
  Model* self = static_cast<Model*>(ctx);
  FlowModel& m = *self->m;
  double now = self->api->now(self->events);
  m.reallocation_due = false;
  while (!m.stopped.empty() && m.stopped.front().due <= now) {
    FlowModel::Stopped& done = m.stopped.front();
    for (size_t i = 0; i < done.links; ++i) {
      m.solver.touch(m.stopped_links.front(), done.rate);
      m.stopped_links.pop_front();
    }
    m.stopped.pop_front();
  }
  if (self->api->request_step_end(self->events) < 0) return -1;
  if (m.stopped.empty()) return 0;
  m.reallocation_due = true;
  return schedule_reallocation(self);
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
static int flow_head_drained(Model* self, int id, double now) {
  FlowModel& m = *self->m;
  FlowQueuePair& qp = m.qps[id];
  int32_t message = qp.head;
  FlowMessage& head = m.pool[message];
  int64_t size = head.size;
  AstraToken token = self->deliveries->take(message);
  qp.head = head.next;
  if (qp.head < 0) qp.tail = -1;
  m.free_messages.push_back(message);
  if (size != qp.tail_size) {
    const FlowSpeeds& speeds = m.speeds[qp.speeds];
    double lone = pipeline_ns(speeds.terms, size, m.payload, m.header);
    qp.tail_ns = qp.latency_ns + lone - static_cast<double>(m.wire_bytes(size)) * speeds.bottleneck_ns_per_byte;
    qp.tail_size = size;
  }
  double due =
      self->api->round_ps(now + qp.tail_ns - last_round_lead(m, id, static_cast<double>(m.wire_bytes(size)), now));
  int delivered = due >= now ? self->api->deliver_at(self->events, due, 0, token)
                             : self->api->deliver_after(self->events, 0, 1, token);
  if (delivered < 0) return -1;
  qp.wire_sent += static_cast<double>(m.wire_bytes(size));
  if (qp.head >= 0) {
    m.head_start[id] = now;
    m.solver.set_work(id, static_cast<double>(m.wire_bytes(m.pool[qp.head].size)));
    return 0;
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
  if (m.reallocation_delay == 0) return self->api->request_step_end(self->events);
  if (m.reallocation_due) return 0;
  m.reallocation_due = true;
  return schedule_reallocation(self);
}

// The drain event ``arg`` (bundle << 32 | version): its flows due now drain their head
// messages.
static int flow_drained(void* ctx, long long arg) {
  Model* self = static_cast<Model*>(ctx);
  FlowModel& m = *self->m;
  int b = static_cast<int>(arg >> 32);
  if (static_cast<uint32_t>(arg) != m.event_version[b]) return 0;  // a sooner drain replaced it
  m.event_at[b] = INFINITY;
  double now = self->api->now(self->events);
  m.solver.now = now;
  while (m.solver.bundles[b].live) {
    int id;
    if (bundle_drain_at(self->api, m, b, &id) > now) break;
    if (flow_head_drained(self, id, now) < 0) return -1;
  }
  if (m.solver.bundles[b].live) m.solver.mark_dirty(b);  // its next flow, or this one at its new rate
  return flow_reschedule(self);
}

// Links change at this instant (set_links): ``bandwidth[i]`` bytes/ns for link
// ``changed[i]`` (0: down), and with ``new_route`` the routing ``route`` over the links
// up now. Every live queue pair takes the path that routing gives it (switches rehash
// their flows over the next hops left, as ECMP without resilient hashing does), so the
// routes are always those of the links up, and a link that comes back carries its
// flows again. An active flow that moves keeps the bytes it drained (counted on its old
// links) and drains the rest on its new path: the fluid model loses no byte, as RoCE's
// retransmission would resend them. Flows whose rates the change can reach (those
// linked to the changed links and moved flows through shared links) are re-solved
// from scratch at the end of the instant; the others keep their rates and drains.
static bool flow_set_links(Model* self, const std::vector<int32_t>& changed, const std::vector<double>& bandwidth,
                           PyObject* route, bool new_route) {
  FlowModel& m = *self->m;
  double now = self->api->now(self->events);
  size_t n_links = m.latency.size();
  std::vector<char> touched(n_links, 0);
  for (size_t i = 0; i < changed.size(); ++i) {
    int32_t link = changed[i];
    touched[link] = 1;
    m.down[link] = bandwidth[i] == 0.0;
    if (bandwidth[i] > 0.0) m.ns_per_byte[link] = 1 / bandwidth[i];
  }
  if (new_route) {
    if (self->api->keep(self->events, route) < 0) return false;
    self->routes->set(route);
  }
  // the queue pairs that move, with their new paths
  struct Move {
    int id;
    std::vector<int32_t> route, reverse;
  };
  std::vector<Move> moves;
  std::vector<char> moving(m.qps.size(), 0);
  for (size_t id = 0; new_route && id < m.qps.size(); ++id) {
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
  return self->api->request_step_end(self->events) == 0;
}


static Model* model_of(long long handle) { return reinterpret_cast<Model*>(static_cast<intptr_t>(handle)); }

// The queue's end of a model it adopted.
static void destroy(void* model) { std::unique_ptr<Model> owned(static_cast<Model*>(model)); }

template <class T>
static T* array_at(long long address) {
  return reinterpret_cast<T*>(static_cast<intptr_t>(address));
}

// The model's settings are usable: 0, or -1 with an exception set.
static int check_settings(const AstraKernelApi* api, long long n_links, const double* bandwidth, long long payload,
                          long long header, double ack_weight, double cap, double delay_ns) {
  if (api->version < 2) return api->fail(ASTRA_VALUE_ERROR, "the flow model needs the kernel API of version 2 or later");
  for (long long i = 0; i < n_links; ++i)
    if (!(bandwidth[i] > 0 && bandwidth[i] < INFINITY))
      return api->fail(ASTRA_VALUE_ERROR, "every link's bandwidth must be positive and finite");
  if (payload <= 0 || header < 0 || !(delay_ns >= 0 && delay_ns < INFINITY) || !(ack_weight >= 0) || !(cap >= 0))
    return api->fail(ASTRA_VALUE_ERROR, "payload_bytes must be > 0; header_bytes, ack_weight, cap and delay >= 0");
  return 0;
}

}  // namespace astra_flow

// The functions below keep to their names: cppyy's JIT compiles every model into one
// global namespace.
extern "C" {

// A model of ``n_links`` links (bytes/ns and ns per link at the addresses given) on the
// EventQueue ``events``, routed by ``route`` over ``route_buckets`` flow buckets (with
// ``keep_routes``, each bucket's route is asked for once); packets of ``payload`` +
// ``header`` bytes, ACKs at ``ack_weight`` of the data on the reverse routes, flows
// capped at ``cap`` bytes/ns (0: none), rates re-solved ``delay_ns`` after flows stop
// (``delay_integral``: a whole number). The queue owns it (api->adopt) and keeps it
// alive as long as it lives. Its handle, or 0 with an exception set.
long long astra_flow_new(long long api, PyObject* events, PyObject* route, int keep_routes, long long route_buckets,
                         long long n_links, long long bytes_per_ns, long long latency_ns, long long payload,
                         long long header, double ack_weight, double cap, double delay_ns, int delay_integral) {
  using namespace astra_flow;
  const AstraKernelApi* kernel_api = array_at<const AstraKernelApi>(api);
  const double* bandwidth = array_at<const double>(bytes_per_ns);
  const double* latency = array_at<const double>(latency_ns);
  if (check_settings(kernel_api, n_links, bandwidth, payload, header, ack_weight, cap, delay_ns) < 0) return 0;
  auto self = std::make_unique<Model>();
  self->api = kernel_api;
  self->events = events;
  self->routes = std::make_unique<astra::Routes>(kernel_api, route, route_buckets, keep_routes != 0);
  self->deliveries = std::make_unique<astra::Deliveries>(kernel_api, events, self.get());
  self->m = std::make_unique<FlowModel>(std::vector<double>(bandwidth, bandwidth + n_links),
                                        std::vector<double>(latency, latency + n_links));
  FlowModel& m = *self->m;
  m.payload = payload;
  m.header = header;
  m.ack_weight = ack_weight;
  m.cap = cap;
  m.reallocation_delay = delay_ns;
  m.reallocation_integral = delay_integral != 0;
  self->native = AstraNativeSend{flow_send, self.get()};
  if (kernel_api->keep(events, route) < 0) return 0;
  Model* model = self.release();
  if (kernel_api->adopt(events, model, destroy) < 0) return 0;
  return static_cast<long long>(reinterpret_cast<intptr_t>(model));
}

// The address of the model's AstraNativeSend (for the capsule "astra.native_send").
long long astra_flow_native_send(long long handle) {
  return static_cast<long long>(reinterpret_cast<intptr_t>(&astra_flow::model_of(handle)->native));
}

// The address of the model's re-solve, a step fn(model, 0) for the queue's step_end
// (astra.plugin.kernel().step_call).
long long astra_flow_solve_step() {
  return static_cast<long long>(reinterpret_cast<intptr_t>(&astra_flow::flow_solve));
}

long long astra_flow_messages(long long handle) { return astra_flow::model_of(handle)->m->messages; }

long long astra_flow_flows_solved(long long handle) { return astra_flow::model_of(handle)->m->solver.flows_solved; }

// Per link, into the array at ``out``: 0, the data and ACK wire bytes that crossed it
// (counted when a flow goes idle or moves), or 1, the ns they took at its bandwidth
// then (doubles); 2, the most flows at once (int64s).
void astra_flow_link_counter(long long handle, int which, long long out) {
  astra_flow::FlowModel& m = *astra_flow::model_of(handle)->m;
  if (which == 2) {
    std::copy(m.solver.peak.begin(), m.solver.peak.end(), astra_flow::array_at<int64_t>(out));
    return;
  }
  const std::vector<double>& values = which == 0 ? m.link_bytes : m.link_busy;
  std::copy(values.begin(), values.end(), astra_flow::array_at<double>(out));
}

// Links change now (astra_flow.links.FlowLinks.set_links: ``n`` link ids and bytes/ns
// at the addresses given, checked by the caller); with ``new_route``, ``route`` is the
// routing over the links up, which every queue pair's path follows from now. 0, or -1
// with an exception set.
int astra_flow_set_links(long long handle, long long n, long long links, long long bytes_per_ns, PyObject* route,
                         int new_route) {
  const int32_t* changed = astra_flow::array_at<const int32_t>(links);
  const double* bandwidth = astra_flow::array_at<const double>(bytes_per_ns);
  bool ok = astra_flow::flow_set_links(astra_flow::model_of(handle), std::vector<int32_t>(changed, changed + n),
                                       std::vector<double>(bandwidth, bandwidth + n), route, new_route != 0);
  return ok ? 0 : -1;
}

// A message alone on the idle network (ns), less 1 ps; -1 with an exception set.
double astra_flow_lone_message_ns(long long handle, long long src, long long dst, long long size, long long tag) {
  using namespace astra_flow;
  Model* self = model_of(handle);
  if (src == dst) return 0.0;
  std::vector<int32_t> route;
  if (!flow_route(self, src, dst, tag, &route)) return -1.0;
  FlowModel& m = *self->m;
  const FlowSpeeds& speeds = m.speeds[flow_speeds(m, route)];
  return route_latency(m, route) + pipeline_ns(speeds.terms, size, m.payload, m.header) - 1e-3;
}

// The active flows: how many, with the total of their links at ``links_out`` (an int64).
long long astra_flow_active_flows(long long handle, long long links_out) {
  astra_flow::FlowModel& m = *astra_flow::model_of(handle)->m;
  long long flows = 0, links = 0;
  for (size_t id = 0; id < m.qps.size(); ++id) {
    if (!m.qps[id].active) continue;
    ++flows;
    links += static_cast<long long>(m.solver.flows[id].links.size());
  }
  *astra_flow::array_at<int64_t>(links_out) = links;
  return flows;
}

// The active flows, by queue pair number, into the arrays at the addresses given (sized
// by astra_flow_active_flows): per flow its links' count (int64), cap and rate
// (doubles); per link of each, its id (int32) and the flow's weight there (double).
void astra_flow_fill_flows(long long handle, long long counts, long long links, long long weights, long long caps,
                           long long rates) {
  using astra_flow::array_at;
  astra_flow::FlowModel& m = *astra_flow::model_of(handle)->m;
  size_t k = 0, at = 0;
  for (size_t id = 0; id < m.qps.size(); ++id) {
    if (!m.qps[id].active) continue;
    const astra::maxmin::Flow& f = m.solver.flows[id];
    array_at<int64_t>(counts)[k] = static_cast<int64_t>(f.links.size());
    array_at<double>(caps)[k] = f.cap;
    array_at<double>(rates)[k] = m.solver.rate_of(static_cast<int>(id));
    for (size_t j = 0; j < f.links.size(); ++j, ++at) {
      array_at<int32_t>(links)[at] = f.links[j];
      array_at<double>(weights)[at] = f.weights[j];
    }
    ++k;
  }
}

}  // extern "C"
