// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// Weighted max-min fair rates by progressive filling, re-solved incrementally: the
// flow model's solver (flow.h). The model and the incremental method are described in
// backends/flow/astra_flow/maxmin.py (Bertsekas and Gallager, Data Networks, 2nd ed.,
// section 6.5.2). Python reaches the solver alone through MaxMin (end of this part),
// for the tests against progressive filling from scratch.
//
// Iteration orders follow the insertion orders the method defines (a link's flows in
// the order they joined it, members in the order they were admitted, changed links in
// ascending order), so that floating-point sums, and hence rates, do not depend on
// hashing.

namespace maxmin {

constexpr double kRel = 1e-9;   // relative slack when comparing rates
constexpr size_t kFew = 16;     // members up to which a fill scans links
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr size_t kInlineLinks = 6;  // a flow's links kept in it (Flow): a 3-tier fat-tree's route

struct Entry {
  int flow;     // -1: removed (a tombstone, compacted away later)
  int k;        // index of this link in the flow's links
  double rate;  // the flow's rate (flow_rate), kept here (set_rate) for the scans of a
                // link's flows, which skip most by rate without reading anything else
};

struct Flow {
  double cap = 0.0;
  uint64_t mark = 0;
  uint64_t rated = 0;    // fill epoch in which new_rate was set
  double new_rate = 0.0;
  bool active = false;
  bool live = false;     // allocated
  SmallVector<int, kInlineLinks> links;
  SmallVector<double, kInlineLinks> weights;
  SmallVector<int, kInlineLinks> pos;  // per link: index of its entry in that link's list (-1: not on it)
};

struct Link {
  std::vector<Entry> flows;
  int dead = 0;
};

struct Solver {
  std::vector<double> capacity, used, weight;
  std::vector<int64_t> count, peak;
  std::vector<Link> on;
  std::vector<Flow> flows;
  // Per flow, apart from Flow so that scans of a link's flows (admit, which skips most
  // by rate, and the flow model's last_round_lead) read a few dense bytes per flow,
  // not a Flow's cache line: its rate, and the link that rate is held at (-1: its cap,
  // or not solved yet).
  std::vector<double> flow_rate;
  std::vector<int> bottleneck;
  // Per link: the active flows whose bottleneck it is, as (flow, its entries on the link),
  // in no particular order; held_index: per flow, its place there (-1: none). Only the
  // flow model's last_round_lead reads them, which would otherwise scan every flow on
  // the link (an all-to-all's host link carries a thousand, a few held there).
  std::vector<std::vector<std::pair<int, int>>> held_flows;
  std::vector<int> held_index;
  std::vector<int> free_ids;
  std::vector<char> changed_flag;
  std::vector<int> changed;
  std::vector<int> added;
  double level = kInf;
  uint64_t marks = 0, epochs = 0;
  int64_t flows_solved = 0;
  // per solve: capacity left to the members and their weight, per link (stamped)
  std::vector<double> left, load, rem, ld;
  std::vector<uint64_t> in_left, in_new, held, admitted, bounded;
  std::vector<int> left_order;  // links in the order they entered `left`
  std::vector<int> members;
  std::vector<int> frozen_order;                 // members in the order they froze
  std::vector<std::pair<int, double>> bottlenecks;  // (link, level), in order
  // scratch space of one solve, kept between solves (no allocation per solve)
  std::vector<int> scratch_links, scratch_capped, scratch_frozen, scratch_unfrozen;
  std::vector<std::pair<double, int>> scratch_rates, scratch_heap;
  // results: flows whose rate changed, in order
  std::vector<int> out_ids;
  std::vector<double> out_old, out_new;

  explicit Solver(int n, const double* cap)
      : capacity(cap, cap + n), used(n, 0.0), weight(n, 0.0), count(n, 0), peak(n, 0), on(n),
        held_flows(n), changed_flag(n, 0), left(n, 0.0), load(n, 0.0), rem(n, 0.0), ld(n, 0.0), in_left(n, 0),
        in_new(n, 0), held(n, 0), admitted(n, 0), bounded(n, 0) {}

