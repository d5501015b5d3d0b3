// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// The kernel's flat containers (FlatMap, SmallVector below), which keep their
// elements in one place.
//
// FlatMap: a hash map in one array (open addressing, linear probing, power-of-two
// capacity, deletion by backward shift), for the per-message tables: no node per entry
// and no pointer to chase. A value's address holds until the next insert.

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
    std::vector<Slot>(16).swap(slots_);
    size_ = 0;
  }

 private:
  struct Slot {
    Key key{};
    Value value{};
    bool used = false;
  };

  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    size_ = 0;
    for (Slot& slot : old)
      if (slot.used) insert(slot.key, slot.value);
  }

  std::vector<Slot> slots_;
  size_t size_;
};

// ---------------------------------------------------------------------------------
// SmallVector: a vector whose first N elements live in it, past N on the heap; for
// the max-min solver's per-flow links and weights, so that a million flows on short
// routes allocate nothing and each flow's data sits in one place. Only what the solver
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
