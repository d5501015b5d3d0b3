// The shared max-min solver (astra_maxmin.h) for Python, as extern "C" functions of
// integers, doubles and addresses (astra_flow.maxmin.MaxMinSolver binds them with
// astra.plugin.load, and checks every argument first): a solver is a handle.

#include <cstdint>
#include <memory>

#include "astra_maxmin.h"

namespace astra_flow_maxmin {

using Solver = astra::maxmin::Solver;

static Solver* solver_of(long long handle) { return reinterpret_cast<Solver*>(static_cast<intptr_t>(handle)); }

template <class T>
static T* array_at(long long address) {
  return reinterpret_cast<T*>(static_cast<intptr_t>(address));
}

}  // namespace astra_flow_maxmin

// The functions below keep to their names: cppyy's JIT compiles every library into one
// global namespace.
extern "C" {

// A solver of ``n`` links of the capacities at ``capacities`` (doubles, > 0).
long long astra_maxmin_new(long long n, long long capacities) {
  using namespace astra_flow_maxmin;
  auto solver = std::make_unique<Solver>(static_cast<int>(n), array_at<const double>(capacities));
  return static_cast<long long>(reinterpret_cast<intptr_t>(solver.release()));
}

void astra_maxmin_free(long long handle) { std::unique_ptr<astra::maxmin::Solver> gone(astra_flow_maxmin::solver_of(handle)); }

// A new flow over ``n`` links (int32 ids, double weights at the addresses), capped at
// ``cap`` (0: none), started: its number.
long long astra_maxmin_add_new(long long handle, long long n, long long links, long long weights, double cap) {
  using namespace astra_flow_maxmin;
  Solver* s = solver_of(handle);
  int id = s->new_flow(static_cast<int>(n), array_at<const int>(links), array_at<const double>(weights), cap);
  s->add(id);
  return id;
}

void astra_maxmin_add(long long handle, long long id) { astra_flow_maxmin::solver_of(handle)->add(static_cast<int>(id)); }

void astra_maxmin_remove(long long handle, long long id) {
  astra_flow_maxmin::solver_of(handle)->remove(static_cast<int>(id));
}

void astra_maxmin_release(long long handle, long long id) {
  astra_flow_maxmin::solver_of(handle)->free_flow(static_cast<int>(id));
}

// Re-solves after the changes: how many rate changes (astra_maxmin_changes gives them).
long long astra_maxmin_solve(long long handle) { return astra_flow_maxmin::solver_of(handle)->solve(); }

// The last solve's rate changes, in order: flow numbers (int64), old and new rates.
void astra_maxmin_changes(long long handle, long long ids, long long old_rates, long long new_rates) {
  using namespace astra_flow_maxmin;
  Solver* s = solver_of(handle);
  for (size_t i = 0; i < s->out_ids.size(); ++i) {
    array_at<int64_t>(ids)[i] = s->out_ids[i];
    array_at<double>(old_rates)[i] = s->out_old[i];
    array_at<double>(new_rates)[i] = s->out_new[i];
  }
}

long long astra_maxmin_held_at(long long handle, long long id) {
  return astra_flow_maxmin::solver_of(handle)->held_at(static_cast<int>(id));
}

long long astra_maxmin_flows_solved(long long handle) { return astra_flow_maxmin::solver_of(handle)->flows_solved; }

// Per link, into the array at ``out``: 0, the capacity its flows take (doubles); 1, the
// most flows at once (int64s).
void astra_maxmin_link_counter(long long handle, int which, long long out) {
  using namespace astra_flow_maxmin;
  Solver* s = solver_of(handle);
  for (size_t l = 0; l < s->capacity.size(); ++l) {
    if (which == 0) array_at<double>(out)[l] = s->used[l];
    else array_at<int64_t>(out)[l] = s->peak[l];
  }
}

}  // extern "C"