  int new_flow(int n, const int* links, const double* weights, double cap) {
    int id;
    if (!free_ids.empty()) {
      id = free_ids.back();
      free_ids.pop_back();
    } else {
      id = static_cast<int>(flows.size());
      flows.emplace_back();
      flow_rate.push_back(0.0);
      bottleneck.push_back(-1);
      held_index.push_back(-1);
    }
    Flow& f = flows[id];
    f.links.assign(links, links + n);
    f.weights.assign(weights, weights + n);
    f.pos.assign(n, -1);
    f.cap = cap;
    flow_rate[id] = 0.0;
    unhold(id);
    bottleneck[id] = -1;
    f.mark = f.rated = 0;
    f.active = false;
    f.live = true;
    return id;
  }

  // A stopped flow's new links and their weights (a reroute); it keeps its number.
  void set_links(int id, int n, const int* links, const double* weights) {
    Flow& f = flows[id];
    f.links.assign(links, links + n);
    f.weights.assign(weights, weights + n);
    f.pos.assign(n, -1);
    unhold(id);
    bottleneck[id] = -1;
  }

  // The link flow ``id``'s rate is held at (-1: none), kept in held_flows.
  void set_bottleneck(int id, int link) {
    if (bottleneck[id] == link) return;
    unhold(id);
    bottleneck[id] = link;
    if (flows[id].active) hold(id);
  }

  void hold(int id) {
    int link = bottleneck[id];
    if (link < 0) return;
    const auto& ls = flows[id].links;
    int times = static_cast<int>(std::count(ls.begin(), ls.end(), link));
    held_index[id] = static_cast<int>(held_flows[link].size());
    held_flows[link].emplace_back(id, times);
  }

  void unhold(int id) {
    int at = held_index[id];
    if (at < 0) return;
    std::vector<std::pair<int, int>>& held_here = held_flows[bottleneck[id]];
    held_here[at] = held_here.back();
    held_index[held_here[at].first] = at;
    held_here.pop_back();
    held_index[id] = -1;
  }

  void free_flow(int id) {
    flows[id].live = false;
    free_ids.push_back(id);
  }

  void add(int id) {
    Flow& f = flows[id];
    flow_rate[id] = 0.0;
    f.active = true;
    hold(id);  // at the link it was held at before it stopped, until solved
    for (size_t k = 0; k < f.links.size(); ++k) {
      int link = f.links[k];
      double w = f.weights[k];
      f.pos[k] = static_cast<int>(on[link].flows.size());
      on[link].flows.push_back({id, static_cast<int>(k), 0.0});
      weight[link] += w;
      if (++count[link] > peak[link]) peak[link] = count[link];
    }
    added.push_back(id);
  }

  // Stops a flow. ``now`` (the default): its links are re-solved at the next solve.
  // Otherwise the caller marks them with touch() when their reallocation is due; a
  // solve before that re-solves them only as far as other changes reach them.
  void remove(int id, bool now = true) {
    Flow& f = flows[id];
    double old = flow_rate[id];
    unhold(id);
    for (size_t k = 0; k < f.links.size(); ++k) {
      int link = f.links[k];
      double w = f.weights[k];
      Link& l = on[link];
      l.flows[f.pos[k]].flow = -1;
      f.pos[k] = -1;
      if (++l.dead * 2 > static_cast<int>(l.flows.size())) compact(l);
      used[link] -= w * old;
      weight[link] -= w;
      --count[link];
      if (now && !changed_flag[link]) {
        changed_flag[link] = 1;
        changed.push_back(link);
      }
    }
    f.active = false;
    if (now && old < level) level = old;
    if (old == 0.0) {  // removed before it was ever solved
      auto it = std::find(added.begin(), added.end(), id);
      if (it != added.end()) added.erase(it);
    }
  }

  // A link of a flow that stopped at ``rate`` (remove(id, false)): re-solved at the next
  // solve, as remove(id) would have it.
  void touch(int link, double stopped_rate) {
    if (!changed_flag[link]) {
      changed_flag[link] = 1;
      changed.push_back(link);
    }
    if (stopped_rate < level) level = stopped_rate;
  }

