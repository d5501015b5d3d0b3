// astra's weighted max-min solver, shared by the flow model and its Python face
// (backends/flow/astra_flow/cpp/maxmin.cc; docs/kernel.md). Self-contained; everything is in namespace astra::maxmin.
//
// Weighted max-min fair rates by progressive filling, re-solved incrementally: the
// flow model's solver (backends/flow/astra_flow/cpp/flow.cc). The model and the
// incremental method are described in backends/flow/astra_flow/maxmin.py (Bertsekas and Gallager, Data Networks, 2nd ed.,
// section 6.5.2). Python reaches the solver alone through astra_flow.maxmin, for the
// tests against progressive filling from scratch.
//
// Flows are kept in bundles: the flows held at one link (or at one cap) at one rate.
// A bundle knows, per link its flows cross, how many cross it, their weight there and
// the capacity they take (a slot), so progressive filling moves whole bundles: when a
// link fills, each bundle crossing it freezes at once, and only flows whose bottleneck
// moves (part of a bundle crossing the link) are handled one by one. A re-solve's work
// follows the links and bundles a change reaches, not the flows behind them.
//
// Iteration orders are the lists' own (a bundle's flows and slots, a link's slots and
// bundles, in the order they joined but where a removal moved the last into its place;
// changed links ascending), never a hash table's, so that floating-point sums, and
// hence rates, do not depend on hashing.

#ifndef ASTRA_MAXMIN_H
#define ASTRA_MAXMIN_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "astra_flat_map.h"

namespace astra {
namespace maxmin {

constexpr double kRel = 1e-9;  // relative slack when comparing rates
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr size_t kInlineLinks = 6;  // a flow's links kept in it (Flow): a 3-tier fat-tree's route

struct Flow {
  double cap = 0.0;
  bool active = false;
  bool live = false;  // allocated
  int bundle = -1;    // the bundle it is in (-1: stopped, or started and not solved yet)
  int at = -1;        // its index in that bundle's flows
  // Its work: in a bundle, the bundle's clock at which it is done; else what is left
  // (wire bytes in the flow model).
  double tag = 0.0;
  uint32_t stamp = 0;  // bumps with every new tag (a bundle's queue keeps old ones)
  SmallVector<int, kInlineLinks> links;
  const double* weights = nullptr;  // its weight on each link: one of Solver::weight_sets
};

// The flows of one bundle on one link, kept in the bundle (its slots are read in a row).
struct Slot {
  int link = -1;
  int flows = 0;          // how many of the bundle's flows cross the link
  double weight = 0.0;    // the sum of their weights on it
  double used = 0.0;      // the capacity they take at their solved rates
  int in_link = -1;       // index in the link's slots (Solver::link_slots)
  int last = -1;          // the flow that joined it last, while it stays (-1: left)
};

// A slot as the link lists it: its bundle and its index in the bundle's slots.
struct SlotRef {
  int bundle, index;
};

// One of a bundle's flows by when it is done: (tag, flow, stamp).
struct Due {
  double tag;
  int flow;
  uint32_t stamp;
  bool operator>(const Due& o) const { return tag > o.tag || (tag == o.tag && flow > o.flow); }
};

struct LinkHash {
  size_t operator()(int link) const { return static_cast<size_t>(mix64(static_cast<uint32_t>(link))); }
};

// Flows held at one link (link -1: at their cap), all at one rate and with one cap.
// Its clock counts the work each of its flows has done: ``clock`` at ``since``, rising
// at ``share`` per ns; a flow is done when the clock reaches its tag (generalized
// processor sharing's virtual time, Parekh and Gallager 1993), so a change of the
// bundle's rate moves one clock, not each flow's remaining work.
struct Bundle {
  int link = -1;
  double cap = 0.0;
  double share = 0.0;     // the solved rate of its flows (but flows moved in this solve)
  double level = 0.0;     // its rate in the current fill
  bool live = false;
  bool dirty = false;     // its first flow to be done may have changed (Solver::dirty)
  double clock = 0.0, since = 0.0;
  std::vector<Due> due;   // a min-heap by tag; entries of flows that left or re-tagged are stale
  int in_link = -1;       // index in held[link] (or capped)
  uint64_t member = 0;    // the solve's mark while it is re-solved
  uint64_t created = 0;   // the solve's mark if made in that solve
  uint64_t frozen = 0;    // the fill epoch in which it froze
  std::vector<int> flows;
  std::vector<uint64_t> link_bits;  // per flow (as flows): link_bit of each link it crosses
  std::vector<Slot> slots;
  // link -> index in slots: kept per bundle, so that the flows moving in and out of one
  // bundle find its slots in one small table, not in one the size of all bundles' slots
  FlatMap<int, int, LinkHash> slot_of;
};

struct Solver {
  std::vector<double> capacity, used, weight;
  std::vector<int64_t> count, peak;  // per link: its active flows, the most at once
  BigVector<Flow> flows;
  // per flow: its rate where no bundle gives it (rate_of): 0 until placed, and from
  // when it leaves a bundle the bundle's solved share (a flow moved by the solve in
  // progress keeps its rate before the solve)
  BigVector<double> flow_rate;
  std::vector<int> free_ids;
  std::set<std::vector<double>> weight_sets;          // the flows' weights on their links, each once
  const std::vector<double>* last_weight_set = nullptr;  // the one weight_set found last
  BigVector<Bundle> bundles;
  std::vector<int> free_bundles;
  std::vector<std::vector<SlotRef>> link_slots;  // per link: the slots on it
  std::vector<std::vector<int>> held;           // per link: the bundles held at it
  std::vector<int> capped;                      // the bundles held at their cap
  std::vector<char> changed_flag;
  std::vector<int> changed;
  std::vector<int> added;  // flows started since the last solve
  double level = kInf;
  uint64_t marks = 0, epochs = 0;
  int64_t flows_solved = 0;
  bool report_flows = true;  // out_ids per flow (its Python face); the flow model reads bundles' clocks
  std::vector<int> dirty;    // bundles whose first flow to be done may have changed
  double now = 0.0;          // the time of the current change (ns), for the clocks
  uint64_t solve_mark = 0;   // the mark of the solve in progress (0: none)
  // per solve
  std::vector<double> left, load, rem, ld;
  std::vector<uint64_t> in_left, in_new, held_mark, bounded, fresh_mark, merge_mark;
  size_t unfrozen = 0;       // member flows the fill has yet to freeze
  std::vector<int> left_order;                     // links in the order they entered `left`
  std::vector<int> members;                        // bundles re-solved
  std::vector<int> fresh;                          // started flows re-solved
  std::vector<std::vector<int>> fresh_on;          // per link: the started flows on it
  std::vector<int> fresh_links;                    // links whose fresh_on is filled
  std::vector<int> scratch_links, scratch_bundles, scratch_flows;
  std::vector<double> scratch_caps;
  std::vector<std::pair<double, int>> scratch_rates, scratch_heap;
  // results: flows whose rate changed, in order
  std::vector<int> out_ids;
  std::vector<double> out_old, out_new;

