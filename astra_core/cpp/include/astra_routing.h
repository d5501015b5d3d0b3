// The physical topology's default routing, Python-free: shared by the kernel (its
// ShortestPaths, cpp/kernel/routing.h) and anything that routes as it does. In
// namespace astra.
//
// RoutingGraph: the physical topology's default routing (astra_core/topology/
// physical.py): shortest paths by total latency, then by hop count, relaying through
// switches only (through any node where no such path exists: tori and other switchless
// fabrics); where several next hops are equally short, flow_hash(bucket, node, 0)
// picks one at every hop, so each hop's choice is independent and a flow keeps one
// path. Distances to a switch come from one Dijkstra per switch (on demand, kept);
// distances to a host are those of the switches it hangs on plus the last link, as a
// Dijkstra to the host would find them, without running one per host.

#ifndef ASTRA_ROUTING_H
#define ASTRA_ROUTING_H

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <queue>
#include <unordered_map>
#include <utility>
#include <vector>

#include "astra_flat_map.h"

namespace astra {

// Deterministic 32-bit hash of a flow (src, dst, tag): astra_core.topology.physical's
// flow_hash (this is its implementation), which picks among equal-cost paths.
inline uint64_t flow_hash(int64_t src, int64_t dst, int64_t tag) {
  uint64_t h = (static_cast<uint64_t>(src) * 0x9E3779B1ULL) ^ (static_cast<uint64_t>(dst) * 0x85EBCA77ULL) ^
               (static_cast<uint64_t>(tag) * 0xC2B2AE3DULL);
  h &= 0xFFFFFFFFULL;
  h ^= h >> 16;
  h = (h * 0x7FEB352DULL) & 0xFFFFFFFFULL;
  h ^= h >> 15;
  return h;
}

struct Distance {
  double latency;
  int64_t hops;  // -1: unreachable
  bool operator==(const Distance& o) const { return latency == o.latency && hops == o.hops; }
  bool operator<(const Distance& o) const { return latency < o.latency || (latency == o.latency && hops < o.hops); }
};

const Distance UNREACHABLE = {INFINITY, -1};

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

  // The graph of ``nodes`` nodes (``switches`` among them; the rest are the ranks' hosts,
  // in node order) and its links (ends and latency by link id), but those in ``down``,
  // which keep their ids and carry no path. False when a node or link id is out of range
  // or the link vectors differ in length.
  bool build(int32_t node_count, const std::vector<int32_t>& switches, std::vector<int32_t> src,
             std::vector<int32_t> dst, std::vector<double> latency_ns, const std::vector<int32_t>& down) {
    link_src = std::move(src);
    link_dst = std::move(dst);
    latency = std::move(latency_ns);
    size_t links = link_src.size();
    bool ok = node_count > 0 && link_dst.size() == links && latency.size() == links;
    std::vector<char> is_down(links, 0);
    for (int32_t link : down) ok = ok && 0 <= link && static_cast<size_t>(link) < links && (is_down[link] = 1);
    nodes = node_count;
    is_switch.assign(node_count > 0 ? node_count : 0, 0);
    for (int32_t s : switches) ok = ok && 0 <= s && s < node_count && (is_switch[s] = 1);
    out_links.assign(is_switch.size(), {});
    in_links.assign(is_switch.size(), {});
    for (size_t i = 0; ok && i < links; ++i) {
      ok = 0 <= link_src[i] && link_src[i] < node_count && 0 <= link_dst[i] && link_dst[i] < node_count;
      if (!ok) break;
      if (is_down[i]) continue;
      out_links[link_src[i]].push_back(static_cast<int32_t>(i));
      in_links[link_dst[i]].push_back(static_cast<int32_t>(i));
    }
    hosts.clear();
    for (int32_t n = 0; ok && n < node_count; ++n)
      if (!is_switch[n]) hosts.push_back(n);
    return ok;
  }
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

}  // namespace astra

#endif