  void compact(Link& l) {
    size_t j = 0;
    for (size_t i = 0; i < l.flows.size(); ++i) {
      const Entry& e = l.flows[i];
      if (e.flow < 0) continue;
      flows[e.flow].pos[e.k] = static_cast<int>(j);
      l.flows[j++] = e;
    }
    l.flows.resize(j);
    l.dead = 0;
  }

  void set_rate(int id, double new_rate) {
    Flow& f = flows[id];
    double delta = new_rate - flow_rate[id];
    for (size_t k = 0; k < f.links.size(); ++k) {
      used[f.links[k]] += f.weights[k] * delta;
      on[f.links[k]].flows[f.pos[k]].rate = new_rate;
    }
    flow_rate[id] = new_rate;
  }

  void report(int id, double old) {
    out_ids.push_back(id);
    out_old.push_back(old);
    out_new.push_back(flow_rate[id]);
  }

  // New flows take the capacity their links have spare, split by weight among
  // the new flows of each link, when that is max-min (no other rate changes).
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
      int tightest = -1;
      for (int link : f.links) {
        double s = rem[link];
        if (s < rate || (s == rate && link < tightest)) {
          rate = s;
          tightest = link;
        }
      }
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
      for (const Entry& e : on[tightest].flows)
        if (e.flow >= 0 && e.rate > top) return false;
    }
    for (size_t i = 0; i < added.size(); ++i) {
      int id = added[i];
      set_bottleneck(id, rates[i].second);
      set_rate(id, rates[i].first);
      report(id, 0.0);
    }
    return true;
  }

  void admit(int link, bool held_here_only, uint64_t mark, double threshold) {
    for (size_t i = 0; i < on[link].flows.size(); ++i) {
      const Entry e = on[link].flows[i];
      if (e.flow < 0) continue;
      double rate = e.rate;
      if (rate < threshold && rate != 0.0) continue;  // most flows: read no Flow
      if (held_here_only && rate != 0.0 && bottleneck[e.flow] != link) continue;
      Flow& f = flows[e.flow];
      if (f.mark == mark) continue;
      f.mark = mark;
      members.push_back(e.flow);
      for (size_t k = 0; k < f.links.size(); ++k) {
        int other = f.links[k];
        double w = f.weights[k];
        if (in_left[other] == mark) {
          left[other] += w * rate;
          load[other] += w;
        } else {
          in_left[other] = mark;
          left_order.push_back(other);
          left[other] = capacity[other] - used[other] + w * rate;
          load[other] = w;
        }
      }
    }
  }

  void freeze(int id, double share, int key, uint64_t epoch) {
    Flow& f = flows[id];
    f.new_rate = share;
    f.rated = epoch;
    set_bottleneck(id, key);
    frozen_order.push_back(id);
    for (size_t k = 0; k < f.links.size(); ++k) {
      rem[f.links[k]] -= f.weights[k] * share;
      ld[f.links[k]] -= f.weights[k];
    }
  }

  void fill(uint64_t mark) {
    uint64_t epoch = ++epochs;
    frozen_order.clear();
    bottlenecks.clear();
    if (members.size() == 1) {
      int id = members[0];
      Flow& f = flows[id];
      double rate = kInf;
      int link = -1;
      for (size_t k = 0; k < f.links.size(); ++k) {
        double s = left[f.links[k]] / f.weights[k];
        if (s < rate || (s == rate && f.links[k] < link)) {
          rate = s;
          link = f.links[k];
        }
      }
      f.rated = epoch;
      frozen_order.push_back(id);
      if (0 < f.cap && f.cap < rate) {
        set_bottleneck(id, -1);
        f.new_rate = f.cap;
        return;
      }
      rate = std::max(rate, 0.0);
      set_bottleneck(id, link);
      f.new_rate = rate;
      bottlenecks.emplace_back(link, rate);
      return;
    }
    for (int link : left_order) {
      rem[link] = left[link];
      ld[link] = load[link];
    }
    if (members.size() <= kFew) {
      fill_few(epoch);
      return;
    }
    // a min-heap of (share, link; or cap, -1 - capped index)
    std::vector<std::pair<double, int>>& heap = scratch_heap;
    std::greater<std::pair<double, int>> later;
    heap.clear();
    for (int link : left_order)
      if (ld[link] > 0) heap.emplace_back(rem[link] / ld[link], link);
    std::vector<int>& capped = scratch_capped;
    capped.clear();
    for (int id : members)
      if (flows[id].cap > 0) capped.push_back(id);
    for (size_t i = 0; i < capped.size(); ++i)
      heap.emplace_back(flows[capped[i]].cap, -1 - static_cast<int>(i));
    std::make_heap(heap.begin(), heap.end(), later);
    size_t todo = members.size();
    std::vector<int>& frozen = scratch_frozen;
    while (!heap.empty() && frozen_order.size() < todo) {
      std::pop_heap(heap.begin(), heap.end(), later);
      auto [share, key] = heap.back();
      heap.pop_back();
      frozen.clear();
      if (key < 0) {
        int id = capped[-1 - key];
        if (flows[id].rated == epoch) continue;
        frozen.push_back(id);
      } else {
        double w = ld[key];
        if (w <= 1e-12) continue;
        double current = std::max(rem[key], 0.0) / w;
        if (current > share * (1 + kRel)) {
          heap.emplace_back(current, key);  // stale: the link's level rose since
          std::push_heap(heap.begin(), heap.end(), later);
          continue;
        }
        share = current;
        for (const Entry& e : on[key].flows)
          if (e.flow >= 0 && flows[e.flow].mark == mark && flows[e.flow].rated != epoch)
            frozen.push_back(e.flow);
      }
      for (int id : frozen) freeze(id, share, key >= 0 ? key : -1, epoch);
      if (key >= 0) {
        ld[key] = 0.0;
        if (!frozen.empty()) bottlenecks.emplace_back(key, share);
      }
    }
  }

  void fill_few(uint64_t epoch) {
    std::vector<int>& unfrozen = scratch_unfrozen;
    std::vector<int>& frozen = scratch_frozen;
    unfrozen.assign(members.begin(), members.end());
    while (!unfrozen.empty()) {
      double share = kInf;
      int key = -1;
      for (int link : left_order) {
        double w = ld[link];
        if (!(w > 1e-12)) continue;
        double s = rem[link] / w;
        if (s < share || (s == share && link < key)) {
          share = s;
          key = link;
        }
      }
      share = std::max(share, 0.0);
      frozen.clear();
      double cap_level = kInf;
      for (int id : unfrozen) {
        double c = flows[id].cap;
        if (0 < c && c <= share && c < cap_level) cap_level = c;
      }
      if (cap_level < kInf) {
        share = cap_level;
        key = -1;
        for (int id : unfrozen)
          if (flows[id].cap == share) frozen.push_back(id);
      } else {
        for (int id : unfrozen) {
          const auto& ls = flows[id].links;
          if (std::find(ls.begin(), ls.end(), key) != ls.end()) frozen.push_back(id);
        }
        bottlenecks.emplace_back(key, share);
      }
      for (int id : frozen) freeze(id, share, key, epoch);
      if (key >= 0) ld[key] = 0.0;
      size_t j = 0;
      for (int id : unfrozen)
        if (flows[id].rated != epoch) unfrozen[j++] = id;
      unfrozen.resize(j);
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
        if (!changed_flag[link]) {
          changed_flag[link] = 1;
          changed.push_back(link);
        }
      }
    }
    added.clear();
    level = kInf;
    if (changed.empty()) return static_cast<int>(out_ids.size());
    std::vector<int>& links = scratch_links;
    links.assign(changed.begin(), changed.end());
    std::sort(links.begin(), links.end());
    for (int link : changed) changed_flag[link] = 0;
    changed.clear();
    uint64_t mark = ++marks;
    double threshold = lvl * (1 - kRel);
    members.clear();
    left_order.clear();
    for (int link : links) admit(link, true, mark, threshold);
    for (int link : links) held[link] = mark;
    while (true) {
      fill(mark);
      size_t before = members.size();
      for (size_t i = 0; i < before; ++i) {
        const Flow& f = flows[members[i]];
        double old = flow_rate[members[i]], rate = f.new_rate;
        if (std::fabs(rate - old) > kRel * rate) {
          for (size_t k = 0; k < f.links.size(); ++k) {
            int link = flows[members[i]].links[k];
            if (held[link] != mark) {
              held[link] = mark;
              admit(link, true, mark, threshold);
            }
          }
        }
      }
      for (size_t b = 0; b < bottlenecks.size(); ++b) {
        auto [link, share] = bottlenecks[b];
        if (admitted[link] == mark) continue;
        double top = share * (1 + kRel);
        bool faster = false;
        for (const Entry& e : on[link].flows)
          if (e.flow >= 0 && e.rate > top && flows[e.flow].mark != mark) {
            faster = true;
            break;
          }
        if (faster) {
          admitted[link] = mark;
          admit(link, false, mark, threshold);
        }
      }
      if (members.size() == before) break;
    }
    flows_solved += static_cast<int64_t>(members.size());
    for (int id : frozen_order) {
      double old = flow_rate[id], rate = flows[id].new_rate;
      if (rate != old) {
        set_rate(id, rate);
        report(id, old);
      }
    }
    return static_cast<int>(out_ids.size());
  }
};

}  // namespace maxmin