  explicit Solver(int n, const double* cap)
      : capacity(cap, cap + n), used(n, 0.0), weight(n, 0.0), count(n, 0), peak(n, 0), link_slots(n),
        held(n), changed_flag(n, 0), left(n, 0.0), load(n, 0.0), rem(n, 0.0), ld(n, 0.0), in_left(n, 0),
        in_new(n, 0), held_mark(n, 0), bounded(n, 0), fresh_mark(n, 0), merge_mark(n, 0), fresh_on(n) {}

  // -- flows ---------------------------------------------------------------------------
  int new_flow(int n, const int* links, const double* weights, double cap) {
    int id;
    if (!free_ids.empty()) {
      id = free_ids.back();
      free_ids.pop_back();
    } else {
      id = static_cast<int>(flows.size());
      flows.emplace_back();
      flow_rate.push_back(0.0);
    }
    Flow& f = flows[id];
    f.links.assign(links, links + n);
    f.weights = weight_set(n, weights);
    f.cap = cap;
    f.bundle = f.at = -1;
    f.active = false;
    f.live = true;
    flow_rate[id] = 0.0;
    return id;
  }

  // A stopped flow's new links and their weights (a reroute); it keeps its number.
  void set_links(int id, int n, const int* links, const double* weights) {
    Flow& f = flows[id];
    f.links.assign(links, links + n);
    f.weights = weight_set(n, weights);
  }

  // These weights as kept in weight_sets (added if new; a set's elements stay put).
  const double* weight_set(int n, const double* weights) {
    const std::vector<double>* last = last_weight_set;  // (the usual case: a flow model has one or two)
    if (last == nullptr || static_cast<int>(last->size()) != n || !std::equal(last->begin(), last->end(), weights))
      last_weight_set = last = &*weight_sets.emplace(weights, weights + n).first;
    return last->data();
  }

  void free_flow(int id) {
    flows[id].live = false;
    free_ids.push_back(id);
  }

  // Flow ``id``'s rate (0 until solved).
  double rate_of(int id) const {
    int b = flows[id].bundle;
    return b < 0 ? flow_rate[id] : bundles[b].share;
  }

  // The link flow ``id``'s rate is held at (-1: its cap, or not solved).
  int held_at(int id) const {
    int b = flows[id].bundle;
    return b < 0 ? -1 : bundles[b].link;
  }

