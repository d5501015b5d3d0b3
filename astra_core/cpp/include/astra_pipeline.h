// A lone message's store-and-forward pipeline: shared by the kernel (its Python
// function pipeline_ns, astra_core.topology.pipeline) and the flow model
// (backends/flow/astra_flow/cpp/flow.cc). Self-contained; in namespace astra.

#ifndef ASTRA_PIPELINE_H
#define ASTRA_PIPELINE_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace astra {

// A lone message's store-and-forward pipeline over a route (astra_core/topology/
// pipeline.py gives the closed form): per link j, (P(j), max t up to j, t_j + ... +
// t_last) in ns per byte.
struct PipelineTerm {
  double prefix, slowest, suffix;
};

inline std::vector<PipelineTerm> pipeline_terms(const std::vector<double>& ns_per_byte) {
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

inline int64_t packets_of(int64_t size, int64_t payload) {
  int64_t packets = size > 0 ? (size + payload - 1) / payload : 0;
  return packets > 1 ? packets : 1;
}

// The transmission part (ns, latencies excluded) of a lone message of ``size`` payload
// bytes in packets of ``payload`` + ``header`` bytes.
inline double pipeline_ns(const std::vector<PipelineTerm>& terms, int64_t size, int64_t payload, int64_t header) {
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

}  // namespace astra

#endif