// MaxMin(capacities): the solver alone, for Python (astra_flow.maxmin.MaxMinSolver).
// add_new(links, weights, cap) -> id starts a new flow; add(id), remove(id) and
// free(id) as the solver's; solve() -> [(id, old_rate, new_rate)] in the order the
// rates changed (a new flow placed at once and refilled later is there twice).
struct MaxMin {
  PyObject_HEAD
  maxmin::Solver* solver;
};

static PyTypeObject MaxMinType = {PyVarObject_HEAD_INIT(nullptr, 0)};

static int MaxMin_init(MaxMin* self, PyObject* args, PyObject*) {
  PyObject* capacities;
  if (!PyArg_ParseTuple(args, "O", &capacities)) return -1;
  std::vector<double> cap;
  if (!read_numbers(capacities, "capacities: a sequence of numbers", &cap)) return -1;
  for (double c : cap)
    if (!(c > 0 && c < INFINITY)) {
      PyErr_SetString(PyExc_ValueError, "every link's capacity must be positive and finite");
      return -1;
    }
  delete self->solver;
  self->solver = new maxmin::Solver(static_cast<int>(cap.size()), cap.data());
  return 0;
}

static void MaxMin_dealloc(MaxMin* self) {
  delete self->solver;
  Py_TYPE(self)->tp_free(reinterpret_cast<PyObject*>(self));
}