  void add(int id) {
    Flow& f = flows[id];
    flow_rate[id] = 0.0;
    f.active = true;
    for (size_t k = 0; k < f.links.size(); ++k) {
      int link = f.links[k];
      weight[link] += f.weights[k];
      if (++count[link] > peak[link]) peak[link] = count[link];
    }
    added.push_back(id);
  }

  void mark_changed(int link) {
    if (changed_flag[link]) return;
    changed_flag[link] = 1;
    changed.push_back(link);
  }

  // Stops a flow. ``now`` (the default): its links are re-solved at the next solve.
  // Otherwise the caller marks them with touch() when their reallocation is due; a
  // solve before that re-solves them only as far as other changes reach them.
  void remove(int id, bool now = true) {
    Flow& f = flows[id];
    if (f.bundle >= 0) leave(id);
    double old = flow_rate[id];
    for (size_t k = 0; k < f.links.size(); ++k) {
      int link = f.links[k];
      used[link] -= f.weights[k] * old;
      weight[link] -= f.weights[k];
      --count[link];
      if (now) mark_changed(link);
    }
    f.active = false;
    if (now && old < level) level = old;  // (now: the flag; the clock is this->now)
    if (old == 0.0) {  // removed before it was ever solved
      auto it = std::find(added.begin(), added.end(), id);
      if (it != added.end()) added.erase(it);
    }
  }

  // A link of a flow that stopped at ``rate`` (remove(id, false)): re-solved at the next
  // solve, as remove(id) would have it.
  void touch(int link, double stopped_rate) {
    mark_changed(link);
    if (stopped_rate < level) level = stopped_rate;
  }

  // The active flows on ``link`` into ``out``: those of the bundles crossing it, then
  // those started and not solved yet.
  void flows_on(int link, std::vector<int>* out) const {
    for (SlotRef r : link_slots[link])
      for (int id : bundles[r.bundle].flows)
        if (crosses(id, link)) out->push_back(id);
    for (int id : added)
      if (crosses(id, link)) out->push_back(id);
  }

  // A link's bit in a bundle's link_bits (one of 64, by a multiplicative hash).
  static uint64_t link_bit(int link) { return uint64_t{1} << ((static_cast<uint32_t>(link) * 0x9E3779B9u) >> 26); }

  bool crosses(int id, int link) const {
    const auto& ls = flows[id].links;
    return std::find(ls.begin(), ls.end(), link) != ls.end();
  }

  // -- bundles and slots ---------------------------------------------------------------
  std::vector<int>& held_list(int link) { return link < 0 ? capped : held[link]; }

  int new_bundle(int link, double cap, uint64_t created) {
    int b;
    if (!free_bundles.empty()) {
      b = free_bundles.back();
      free_bundles.pop_back();
    } else {
      b = static_cast<int>(bundles.size());
      bundles.emplace_back();
    }
    Bundle& x = bundles[b];
    x.link = link;
    x.cap = cap;
    x.share = x.level = 0.0;
    x.live = true;
    x.dirty = false;
    x.member = x.frozen = 0;
    x.created = created;
    x.clock = 0.0;
    x.since = now;
    x.flows.clear();
    x.link_bits.clear();
    x.slots.clear();
    x.due.clear();
    std::vector<int>& list = held_list(link);
    x.in_link = static_cast<int>(list.size());
    list.push_back(b);
    return b;
  }

  void unlist(int b) {
    Bundle& x = bundles[b];
    std::vector<int>& list = held_list(x.link);
    list[x.in_link] = list.back();
    bundles[list[x.in_link]].in_link = x.in_link;
    list.pop_back();
  }

  // Bundle ``b`` is held at ``link`` from now.
  void relabel(int b, int link) {
    if (bundles[b].link == link) return;
    unlist(b);
    Bundle& x = bundles[b];
    x.link = link;
    std::vector<int>& list = held_list(link);
    x.in_link = static_cast<int>(list.size());
    list.push_back(b);
  }

  // Bundle ``b``'s slot on ``link`` (made if it has none).
  Slot& slot(int b, int link) {
    std::vector<Slot>& list = bundles[b].slots;
    int* found = bundles[b].slot_of.find(link);
    if (found != nullptr) return list[*found];
    int index = static_cast<int>(list.size());
    bundles[b].slot_of.insert(link, index);
    list.emplace_back();
    Slot& x = list.back();
    x.link = link;
    x.in_link = static_cast<int>(link_slots[link].size());
    link_slots[link].push_back({b, index});
    return x;
  }

