// The event queue's heap, kept by hand for its hot path: a 4-ary heap in a BigVector,
// where Later()(a, b) says a comes out after b (the kernel's events: by time, then by
// sequence number). In namespace astra.

#ifndef ASTRA_HEAP_H
#define ASTRA_HEAP_H

#include <cstddef>

#include "astra_flat_map.h"

// The heap's operations are the event loop's innermost step: inlined into it.
#if defined(__GNUC__) || defined(__clang__)
#define ASTRA_HEAP_INLINE inline __attribute__((always_inline))
#else
#define ASTRA_HEAP_INLINE inline
#endif

namespace astra {

// The heap is 4-ary (children of i: 4i+1 .. 4i+4): half the levels of a binary heap,
// so an element (an event: 56 bytes) moves half as often.
constexpr size_t kHeapArity = 4;

// The earliest element into ``out``, taken off the heap (sift-down from the root).
template <class T, class Later>
ASTRA_HEAP_INLINE void heap_pop(BigVector<T>& heap, T& out) {
  out = heap.front();
  T last = heap.back();
  heap.pop_back();
  size_t n = heap.size();
  if (n == 0) return;
  size_t i = 0;
  Later later;
  for (;;) {
    size_t first = kHeapArity * i + 1;
    if (first >= n) break;
    size_t best = first, end = first + kHeapArity < n ? first + kHeapArity : n;
    for (size_t c = first + 1; c < end; ++c)
      if (later(heap[best], heap[c])) best = c;
    if (!later(last, heap[best])) break;
    heap[i] = heap[best];
    i = best;
  }
  heap[i] = last;
}

// ``e`` onto the heap (sift-up).
template <class T, class Later>
ASTRA_HEAP_INLINE void heap_push(BigVector<T>& heap, const T& e) {
  heap.push_back(e);
  size_t i = heap.size() - 1;
  Later later;
  while (i > 0) {
    size_t parent = (i - 1) / kHeapArity;
    if (!later(heap[parent], e)) break;
    heap[i] = heap[parent];
    i = parent;
  }
  heap[i] = e;
}

}  // namespace astra

#endif