static bool maxmin_ready(MaxMin* self) {
  if (self->solver != nullptr) return true;
  PyErr_SetString(PyExc_RuntimeError, "MaxMin.__init__ was not called");
  return false;
}

// A flow number the solver knows (and, with ``active``, one whose state fits the call).
static bool maxmin_flow(MaxMin* self, PyObject* arg, int* id) {
  if (!maxmin_ready(self)) return false;
  long long v = PyLong_AsLongLong(arg);
  if (v == -1 && PyErr_Occurred()) return false;
  if (v < 0 || v >= static_cast<long long>(self->solver->flows.size()) || !self->solver->flows[v].live) {
    PyErr_Format(PyExc_ValueError, "no flow %lld", v);
    return false;
  }
  *id = static_cast<int>(v);
  return true;
}

static PyObject* MaxMin_add_new(MaxMin* self, PyObject* args) {
  PyObject *links, *weights;
  double cap = 0.0;
  if (!maxmin_ready(self) || !PyArg_ParseTuple(args, "OO|d", &links, &weights, &cap)) return nullptr;
  std::vector<int> l;
  std::vector<double> w;
  if (!read_numbers(links, "links: a sequence of link ids", &l) ||
      !read_numbers(weights, "weights: a sequence of numbers", &w))
    return nullptr;
  if (l.size() != w.size() || l.empty()) {
    PyErr_SetString(PyExc_ValueError, "a flow needs one weight per link and at least one link");
    return nullptr;
  }
  for (int link : l)
    if (link < 0 || link >= static_cast<int>(self->solver->capacity.size())) {
      PyErr_Format(PyExc_ValueError, "a flow crosses link %d of %zu", link, self->solver->capacity.size());
      return nullptr;
    }
  int id = self->solver->new_flow(static_cast<int>(l.size()), l.data(), w.data(), cap);
  self->solver->add(id);
  return PyLong_FromLong(id);
}