  void drop_slot(int b, int index) {
    std::vector<Slot>& list = bundles[b].slots;
    Slot& x = list[index];
    std::vector<SlotRef>& of_link = link_slots[x.link];
    of_link[x.in_link] = of_link.back();
    bundles[of_link[x.in_link].bundle].slots[of_link[x.in_link].index].in_link = x.in_link;
    of_link.pop_back();
    bundles[b].slot_of.erase(x.link);
    if (index + 1 != static_cast<int>(list.size())) {
      list[index] = list.back();
      link_slots[list[index].link][list[index].in_link].index = index;
      *bundles[b].slot_of.find(list[index].link) = index;
    }
    list.pop_back();
  }

  double clock_at(const Bundle& x) const { return x.clock + x.share * (now - x.since); }

  void mark_dirty(int b) {
    if (bundles[b].dirty) return;
    bundles[b].dirty = true;
    dirty.push_back(b);
  }

  void queue_due(int id, int b) {
    Flow& f = flows[id];
    ++f.stamp;
    std::vector<Due>& q = bundles[b].due;
    if (q.size() > 2 * bundles[b].flows.size() + 32) {  // mostly stale: rebuilt
      q.clear();
      for (int other : bundles[b].flows)
        if (other != id) q.push_back({flows[other].tag, other, flows[other].stamp});
      std::make_heap(q.begin(), q.end(), std::greater<Due>());
    }
    q.push_back({f.tag, id, f.stamp});
    std::push_heap(q.begin(), q.end(), std::greater<Due>());
    mark_dirty(b);
  }

  // Flow ``id`` has ``work`` left from now.
  void set_work(int id, double work) {
    Flow& f = flows[id];
    if (f.bundle < 0) {
      f.tag = work;
      return;
    }
    f.tag = clock_at(bundles[f.bundle]) + work;
    queue_due(id, f.bundle);
  }

  // The work flow ``id`` has left now.
  double work_left(int id) const {
    const Flow& f = flows[id];
    return f.bundle < 0 ? f.tag : f.tag - clock_at(bundles[f.bundle]);
  }

  // The first flow of bundle ``b`` to be done (-1: none), dropping stale entries.
  int first_due(int b) {
    std::vector<Due>& q = bundles[b].due;
    while (!q.empty()) {
      const Due& d = q.front();
      const Flow& f = flows[d.flow];
      if (f.bundle == b && f.stamp == d.stamp) return d.flow;
      std::pop_heap(q.begin(), q.end(), std::greater<Due>());
      q.pop_back();
    }
    return -1;
  }

  void join(int id, int b) {
    Flow& f = flows[id];
    double rate = flow_rate[id];
    f.bundle = b;
    f.at = static_cast<int>(bundles[b].flows.size());
    bundles[b].flows.push_back(id);
    uint64_t bits = 0;
    for (int link : f.links) bits |= link_bit(link);
    bundles[b].link_bits.push_back(bits);
    f.tag += clock_at(bundles[b]);
    queue_due(id, b);
    for (size_t k = 0; k < f.links.size(); ++k) {
      Slot& x = slot(b, f.links[k]);
      x.last = id;
      ++x.flows;
      x.weight += f.weights[k];
      x.used += f.weights[k] * rate;
    }
  }

  void leave(int id) {
    Flow& f = flows[id];
    int b = f.bundle;
    // its rate so far: its bundle's, but in a bundle made by the solve in progress
    if (bundles[b].created == 0 || bundles[b].created != solve_mark) flow_rate[id] = bundles[b].share;
    double rate = flow_rate[id];
    f.tag -= clock_at(bundles[b]);
    for (size_t k = 0; k < f.links.size(); ++k) {
      int s = *bundles[b].slot_of.find(f.links[k]);
      Slot& x = bundles[b].slots[s];
      if (--x.flows == 0) drop_slot(b, s);
      else {
        if (x.last == id) x.last = -1;
        x.weight -= f.weights[k];
        x.used -= f.weights[k] * rate;
      }
    }
    std::vector<int>& list = bundles[b].flows;
    list[f.at] = list.back();
    flows[list[f.at]].at = f.at;
    list.pop_back();
    bundles[b].link_bits[f.at] = bundles[b].link_bits.back();
    bundles[b].link_bits.pop_back();
    f.bundle = f.at = -1;
    if (list.empty()) {
      unlist(b);
      bundles[b].live = false;
      bundles[b].due.clear();
      free_bundles.push_back(b);
    } else {
      mark_dirty(b);
    }
  }

  // A bundle held at ``link`` at ``rate`` with ``cap`` (a new one if there is none).
  int bundle_at(int link, double rate, double cap) {
    for (int b : held_list(link))
      if (bundles[b].share == rate && bundles[b].cap == cap) return b;
    int b = new_bundle(link, cap, 0);
    bundles[b].share = bundles[b].level = rate;
    return b;
  }

