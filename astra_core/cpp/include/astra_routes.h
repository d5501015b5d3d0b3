// A compiled network model's routes, from the kernel's routing through its API
// (api->route: the kernel's ShortestPaths or a Python callable): route(src, dst, tag)
// -> link ids, or, with route_buckets > 0, route(src, dst, flow_hash(src, dst, tag) %
// route_buckets), which may be kept per bucket. Shared by the kernel (RouteKey) and
// the models of the analytical and flow distributions. In namespace astra.

#ifndef ASTRA_ROUTES_H
#define ASTRA_ROUTES_H

#include <cstdint>
#include <vector>

#include "astra_flat_map.h"
#include "astra_kernel_api.h"

namespace astra {

// A route's key: (src, dst, flow bucket), or (src, dst, tag) for a model's own tables.
struct RouteKey {
  int64_t src, dst;
  uint64_t bucket;
  bool operator==(const RouteKey& o) const { return src == o.src && dst == o.dst && bucket == o.bucket; }
};

struct RouteKeyHash {
  size_t operator()(const RouteKey& k) const {
    return static_cast<size_t>(mix64(static_cast<uint64_t>(k.src) * 0x9E3779B97F4A7C15ULL ^
                                     mix64(static_cast<uint64_t>(k.dst) ^ (k.bucket << 40))));
  }
};

class Routes {
 public:
  // ``route`` (kept alive by the caller) over ``buckets`` flow buckets (0: by tag);
  // with ``keep``, each bucket's route is asked for once.
  Routes(const AstraKernelApi* api, PyObject* route, long long buckets, bool keep)
      : api_(api), route_(route), buckets_(buckets), keep_(keep && buckets > 0), hops_(64) {}

  // Another routing from now on (what was kept is dropped).
  void set(PyObject* route) {
    route_ = route;
    kept_.clear();
    routes_.clear();
  }

  // The route of (src, dst, tag) into ``out`` (a container of int32_t with
  // ``assign(first, last)``: std::vector, SmallVector); false with a Python exception set.
  template <class Links>
  bool find(int64_t src, int64_t dst, int64_t tag, Links* out) {
    RouteKey key{src, dst, 0};
    long long third = tag;
    if (buckets_ > 0) {
      key.bucket = api_->flow_hash(src, dst, tag) % static_cast<uint64_t>(buckets_);
      third = static_cast<long long>(key.bucket);
      if (int32_t* found = keep_ ? kept_.find(key) : nullptr) {
        const std::vector<int32_t>& route = routes_[*found];
        out->assign(route.data(), route.data() + route.size());
        return true;
      }
    }
    long long n = api_->route(route_, src, dst, third, hops_.data(), static_cast<long long>(hops_.size()));
    if (n > static_cast<long long>(hops_.size())) {
      hops_.resize(n);
      n = api_->route(route_, src, dst, third, hops_.data(), n);
    }
    if (n < 0) return false;
    out->assign(hops_.data(), hops_.data() + n);
    if (keep_) {
      kept_.insert(key, static_cast<int32_t>(routes_.size()));
      routes_.emplace_back(hops_.data(), hops_.data() + n);
    }
    return true;
  }

 private:
  const AstraKernelApi* api_;
  PyObject* route_;
  long long buckets_;
  bool keep_;
  FlatMap<RouteKey, int32_t, RouteKeyHash> kept_;  // -> routes_ index
  std::vector<std::vector<int32_t>> routes_;
  std::vector<int> hops_;
};

}  // namespace astra

#endif
