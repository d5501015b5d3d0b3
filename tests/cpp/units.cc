// Unit tests of the kernel's public headers (astra_core/cpp/include), in C++ alone:
// the flat hash map, the event heap, the max-min solver, the default routing, a
// compiled model's routes and deliveries, and the lone-message pipeline, each against
// a reference written here independently. tests/cpp/test_units.py builds and runs it;
// `make sanitize` runs it under AddressSanitizer and UndefinedBehaviorSanitizer.
// Prints one line per failed check and a summary; exits 1 when a check failed.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "astra_deliveries.h"
#include "astra_flat_map.h"
#include "astra_heap.h"
#include "astra_kernel_api.h"
#include "astra_maxmin.h"
#include "astra_pipeline.h"
#include "astra_routes.h"
#include "astra_routing.h"

namespace {

int checks = 0, failures = 0;

#define CHECK(condition)                                                    \
  do {                                                                      \
    ++checks;                                                               \
    if (!(condition)) {                                                     \
      ++failures;                                                           \
      std::printf("%s:%d: failed: %s\n", __FILE__, __LINE__, #condition); \
    }                                                                       \
  } while (0)

bool close(double a, double b, double rel = 1e-9) { return std::fabs(a - b) <= rel * std::max(1.0, std::fabs(b)); }

struct IntHash {
  size_t operator()(int k) const { return static_cast<size_t>(astra::mix64(static_cast<uint64_t>(k))); }
};

// Random inserts, finds and erases against std::unordered_map.
void test_flat_map() {
  std::mt19937 rng(1);
  astra::FlatMap<int, int, IntHash> map;
  std::unordered_map<int, int> reference;
  for (int step = 0; step < 200000; ++step) {
    int key = static_cast<int>(rng() % 5000);
    int* found = map.find(key);
    CHECK((found != nullptr) == (reference.count(key) == 1));
    if (found != nullptr) {
      CHECK(*found == reference[key]);
      if (rng() % 2) {
        map.erase(key);
        reference.erase(key);
      }
    } else {
      map.insert(key, step);
      reference[key] = step;
    }
  }
  CHECK(map.size() == reference.size());
  size_t seen = 0;
  map.for_each([&](const int& key, int& value) {
    ++seen;
    CHECK(reference.count(key) == 1 && reference[key] == value);
  });
  CHECK(seen == reference.size());
}

struct Entry {
  double time;
  uint64_t seq;
};

struct Later {
  bool operator()(const Entry& a, const Entry& b) const {
    return a.time > b.time || (a.time == b.time && a.seq > b.seq);
  }
};

// Entries come off in (time, sequence) order, those pushed at the current time while
// it is processed included: the event queue's FIFO within a time.
void test_heap() {
  std::mt19937 rng(2);
  astra::BigVector<Entry> heap;
  uint64_t seq = 0;
  double now = 0;
  std::vector<Entry> popped;
  for (int i = 0; i < 1000; ++i) astra::heap_push<Entry, Later>(heap, Entry{static_cast<double>(rng() % 50), ++seq});
  while (!heap.empty()) {
    Entry e;
    astra::heap_pop<Entry, Later>(heap, e);
    CHECK(e.time >= now);
    now = e.time;
    popped.push_back(e);
    if (popped.size() < 3000 && rng() % 3 == 0)  // some at the current time, some later
      astra::heap_push<Entry, Later>(heap, Entry{now + static_cast<double>(rng() % 3), ++seq});
  }
  for (size_t i = 1; i < popped.size(); ++i)
    CHECK(popped[i - 1].time < popped[i].time || (popped[i - 1].time == popped[i].time && popped[i - 1].seq < popped[i].seq));
}

struct TestFlow {
  std::vector<int> links;
  std::vector<double> weights;
  double cap;  // 0: none
};

// Weighted max-min rates by progressive filling from scratch (Bertsekas and Gallager,
// Data Networks, 6.5.2): raise every unfrozen flow's rate together; freeze the flows
// of the first link to fill, and any flow at its cap; repeat.
std::vector<double> progressive_filling(const std::vector<double>& capacity, const std::vector<TestFlow>& flows) {
  std::vector<double> rate(flows.size(), 0.0), left = capacity;
  std::set<size_t> active;
  for (size_t i = 0; i < flows.size(); ++i) active.insert(i);
  while (!active.empty()) {
    std::vector<double> weight(capacity.size(), 0.0);
    for (size_t i : active)
      for (size_t k = 0; k < flows[i].links.size(); ++k) weight[flows[i].links[k]] += flows[i].weights[k];
    double level = INFINITY;
    for (size_t l = 0; l < capacity.size(); ++l)
      if (weight[l] > 0) level = std::min(level, left[l] / weight[l]);
    for (size_t i : active)
      if (flows[i].cap > 0) level = std::min(level, flows[i].cap);
    std::vector<size_t> done;
    for (size_t i : active) {
      bool frozen = flows[i].cap > 0 && flows[i].cap <= level * (1 + 1e-12);
      for (int l : flows[i].links) frozen = frozen || std::fabs(left[l] / weight[l] - level) <= 1e-12 * level;
      if (frozen) done.push_back(i);
    }
    for (size_t i : done) {
      rate[i] = level;
      for (size_t k = 0; k < flows[i].links.size(); ++k) left[flows[i].links[k]] -= flows[i].weights[k] * level;
      active.erase(i);
    }
  }
  return rate;
}

// After every batch of random starts and stops, the incremental solver's rates equal a
// solve from scratch, and no link carries more than its capacity.
void test_maxmin() {
  std::mt19937 rng(3);
  const int links = 20;
  std::vector<double> capacity;
  for (int l = 0; l < links; ++l) capacity.push_back(std::vector<double>{1.0, 2.5, 10.0}[rng() % 3]);
  astra::maxmin::Solver solver(links, capacity.data());
  std::map<int, TestFlow> live;
  for (int batch = 0; batch < 60; ++batch) {
    for (int n = static_cast<int>(rng() % 12); n > 0; --n) {
      TestFlow f;
      std::vector<int> all(links);
      for (int l = 0; l < links; ++l) all[l] = l;
      std::shuffle(all.begin(), all.end(), rng);
      f.links.assign(all.begin(), all.begin() + 1 + rng() % 4);
      for (size_t k = 0; k < f.links.size(); ++k) f.weights.push_back(rng() % 4 ? 1.0 : 0.05);
      f.cap = rng() % 5 ? 0.0 : 0.3;
      int id = solver.new_flow(static_cast<int>(f.links.size()), f.links.data(), f.weights.data(), f.cap);
      solver.add(id);
      live[id] = f;
    }
    for (auto it = live.begin(); it != live.end();) {
      if (rng() % 4 == 0) {
        solver.remove(it->first);
        solver.free_flow(it->first);
        it = live.erase(it);
      } else {
        ++it;
      }
    }
    solver.solve();
    std::vector<TestFlow> flows;
    std::vector<int> ids;
    for (auto& [id, f] : live) {
      flows.push_back(f);
      ids.push_back(id);
    }
    std::vector<double> expected = progressive_filling(capacity, flows);
    std::vector<double> used(links, 0.0);
    for (size_t i = 0; i < ids.size(); ++i) {
      CHECK(close(solver.rate_of(ids[i]), expected[i]));
      for (size_t k = 0; k < flows[i].links.size(); ++k)
        used[flows[i].links[k]] += flows[i].weights[k] * solver.rate_of(ids[i]);
    }
    for (int l = 0; l < links; ++l) CHECK(used[l] <= capacity[l] * (1 + 1e-9));
  }
}

// A leaf-spine fabric: hosts 0-3 (0, 1 on leaf 4; 2, 3 on leaf 5), spines 6 and 7;
// each cable is two links, 10 ns each.
astra::RoutingGraph leaf_spine(const std::vector<int32_t>& down) {
  std::vector<int32_t> src, dst;
  auto cable = [&](int a, int b) {
    src.push_back(a), dst.push_back(b);
    src.push_back(b), dst.push_back(a);
  };
  cable(0, 4), cable(1, 4), cable(2, 5), cable(3, 5);
  cable(4, 6), cable(4, 7), cable(5, 6), cable(5, 7);
  astra::RoutingGraph g;
  CHECK(g.build(8, {4, 5, 6, 7}, src, dst, std::vector<double>(src.size(), 10.0), down));
  return g;
}

void test_routing() {
  astra::RoutingGraph g = leaf_spine({});
  CHECK(g.hosts == (std::vector<int32_t>{0, 1, 2, 3}));
  std::vector<int32_t> path;
  CHECK(g.route(0, 1, 0, &path) && path == (std::vector<int32_t>{0, 3}));  // through leaf 4 only
  std::set<int32_t> spines_used;
  for (uint64_t bucket = 0; bucket < 64; ++bucket) {
    CHECK(g.route(0, 2, bucket, &path) && path.size() == 4);
    CHECK(g.link_src[path[0]] == 0 && g.link_dst[path[3]] == 2);
    for (size_t k = 1; k < path.size(); ++k) CHECK(g.link_dst[path[k - 1]] == g.link_src[path[k]]);
    spines_used.insert(g.link_dst[path[1]]);
    std::vector<int32_t> again;
    CHECK(g.route(0, 2, bucket, &again) && again == path);  // a flow keeps its path
  }
  CHECK(spines_used == (std::set<int32_t>{6, 7}));  // ECMP spreads the buckets
  astra::RoutingGraph cut = leaf_spine({8});        // leaf 4 -> spine 6 down
  for (uint64_t bucket = 0; bucket < 16; ++bucket)
    CHECK(cut.route(0, 2, bucket, &path) && cut.link_dst[path[1]] == 7);
  astra::RoutingGraph apart = leaf_spine({8, 10});  // leaf 4 cut off from both spines
  CHECK(!apart.route(0, 2, 0, &path));
  astra::RoutingGraph bad;
  CHECK(!bad.build(2, {}, {0}, {5}, {1.0}, {}));  // a link to no node
  CHECK(astra::flow_hash(1, 2, 3) == astra::flow_hash(1, 2, 3) && astra::flow_hash(1, 2, 3) < (1ULL << 32));
}

// The kernel's API as a model sees it, with a routing that counts its calls.
int route_calls = 0;

long long fake_route(PyObject*, long long src, long long dst, long long key, int* links, long long capacity) {
  ++route_calls;
  long long n = 2 + key % 3;  // a route of 2-4 links: (src, dst, key) coded in them
  for (long long i = 0; i < n && i < capacity; ++i) links[i] = static_cast<int>(src * 100 + dst * 10 + key + i);
  return n;
}

unsigned long long fake_hash(long long src, long long dst, long long tag) { return astra::flow_hash(src, dst, tag); }

void test_routes() {
  AstraKernelApi api{};
  api.version = 2;
  api.flow_hash = fake_hash;
  api.route = fake_route;
  astra::Routes kept(&api, nullptr, 8, true);
  std::vector<int32_t> route, again;
  route_calls = 0;
  for (int tag = 0; tag < 40; ++tag) CHECK(kept.find(1, 2, tag, &route) && route.size() >= 2);
  CHECK(route_calls <= 8);  // once per bucket
  uint64_t bucket = astra::flow_hash(1, 2, 5) % 8;
  CHECK(kept.find(1, 2, 5, &route) && route[0] == static_cast<int32_t>(120 + bucket));
  kept.set(nullptr);  // another routing: asked again
  int before = route_calls;
  CHECK(kept.find(1, 2, 5, &again) && again == route && route_calls == before + 1);
  astra::Routes by_tag(&api, nullptr, 0, true);  // no buckets: by tag, nothing kept
  route_calls = 0;
  CHECK(by_tag.find(3, 4, 7, &route) && by_tag.find(3, 4, 7, &route) && route_calls == 2);
  CHECK(route == (std::vector<int32_t>{347, 348, 349}));
}

// The queue's token table as the kernel keeps it: grown on request, new entries zeroed.
std::vector<AstraToken> token_table;
int token_calls = 0;

AstraToken* fake_tokens(PyObject*, void*, long long count) {
  ++token_calls;
  if (count > static_cast<long long>(token_table.size())) token_table.resize(count, AstraToken{});
  return token_table.data();
}

AstraToken numbered(unsigned char n) {
  AstraToken token{};
  token.opaque[0] = n;
  return token;
}

// A model's deliveries survive the table's growth, come out once, and cost a call only
// when the table grows.
void test_deliveries() {
  AstraKernelApi api{};
  api.version = 2;
  api.tokens = fake_tokens;
  astra::Deliveries deliveries(&api, nullptr, nullptr);
  for (int i = 0; i < 100; ++i) CHECK(deliveries.put(i, numbered(static_cast<unsigned char>(i + 1))));
  CHECK(token_calls <= 8);  // doubling
  for (int i = 99; i >= 0; i -= 3) {
    AstraToken token = deliveries.take(i);
    CHECK(token.opaque[0] == i + 1);
    CHECK(token_table[i].opaque[0] == 0);  // its entry is empty again
  }
  CHECK(deliveries.put(99, numbered(7)) && deliveries.take(99).opaque[0] == 7);
}

// A lone message's store-and-forward pipeline against a packet-by-packet run: packet
// k leaves link j when it has arrived from link j-1 and link j has sent packet k-1.
double packets_one_by_one(const std::vector<double>& ns_per_byte, int64_t size, int64_t payload, int64_t header) {
  int64_t packets = astra::packets_of(size, payload);
  std::vector<double> link_free(ns_per_byte.size(), 0.0);
  double done = 0.0;
  for (int64_t k = 0; k < packets; ++k) {
    double bytes = static_cast<double>(std::min(payload, size - k * payload) + header);
    if (size == 0) bytes = static_cast<double>(header);
    double at = 0.0;
    for (size_t j = 0; j < ns_per_byte.size(); ++j) {
      at = std::max(at, link_free[j]) + bytes * ns_per_byte[j];
      link_free[j] = at;
    }
    done = at;
  }
  return done;
}

void test_pipeline() {
  std::mt19937 rng(4);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<double> speeds;
    for (int j = 1 + static_cast<int>(rng() % 5); j > 0; --j) speeds.push_back(std::vector<double>{0.04, 0.08, 0.32}[rng() % 3]);
    int64_t size = static_cast<int64_t>(rng() % 50000), payload = 4096, header = 82;
    double closed = astra::pipeline_ns(astra::pipeline_terms(speeds), size, payload, header);
    CHECK(close(closed, packets_one_by_one(speeds, size, payload, header)));
  }
}

}  // namespace

int main() {
  test_flat_map();
  test_heap();
  test_maxmin();
  test_routing();
  test_routes();
  test_deliveries();
  test_pipeline();
  std::printf("%d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