  void report(int id, double old, double rate) {
    out_ids.push_back(id);
    out_old.push_back(old);
    out_new.push_back(rate);
  }

  // Flow ``id``, not in a bundle, placed at ``rate`` in bundle ``b``.
  void place(int id, int b, double rate) {
    const Flow& f = flows[id];
    for (size_t k = 0; k < f.links.size(); ++k) used[f.links[k]] += f.weights[k] * rate;
    flow_rate[id] = rate;
    join(id, b);
    if (report_flows) report(id, 0.0, rate);
  }

  // -- solving -------------------------------------------------------------------------
  // New flows take the capacity their links have spare, split by weight among the new
  // flows of each link, when that is max-min (no other rate changes).
  bool place_new() {
    ++epochs;
    uint64_t epoch = epochs;
    std::vector<int>& touched = scratch_links;
    touched.clear();
    for (int id : added) {
      const Flow& f = flows[id];
      for (size_t k = 0; k < f.links.size(); ++k) {
        int link = f.links[k];
        if (in_new[link] != epoch) {
          in_new[link] = epoch;
          ld[link] = 0.0;
          touched.push_back(link);
        }
        ld[link] += f.weights[k];
      }
    }
    for (int link : touched) rem[link] = (capacity[link] - used[link]) / ld[link];  // share
    std::vector<std::pair<double, int>>& rates = scratch_rates;
    rates.clear();
    for (int id : added) {
      const Flow& f = flows[id];
      double rate = kInf;
      for (int link : f.links) rate = std::min(rate, rem[link]);
      int tightest = -1;  // of its links in that share's band, the lowest numbered (next_filled)
      for (int link : f.links)
        if (level_band(rem[link]) == level_band(rate) && (tightest < 0 || link < tightest)) tightest = link;
      if (!(rate > 0)) return false;
      if (0 < f.cap && f.cap < rate) {
        rate = f.cap;
        tightest = -1;
      }
      rates.emplace_back(rate, tightest);
    }
    for (int link : touched) left[link] = 0.0;  // filled
    for (size_t i = 0; i < added.size(); ++i) {
      const Flow& f = flows[added[i]];
      for (size_t k = 0; k < f.links.size(); ++k) left[f.links[k]] += f.weights[k] * rates[i].first;
    }
    for (size_t i = 0; i < added.size(); ++i) {
      auto [rate, tightest] = rates[i];
      if (tightest < 0) continue;
      double top = rate * (1 + kRel);
      if (left[tightest] < (capacity[tightest] - used[tightest]) * (1 - kRel)) return false;
      for (SlotRef r : link_slots[tightest])
        if (bundles[r.bundle].share > top) return false;
    }
    for (size_t i = 0; i < added.size(); ++i) {
      int id = added[i];
      auto [rate, tightest] = rates[i];
      place(id, bundle_at(tightest, rate, flows[id].cap), rate);
    }
    return true;
  }

  void admit_bundle(int b, uint64_t mark) {
    Bundle& x = bundles[b];
    if (x.member == mark) return;
    x.member = mark;
    members.push_back(b);
  }

  void enter(int link, uint64_t epoch) {
    if (in_left[link] == epoch) return;
    in_left[link] = epoch;
    left_order.push_back(link);
    left[link] = capacity[link] - used[link];
    load[link] = 0.0;
  }

  // Bundle ``b`` (its flows crossing ``link`` when only some of them do) freezes at
  // ``share`` held at ``link`` (-1: at its cap); returns the flows frozen.
  size_t freeze_bundle(int b, int link, int crossing, int last, double share, uint64_t epoch, uint64_t mark,
                       std::vector<std::pair<double, int>>* targets) {
    Bundle& x = bundles[b];
    if (link < 0 || crossing == static_cast<int>(x.flows.size())) {
      relabel(b, link);
      Bundle& y = bundles[b];
      y.level = share;
      y.frozen = epoch;
      frozen_slots(b, share);
      return y.flows.size();
    }
    // some of its flows cross the link: they move to a bundle of their own
    std::vector<int>& moving = scratch_flows;
    moving.clear();
    if (crossing == 1 && last >= 0) {
      moving.push_back(last);  // (the usual case: one flow between two host links)
    } else {
      uint64_t bit = link_bit(link);  // (read in a row: only the flows it marks are looked at)
      for (size_t i = 0; i < x.flows.size(); ++i) {
        if ((x.link_bits[i] & bit) && crosses(x.flows[i], link)) moving.push_back(x.flows[i]);
        if (static_cast<int>(moving.size()) == crossing) break;
      }
    }
    int t = target(link, x.cap, share, epoch, mark, targets);
    for (int id : moving) {
      leave(id);
      join(id, t);
    }
    return moving.size();
  }

