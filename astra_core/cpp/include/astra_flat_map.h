// astra's flat containers (FlatMap, SmallVector below), which keep their elements in
// one place: the kernel's per-message tables and those of compiled network models
// (docs/kernel.md). Self-contained; everything is in namespace astra.

#ifndef ASTRA_FLAT_MAP_H
#define ASTRA_FLAT_MAP_H

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <utility>
#include <vector>
#if __has_include(<sys/mman.h>)
#include <sys/mman.h>
#endif

namespace astra {
//
// FlatMap: a hash map in one array (open addressing, linear probing, power-of-two
// capacity, deletion by backward shift), for the per-message tables: no node per entry
// and no pointer to chase. A value's address holds until the next insert.

// HugePageAllocator: memory for the kernel's large tables (the event heap, the message
// matcher's entries, the flow model's queue pairs and flows, every FlatMap). A block of
// 2 MiB or more is mapped on its own, aligned to 2 MiB and advised as transparent huge
// pages (Linux madvise(2), MADV_HUGEPAGE), so that random access over hundreds of MiB
// takes a TLB miss per 2 MiB rather than per 4 KiB page; smaller blocks, and every block
// where the system has no such advice, come from malloc.
constexpr size_t kHugePageBytes = size_t{2} << 20;

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}

  T* allocate(size_t n) {
    size_t bytes = n * sizeof(T);
#ifdef MADV_HUGEPAGE
    if (bytes >= kHugePageBytes) {
      size_t rounded = huge_rounded(bytes);
      void* raw = mmap(nullptr, rounded + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (raw == MAP_FAILED) throw std::bad_alloc();
      uintptr_t start = reinterpret_cast<uintptr_t>(raw);
      uintptr_t aligned = (start + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
      if (aligned > start) munmap(raw, aligned - start);  // the slack either side
      if (uintptr_t end = start + rounded + kHugePageBytes; end > aligned + rounded)
        munmap(reinterpret_cast<void*>(aligned + rounded), end - aligned - rounded);
      madvise(reinterpret_cast<void*>(aligned), rounded, MADV_HUGEPAGE);
      return reinterpret_cast<T*>(aligned);
    }
#endif
    void* p = std::malloc(bytes > 0 ? bytes : 1);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }

  void deallocate(T* p, size_t n) {
#ifdef MADV_HUGEPAGE
    if (n * sizeof(T) >= kHugePageBytes) {
      munmap(p, huge_rounded(n * sizeof(T)));
      return;
    }
#endif
    std::free(p);
  }

  static size_t huge_rounded(size_t bytes) { return (bytes + kHugePageBytes - 1) & ~(kHugePageBytes - 1); }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const HugePageAllocator<U>&) const { return false; }
};

// A vector of a large table (HugePageAllocator).
template <class T>
using BigVector = std::vector<T, HugePageAllocator<T>>;

static inline uint64_t mix64(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

template <class Key, class Value, class Hash>
class FlatMap {
 public:
  FlatMap() : slots_(16), size_(0) {}

  size_t size() const { return size_; }

  Value* find(const Key& key) {
    size_t mask = slots_.size() - 1;
    for (size_t i = Hash()(key) & mask; slots_[i].used; i = (i + 1) & mask)
      if (slots_[i].key == key) return &slots_[i].value;
    return nullptr;
  }

  // Adds ``key`` (which must be absent).
  Value& insert(const Key& key, const Value& value) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow();
    size_t mask = slots_.size() - 1;
    size_t i = Hash()(key) & mask;
    while (slots_[i].used) i = (i + 1) & mask;
    slots_[i].key = key;
    slots_[i].value = value;
    slots_[i].used = true;
    ++size_;
    return slots_[i].value;
  }

  void erase(const Key& key) {
    size_t mask = slots_.size() - 1;
    size_t i = Hash()(key) & mask;
    while (!(slots_[i].key == key)) i = (i + 1) & mask;  // present: the caller found it
    for (size_t j = (i + 1) & mask; slots_[j].used; j = (j + 1) & mask) {
      size_t home = Hash()(slots_[j].key) & mask;
      // slot j may move to the hole at i when its home is not in (i, j] cyclically
      bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i].used = false;
    --size_;
  }

  template <class F>
  void for_each(F f) {
    for (Slot& slot : slots_)
      if (slot.used) f(slot.key, slot.value);
  }

  void clear() {
    BigVector<Slot>(16).swap(slots_);
    size_ = 0;
  }

 private:
  struct Slot {
    Key key{};
    Value value{};
    bool used = false;
  };

  void grow() {
    BigVector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    size_ = 0;
    for (Slot& slot : old)
      if (slot.used) insert(slot.key, slot.value);
  }

  BigVector<Slot> slots_;
  size_t size_;
};

// ---------------------------------------------------------------------------------
// SmallVector: a vector whose first N elements live in it, past N on the heap; for
// the max-min solver's per-flow links, so that a million flows on short routes
// allocate nothing and each flow's data sits in one place. Only what the solver
// uses: assign, size, indexing and iteration; movable, not copyable.
template <class T, size_t N>
class SmallVector {
 public:
  size_t size() const { return size_; }
  T* data() { return size_ <= N ? inline_ : heap_.get(); }
  const T* data() const { return size_ <= N ? inline_ : heap_.get(); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }

  void assign(const T* first, const T* last) {
    resize(static_cast<size_t>(last - first));
    std::copy(first, last, data());
  }

  void assign(size_t n, const T& value) {
    resize(n);
    std::fill_n(data(), n, value);
  }

 private:
  void resize(size_t n) {
    if (n > N && n > capacity_) {
      heap_.reset(new T[n]);
      capacity_ = static_cast<uint32_t>(n);
    }
    size_ = static_cast<uint32_t>(n);
  }

  T inline_[N];
  std::unique_ptr<T[]> heap_;  // the elements when there are more than N
  uint32_t size_ = 0, capacity_ = 0;
};

}  // namespace astra

#endif