static PyObject* MaxMin_add(MaxMin* self, PyObject* arg) {
  int id;
  if (!maxmin_flow(self, arg, &id)) return nullptr;
  if (self->solver->flows[id].active) return PyErr_Format(PyExc_ValueError, "flow %d is already active", id);
  self->solver->add(id);
  Py_RETURN_NONE;
}

static PyObject* MaxMin_remove(MaxMin* self, PyObject* arg) {
  int id;
  if (!maxmin_flow(self, arg, &id)) return nullptr;
  if (!self->solver->flows[id].active) return PyErr_Format(PyExc_ValueError, "flow %d is not active", id);
  self->solver->remove(id);
  Py_RETURN_NONE;
}

static PyObject* MaxMin_free(MaxMin* self, PyObject* arg) {
  int id;
  if (!maxmin_flow(self, arg, &id)) return nullptr;
  if (self->solver->flows[id].active) return PyErr_Format(PyExc_ValueError, "flow %d is still active", id);
  self->solver->free_flow(id);
  Py_RETURN_NONE;
}

static PyObject* MaxMin_solve(MaxMin* self, PyObject*) {
  if (!maxmin_ready(self)) return nullptr;
  maxmin::Solver& s = *self->solver;
  int n = s.solve();
  PyObject* out = PyList_New(n);
  for (int i = 0; out != nullptr && i < n; ++i) {
    PyObject* item = Py_BuildValue("(idd)", s.out_ids[i], s.out_old[i], s.out_new[i]);
    if (item == nullptr) Py_CLEAR(out);
    else PyList_SET_ITEM(out, i, item);
  }
  return out;
}

static PyObject* MaxMin_get_used(MaxMin* self, void*) {
  if (!maxmin_ready(self)) return nullptr;
  return number_list(self->solver->used);
}

static PyObject* MaxMin_get_peak(MaxMin* self, void*) {
  return maxmin_ready(self) ? number_list(self->solver->peak) : nullptr;
}

static PyObject* MaxMin_get_solved(MaxMin* self, void*) {
  return maxmin_ready(self) ? PyLong_FromLongLong(self->solver->flows_solved) : nullptr;
}

static PyMethodDef MaxMin_methods[] = {
    {"add_new", reinterpret_cast<PyCFunction>(MaxMin_add_new), METH_VARARGS,
     "add_new(links, weights, cap=0.0) -> id: a new flow, started (rate 0 until the next solve)"},
    {"add", reinterpret_cast<PyCFunction>(MaxMin_add), METH_O, "add(id): start a known flow again"},
    {"remove", reinterpret_cast<PyCFunction>(MaxMin_remove), METH_O, "remove(id): stop a flow"},
    {"free", reinterpret_cast<PyCFunction>(MaxMin_free), METH_O, "free(id): forget a stopped flow (its id is reused)"},
    {"solve", reinterpret_cast<PyCFunction>(MaxMin_solve), METH_NOARGS,
     "solve() -> [(id, old_rate, new_rate)]: re-solve after the changes, in the order the rates changed"},
    {nullptr, nullptr, 0, nullptr}};

static PyGetSetDef MaxMin_getset[] = {
    {"used", reinterpret_cast<getter>(MaxMin_get_used), nullptr, "per link: the capacity its flows take", nullptr},
    {"peak_flows", reinterpret_cast<getter>(MaxMin_get_peak), nullptr, "per link: the most flows at once", nullptr},
    {"flows_solved", reinterpret_cast<getter>(MaxMin_get_solved), nullptr, "flows refilled over all solves",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

static void init_maxmin_type() {
  PyTypeObject& t = MaxMinType;
  t.tp_name = "_astra_kernel.MaxMin";
  t.tp_basicsize = sizeof(MaxMin);
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "MaxMin(capacities): weighted max-min fair rates on links of these capacities, re-solved incrementally";
  t.tp_new = PyType_GenericNew;
  t.tp_init = reinterpret_cast<initproc>(MaxMin_init);
  t.tp_dealloc = reinterpret_cast<destructor>(MaxMin_dealloc);
  t.tp_methods = MaxMin_methods;
  t.tp_getset = MaxMin_getset;
}