  // The bundle the flows freezing now at ``link`` with ``cap`` join (made once per freeze).
  int target(int link, double cap, double share, uint64_t epoch, uint64_t mark,
             std::vector<std::pair<double, int>>* targets) {
    for (auto [c, t] : *targets)
      if (c == cap) return t;
    int t = new_bundle(link, cap, mark);
    Bundle& y = bundles[t];
    y.level = share;
    y.frozen = epoch;
    y.member = mark;
    members.push_back(t);
    targets->emplace_back(cap, t);
    return t;
  }

  void frozen_slots(int b, double share) {
    for (const Slot& x : bundles[b].slots) {
      rem[x.link] -= x.weight * share;
      ld[x.link] -= x.weight;
    }
  }

  // The bundles held at ``link`` at or above ``threshold`` join the members (once per
  // solve and link).
  void reach(int link, uint64_t mark, double threshold) {
    if (held_mark[link] == mark) return;
    held_mark[link] = mark;
    for (int b : held[link])
      if (bundles[b].share >= threshold) admit_bundle(b, mark);
  }

  // Capacity left to the members (left) and their weight (load) per link they cross;
  // with ``reaching``, the members grow as they are found by the bundles at or above
  // ``threshold`` held at a link of theirs (whose capacity left a member's new rate
  // moves first). Returns the flows to freeze.
  size_t fill_start(uint64_t mark, uint64_t epoch, bool reaching, double threshold) {
    left_order.clear();
    std::vector<double>& caps = scratch_caps;
    caps.clear();
    size_t todo = 0;
    for (int id : fresh) {
      const Flow& f = flows[id];
      if (f.bundle >= 0) continue;  // placed by an earlier fill of this solve: in a member bundle
      ++todo;
      if (f.cap > 0) caps.push_back(f.cap);
      for (size_t k = 0; k < f.links.size(); ++k) {
        enter(f.links[k], epoch);
        load[f.links[k]] += f.weights[k];
        if (reaching) reach(f.links[k], mark, threshold);
      }
    }
    for (size_t i = 0; i < members.size(); ++i) {  // (grows while reaching)
      int b = members[i];
      todo += bundles[b].flows.size();
      if (bundles[b].cap > 0) caps.push_back(bundles[b].cap);
      for (size_t j = 0; j < bundles[b].slots.size(); ++j) {
        const Slot& y = bundles[b].slots[j];
        enter(y.link, epoch);
        left[y.link] += y.used;
        load[y.link] += y.weight;
        if (reaching) reach(y.link, mark, threshold);
      }
    }
    std::sort(caps.begin(), caps.end());
    caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
    return todo;
  }

