// The congestion-aware analytical model (upstream astra-network-analytical
// congestion_aware), a compiled network model on the kernel's public interface
// (astra_kernel_api.h, astra_routes.h): it uses no Python C API.
//
// A message crosses its route link by link, store and forward; a link serves one
// message at a time, first come first served. Serving B bytes keeps a link busy
// int(B / bandwidth) ns, and the message is at the link's far end int(latency +
// B / bandwidth) ns after it started (both truncated as upstream's Link). Routes
// come from the kernel's routing (astra_routes.h): with route_buckets > 0 a route
// depends on (src, dst, flow_hash(src, dst, tag) % route_buckets) only, asked once
// per bucket and kept here.
//
// Python drives it through the extern "C" functions at the end (astra_analytical.
// congestion, through astra.plugin.load): a model is a handle (its address); arrays
// travel as addresses; a function that fails returns -1 (or 0 for a handle) with a
// Python exception set.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <vector>

#include "astra_flat_map.h"
#include "astra_deliveries.h"
#include "astra_kernel_api.h"
#include "astra_routes.h"

namespace astra_congestion {

struct Message {
  astra::SmallVector<int32_t, 8> route;  // link ids, inline up to 8 (one cache line less per hop)
  size_t hop = 0;
  int64_t size = 0;
  int64_t src = 0, dst = 0, tag = 0;
  bool active = false;
  bool resend = false;  // sent again from its source when its current hop ends (set_links)
};

struct Link {
  double bytes_per_ns = 0;
  double latency_ns = 0;
  bool busy = false;
  bool down = false;
  std::deque<uint32_t> queue;  // messages waiting, first come first served
  long long bytes = 0, busy_ns = 0, max_queue = 0;
};

struct Model {
  const AstraKernelApi* api;
  PyObject* events;  // the kernel's EventQueue, kept alive by the Python side
  std::unique_ptr<astra::Routes> routes;  // its routing is kept alive by the Python side
  std::vector<Link> links;
  std::vector<Message> messages;  // in flight, by slot
  std::vector<uint32_t> free_slots;
  std::unique_ptr<astra::Deliveries> deliveries;  // of the messages in flight, by slot
  long long sent = 0;
  AstraNativeSend native;
};

static int hop_arrived(void* ctx, long long slot);
static int link_free(void* ctx, long long link_id);

static int transmit(Model* m, int32_t link_id, uint32_t slot) {
  Link& link = m->links[link_id];
  link.busy = true;
  int64_t size = m->messages[slot].size;
  double serialization = static_cast<double>(size) / link.bytes_per_ns;
  link.bytes += size;
  double busy = std::trunc(serialization);
  link.busy_ns += static_cast<long long>(busy);
  // Arrival first, then the link free: upstream's order for same-time events.
  if (m->api->schedule(m->events, std::trunc(link.latency_ns + serialization), 1, hop_arrived, m, slot) < 0)
    return -1;
  return m->api->schedule(m->events, busy, 1, link_free, m, link_id);
}

static int enqueue(Model* m, uint32_t slot) {
  Message& msg = m->messages[slot];
  int32_t link_id = msg.route[msg.hop];
  if (link_id < 0 || static_cast<size_t>(link_id) >= m->links.size()) {
    char text[96];
    snprintf(text, sizeof text, "a route crosses link %d of %zu", link_id, m->links.size());
    return m->api->fail(ASTRA_INDEX_ERROR, text);
  }
  Link& link = m->links[link_id];
  if (!link.busy) return transmit(m, link_id, slot);
  link.queue.push_back(slot);
  if (static_cast<long long>(link.queue.size()) > link.max_queue) link.max_queue = link.queue.size();
  return 0;
}

// Routes a message and starts it on its first link; ``token`` is delivered when it
// has crossed its last.
static int send(void* model, long long src, long long dst, long long size, long long tag, AstraToken token) {
  Model* m = static_cast<Model*>(model);
  ++m->sent;
  uint32_t slot;
  if (!m->free_slots.empty()) {
    slot = m->free_slots.back();
    m->free_slots.pop_back();
  } else {
    slot = static_cast<uint32_t>(m->messages.size());
    m->messages.emplace_back();
  }
  Message& msg = m->messages[slot];
  if (!m->routes->find(src, dst, tag, &msg.route)) {
    m->free_slots.push_back(slot);
    m->api->discard(token);
    return -1;
  }
  if (msg.route.size() == 0) {
    m->free_slots.push_back(slot);
    return m->api->deliver_after(m->events, 0, 1, token);
  }
  if (!m->deliveries->put(slot, token)) {
    m->free_slots.push_back(slot);
    return -1;
  }
  msg.hop = 0;
  msg.size = size;
  msg.src = src;
  msg.dst = dst;
  msg.tag = tag;
  msg.active = true;
  msg.resend = false;
  return enqueue(m, slot);
}

// Message ``slot`` starts again from its source, on the route the routing gives now.
static int resend(Model* m, uint32_t slot) {
  Message& msg = m->messages[slot];
  if (!m->routes->find(msg.src, msg.dst, msg.tag, &msg.route)) return -1;
  msg.hop = 0;
  msg.resend = false;
  return enqueue(m, slot);
}

static int hop_arrived(void* ctx, long long slot) {
  Model* m = static_cast<Model*>(ctx);
  Message& msg = m->messages[slot];
  if (msg.resend) return resend(m, static_cast<uint32_t>(slot));
  if (++msg.hop < msg.route.size()) return enqueue(m, static_cast<uint32_t>(slot));
  AstraToken token = m->deliveries->take(slot);
  msg.active = false;
  m->free_slots.push_back(static_cast<uint32_t>(slot));
  return m->api->deliver(token);
}

static int link_free(void* ctx, long long link_id) {
  Model* m = static_cast<Model*>(ctx);
  Link& link = m->links[link_id];
  link.busy = false;
  if (link.queue.empty()) return 0;
  uint32_t slot = link.queue.front();
  link.queue.pop_front();
  return transmit(m, static_cast<int32_t>(link_id), slot);
}

// Whether the rest of a message's route (the link it is on or waits for, and after)
// crosses a link that is down.
static bool crosses_down(const Model* m, const Message& msg) {
  for (size_t h = msg.hop; h < msg.route.size(); ++h) {
    int32_t link = msg.route[h];
    if (link >= 0 && static_cast<size_t>(link) < m->links.size() && m->links[link].down) return true;
  }
  return false;
}

// Messages whose route ahead crosses a link that went down: those waiting in a
// link's queue are sent again now; one on a link is marked to be sent again when
// its hop ends.
static int reroute_after_down(Model* m) {
  std::vector<char> queued(m->messages.size(), 0);
  std::vector<uint32_t> again;
  for (Link& link : m->links) {
    std::deque<uint32_t> kept;
    for (uint32_t slot : link.queue) {
      queued[slot] = 1;
      if (crosses_down(m, m->messages[slot])) again.push_back(slot);
      else kept.push_back(slot);
    }
    link.queue.swap(kept);
  }
  for (size_t slot = 0; slot < m->messages.size(); ++slot) {
    Message& msg = m->messages[slot];
    if (msg.active && !queued[slot]) msg.resend = crosses_down(m, msg);
  }
  for (uint32_t slot : again)
    if (resend(m, slot) < 0) return -1;
  return 0;
}

static Model* model_of(long long handle) { return reinterpret_cast<Model*>(static_cast<intptr_t>(handle)); }

// The queue's end of a model it adopted.
static void destroy(void* model) { std::unique_ptr<Model> owned(static_cast<Model*>(model)); }

}  // namespace astra_congestion

// The functions below keep to their names: cppyy's JIT compiles every model into one
// global namespace.

extern "C" {

// A model of ``n_links`` links (bytes/ns and ns per link at the addresses given) on
// the EventQueue ``events``, routed by ``route``, owned by the queue (api->adopt) and
// alive as long as it is; its handle, or 0 with an exception set.
long long astra_congestion_new(long long api, PyObject* events, PyObject* route, long long route_buckets,
                               long long n_links, long long bytes_per_ns, long long latency_ns) {
  const AstraKernelApi* kernel_api = reinterpret_cast<const AstraKernelApi*>(static_cast<intptr_t>(api));
  if (kernel_api->version < 2) {
    kernel_api->fail(ASTRA_VALUE_ERROR, "the congestion model needs the kernel API of version 2 or later");
    return 0;
  }
  auto m = std::make_unique<astra_congestion::Model>();
  m->api = kernel_api;
  m->events = events;
  m->routes = std::make_unique<astra::Routes>(kernel_api, route, route_buckets, true);
  m->deliveries = std::make_unique<astra::Deliveries>(kernel_api, events, m.get());
  const double* bandwidth = reinterpret_cast<const double*>(static_cast<intptr_t>(bytes_per_ns));
  const double* latency = reinterpret_cast<const double*>(static_cast<intptr_t>(latency_ns));
  m->links.resize(n_links);
  for (long long i = 0; i < n_links; ++i) {
    m->links[i].bytes_per_ns = bandwidth[i];
    m->links[i].latency_ns = latency[i];
  }
  m->native = AstraNativeSend{astra_congestion::send, m.get()};
  if (kernel_api->keep(events, route) < 0) return 0;
  astra_congestion::Model* model = m.release();
  if (kernel_api->adopt(events, model, astra_congestion::destroy) < 0) return 0;
  return static_cast<long long>(reinterpret_cast<intptr_t>(model));
}

// The address of the model's AstraNativeSend (for the capsule "astra.native_send").
long long astra_congestion_native_send(long long handle) {
  return static_cast<long long>(reinterpret_cast<intptr_t>(&astra_congestion::model_of(handle)->native));
}

long long astra_congestion_messages(long long handle) { return astra_congestion::model_of(handle)->sent; }

// A per-link counter (0: bytes, 1: busy ns, 2: the most messages queued) into the
// int64 array at ``out`` (one per link).
void astra_congestion_counters(long long handle, int which, long long out) {
  astra_congestion::Model* m = astra_congestion::model_of(handle);
  int64_t* values = reinterpret_cast<int64_t*>(static_cast<intptr_t>(out));
  for (size_t i = 0; i < m->links.size(); ++i) {
    const astra_congestion::Link& link = m->links[i];
    values[i] = which == 0 ? link.bytes : which == 1 ? link.busy_ns : link.max_queue;
  }
}

// Links change now: ``bytes_per_ns[i]`` for link ``links[i]`` (0: down; int32 and
// double arrays of ``n``, checked by the caller: astra.plugin.link_changes); with
// ``new_route`` set, ``route`` is the routing over the links up, which every message
// sent from now on takes. A message transmitting keeps its times; one whose route
// ahead crosses a link that went down is sent again from its source on its new route
// (RoCE's go-back-N retransmission): at once if it waits in a link's queue, else when
// its current hop ends (a message on the link that went down is lost there). 0, or -1
// with an exception set.
int astra_congestion_set_links(long long handle, long long n, long long links, long long bytes_per_ns,
                               PyObject* route, int new_route) {
  astra_congestion::Model* m = astra_congestion::model_of(handle);
  const int32_t* changed = reinterpret_cast<const int32_t*>(static_cast<intptr_t>(links));
  const double* bandwidth = reinterpret_cast<const double*>(static_cast<intptr_t>(bytes_per_ns));
  bool went_down = false;
  for (long long i = 0; i < n; ++i) {
    astra_congestion::Link& link = m->links[changed[i]];
    went_down = went_down || (bandwidth[i] == 0.0 && !link.down);
    link.down = bandwidth[i] == 0.0;
    if (bandwidth[i] > 0.0) link.bytes_per_ns = bandwidth[i];
  }
  if (new_route) {
    if (m->api->keep(m->events, route) < 0) return -1;
    m->routes->set(route);
  }
  return went_down ? astra_congestion::reroute_after_down(m) : 0;
}

}  // extern "C"