  // The next link to fill, or a cap (-1 - index): the lowest level, and of links at
  // that level the lowest numbered, levels being compared by their band (level_band),
  // so that which link holds flows at one level does not depend on how sums round.
  // ``*share``: its level.
  int next_filled(double* share) {
    std::vector<std::pair<double, int>>& heap = scratch_heap;
    std::greater<std::pair<double, int>> later;
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), later);
      auto [band, key] = heap.back();
      heap.pop_back();
      if (key < 0) {
        *share = scratch_caps[-1 - key];
        return key;
      }
      double current;
      if (!current_level(key, &current)) continue;
      if (level_band(current) > band) {  // stale: the link's level rose since
        heap.emplace_back(level_band(current), key);
        std::push_heap(heap.begin(), heap.end(), later);
        continue;
      }
      *share = current;
      return key;
    }
    return kNone;
  }

  // A level with its last 23 mantissa bits cleared: levels within about 1e-9 of each
  // other, as sums in another order give them, share a band (but for the rare pair
  // astride a band's edge).
  static double level_band(double level) {
    uint64_t bits;
    std::memcpy(&bits, &level, sizeof bits);
    bits &= ~((uint64_t{1} << 23) - 1);
    std::memcpy(&level, &bits, sizeof bits);
    return level;
  }

  static constexpr int kNone = std::numeric_limits<int>::min();

  bool current_level(int link, double* level) const {
    double w = ld[link];
    if (w <= 1e-12) return false;
    *level = std::max(rem[link], 0.0) / w;
    return true;
  }

  // Link ``key`` fills at ``share``: every unfrozen member crossing it freezes there.
  size_t freeze_link(int key, double share, uint64_t epoch, uint64_t mark, std::vector<std::pair<double, int>>* targets) {
    if (take_faster(key, share, epoch, mark)) return 0;
    std::vector<int>& crossing = scratch_bundles;
    crossing.clear();
    for (SlotRef r : link_slots[key]) {
      const Bundle& x = bundles[r.bundle];
      if (x.member == mark && x.frozen != epoch) {
        crossing.push_back(r.bundle);
        crossing.push_back(x.slots[r.index].flows);
        crossing.push_back(x.slots[r.index].last);
      }
    }
    size_t done = 0;
    for (size_t i = 0; i < crossing.size(); i += 3)
      done += freeze_bundle(crossing[i], key, crossing[i + 1], crossing[i + 2], share, epoch, mark, targets);
    if (fresh_mark[key] == mark)
      for (int id : fresh_on[key])
        if (flows[id].bundle < 0) {
          join(id, target(key, flows[id].cap, share, epoch, mark, targets));
          ++done;
        }
    for (auto [c, t] : *targets) frozen_slots(t, share);
    ld[key] = 0.0;
    return done;
  }

  // Bundles left out of the fill that cross link ``key`` faster than ``share``, the
  // level it fills at: max-min allows no faster flow on a flow's bottleneck, so they
  // join the fill now, and the link fills later. Consistent with filling them from the
  // start: a link they cross that filled before would have taken them in itself.
  bool take_faster(int key, double share, uint64_t epoch, uint64_t mark) {
    double top = share * (1 + kRel);
    bool took = false;
    for (SlotRef r : link_slots[key]) {
      const Bundle& x = bundles[r.bundle];
      if (x.member == mark || !(x.share > top)) continue;
      admit_bundle(r.bundle, mark);
      unfrozen += x.flows.size();
      for (const Slot& y : x.slots) {
        if (in_left[y.link] != epoch) {
          enter(y.link, epoch);
          rem[y.link] = left[y.link];
          ld[y.link] = 0.0;
        }
        rem[y.link] += y.used;
        ld[y.link] += y.weight;
        push_level(y.link);
      }
      if (x.cap > 0) push_cap(x.cap);
      took = true;
    }
    return took;
  }

  void push_level(int link) {
    double level;
    if (!current_level(link, &level)) return;
    scratch_heap.emplace_back(level_band(level), link);
    std::push_heap(scratch_heap.begin(), scratch_heap.end(), std::greater<std::pair<double, int>>());
  }

  void push_cap(double cap) {
    std::vector<double>& caps = scratch_caps;
    if (std::find(caps.begin(), caps.end(), cap) != caps.end()) return;
    caps.push_back(cap);
    scratch_heap.emplace_back(level_band(cap), -static_cast<int>(caps.size()));
    std::push_heap(scratch_heap.begin(), scratch_heap.end(), std::greater<std::pair<double, int>>());
  }

  // A cap: every unfrozen member with it freezes there.
  size_t freeze_cap(double cap, uint64_t epoch, uint64_t mark, std::vector<std::pair<double, int>>* targets) {
    size_t done = 0;
    size_t before = members.size();
    for (size_t i = 0; i < before; ++i) {
      int b = members[i];
      if (bundles[b].frozen != epoch && bundles[b].cap == cap) done += freeze_bundle(b, -1, 0, -1, cap, epoch, mark, targets);
    }
    for (int id : fresh)
      if (flows[id].bundle < 0 && flows[id].cap == cap) {
        join(id, target(-1, cap, cap, epoch, mark, targets));
        ++done;
      }
    for (auto [c, t] : *targets) frozen_slots(t, cap);
    return done;
  }

  // Progressive filling of the members (whole bundles) and the started flows; with
  // ``reaching``, of the bundles their links reach too (fill_start), and of any bundle
  // faster than a link where members fill (take_faster).
  void fill(uint64_t mark, bool reaching, double threshold) {
    uint64_t epoch = ++epochs;
    unfrozen = fill_start(mark, epoch, reaching, threshold);
    std::vector<std::pair<double, int>>& heap = scratch_heap;
    heap.clear();
    for (int link : left_order) {
      rem[link] = left[link];
      ld[link] = load[link];
      if (ld[link] > 0) heap.emplace_back(level_band(rem[link] / ld[link]), link);
    }
    const std::vector<double>& caps = scratch_caps;
    for (size_t i = 0; i < caps.size(); ++i) heap.emplace_back(level_band(caps[i]), -1 - static_cast<int>(i));
    std::make_heap(heap.begin(), heap.end(), std::greater<std::pair<double, int>>());
    std::vector<std::pair<double, int>> targets;
    while (unfrozen > 0) {
      double share;
      int key = next_filled(&share);
      if (key == kNone) break;
      targets.clear();
      size_t done = key < 0 ? freeze_cap(caps[-1 - key], epoch, mark, &targets)
                            : freeze_link(key, share, epoch, mark, &targets);
      unfrozen -= std::min(done, unfrozen);
    }
  }

  // Started flows on each link, for fill (in_new stamped with the solve's mark).
  void index_fresh(uint64_t mark) {
    for (int link : fresh_links) fresh_on[link].clear();
    fresh_links.clear();
    for (int id : fresh)
      for (int link : flows[id].links) {
        if (fresh_mark[link] != mark) {
          fresh_mark[link] = mark;
          fresh_links.push_back(link);
        }
        fresh_on[link].push_back(id);
      }
  }

  // After a fill: the bundles held at links that a member whose rate moved crosses
  // (their link's capacity left moved). False when none is new. (A faster bundle on a
  // member's bottleneck joins during the fill: take_faster.)
  bool widen(uint64_t mark, double threshold) {
    size_t before = members.size();
    for (size_t i = 0; i < before; ++i) {
      const Bundle& x = bundles[members[i]];
      bool moved = x.created == mark || std::fabs(x.level - x.share) > kRel * x.level;
      if (!moved) continue;
      for (size_t j = 0; j < bundles[members[i]].slots.size(); ++j)
        reach(bundles[members[i]].slots[j].link, mark, threshold);
    }
    return members.size() > before;
  }

  // The fill's rates become the flows' rates: per link the capacity taken, per flow
  // the rate (reported where it moved).
  void commit() {
    for (int b : members) {
      Bundle& x = bundles[b];
      flows_solved += static_cast<int64_t>(x.flows.size());
      double rate = x.level;
      bool fresh_bundle = x.created != 0;
      x.member = 0;
      x.created = 0;
      if (!fresh_bundle && rate == x.share) continue;  // its flows' rates and slots stand
      for (Slot& y : x.slots) {
        double taken = y.weight * rate;
        used[y.link] += taken - y.used;
        y.used = taken;
      }
      if (report_flows)
        for (int id : x.flows) {
          double old = fresh_bundle ? flow_rate[id] : x.share;
          if (old != rate) report(id, old, rate);
        }
      x.clock = clock_at(x);
      x.since = now;
      x.share = rate;
      mark_dirty(b);
    }
  }

  // Bundles held at one link at one rate with one cap become one (the smaller moves
  // into the larger), at the links of this solve's members: a filling makes a bundle
  // for the flows that move to a link, beside the one already held there.
  void merge(uint64_t mark) {
    for (int b : members) {
      if (!bundles[b].live || bundles[b].link < 0 || merge_mark[bundles[b].link] == mark) continue;
      int link = bundles[b].link;
      merge_mark[link] = mark;
      std::vector<int>& same = scratch_bundles;
      same.assign(held[link].begin(), held[link].end());
      for (size_t i = 0; i < same.size(); ++i)
        for (size_t j = i + 1; j < same.size(); ++j) {
          Bundle& x = bundles[same[i]];
          Bundle& y = bundles[same[j]];
          if (!x.live || !y.live || x.share != y.share || x.cap != y.cap) continue;
          int into = x.flows.size() >= y.flows.size() ? same[i] : same[j];
          int from = into == same[i] ? same[j] : same[i];
          while (bundles[from].live) {
            int id = bundles[from].flows.back();
            leave(id);
            join(id, into);
          }
        }
    }
  }

  int solve() {
    out_ids.clear();
    out_old.clear();
    out_new.clear();
    if (!added.empty() && place_new()) added.clear();
    double lvl = level;
    ++epochs;
    uint64_t bound_epoch = epochs;
    for (int id : added) {
      for (int link : flows[id].links) {
        if (bounded[link] == bound_epoch) continue;
        bounded[link] = bound_epoch;
        double bound = capacity[link] / weight[link];
        if (bound < lvl) lvl = bound;
        mark_changed(link);
      }
    }
    fresh.assign(added.begin(), added.end());
    added.clear();
    level = kInf;
    if (changed.empty()) return static_cast<int>(out_ids.size());
    std::vector<int>& links = scratch_links;
    links.assign(changed.begin(), changed.end());
    std::sort(links.begin(), links.end());
    for (int link : changed) changed_flag[link] = 0;
    changed.clear();
    uint64_t mark = ++marks;
    solve_mark = mark;
    double threshold = lvl * (1 - kRel);
    members.clear();
    index_fresh(mark);
    for (int link : links) reach(link, mark, threshold);
    fill(mark, true, threshold);
    while (widen(mark, threshold)) fill(mark, false, threshold);
    commit();
    solve_mark = 0;
    merge(mark);
    return static_cast<int>(out_ids.size());
  }
};

}  // namespace maxmin

}  // namespace astra

#endif
