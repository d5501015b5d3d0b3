// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// TreePhase: one rank's phase of one chunk of upstream's double-binary-tree all-reduce
// (DoubleBinaryTreeAllReduce.cc; astra_core.system.collectives.double_binary_tree): the
// chunk reduces up one binary tree and is broadcast back down it. The state table is
// upstream's, event for event: STREAM_INIT, PACKET_RECEIVED (a receive it posted is
// in) and GENERAL (a packet bundle of the whole chunk through local memory, reduced
// where the table says) move it on. Every message carries the whole chunk.

enum TreeKind : uint8_t { TREE_LEAF = 0, TREE_INTERMEDIATE = 1, TREE_ROOT = 2 };
enum TreeState : uint8_t {
  TREE_BEGIN = 0,
  TREE_SENDING_TO_PARENT,
  TREE_WAITING_FROM_PARENT,
  TREE_END,
  TREE_WAITING_TWO_CHILDREN,
  TREE_WAITING_ONE_CHILD,
  TREE_SENDING_TO_CHILDREN,
};
enum TreeEvent : uint8_t { TREE_STREAM_INIT = 0, TREE_PACKET_RECEIVED = 1, TREE_GENERAL = 2 };

struct TreePhase : BoundPhase {
  long long rank, data_size;
  long long parent, left, right;  // -1: none
  int kind, state = TREE_BEGIN;
  long long reductions = 0;
  long long tag = 0;

  // Raises ValueError for a kind not 0..2.
  TreePhase(CommTypeObject comm_type_, long long rank_, long long data_size_, int kind_, long long parent_,
            long long left_, long long right_)
      : BoundPhase(std::move(comm_type_)), rank(rank_), data_size(data_size_), parent(parent_), left(left_),
        right(right_), kind(kind_) {
    if (kind < TREE_LEAF || kind > TREE_ROOT)
      throw py::value_error("a tree node's kind is 0 (leaf), 1 (intermediate) or 2 (root), got " +
                            std::to_string(kind));
  }

};

// The chunk between NPU and memory (upstream's PacketBundle; never the fast hop here),
// reduced after if ``reduce``; then GENERAL.
static bool tree_bundle(TreePhase* p, bool reduce) {
  return register_call(p->at.events, static_cast<double>(p->at.events->endpoint_delay_ns), true,
                       kernel_call(reduce ? CALL_TREE_REDUCE : CALL_TREE_GENERAL, p->self,
                                   p->data_size));
}

static bool tree_send(TreePhase* p, long long dst) {
  return matcher_send(p->at.matcher, p->at.events->rank, dst, p->data_size, p->tag, Call{CALL_NONE, nullptr, nullptr, {0}},
                      true, NAN, false);
}

static bool tree_recv(TreePhase* p, long long src) {
  return matcher_recv(p->at.matcher, src, p->at.events->rank, p->data_size, p->tag,
                      kernel_call(CALL_TREE_RECEIVED, p->self, 0));
}

// Sets the state after the step, as the Python table it replaces did (a step only queues
// events, so the order is never seen; it is kept all the same).
static inline bool then_state(TreePhase* p, bool ok, int state) {
  p->state = state;
  return ok;
}

// Upstream's state table; the first row that matches runs.
static bool tree_run(TreePhase* p, int event) {
  const bool leaf = p->kind == TREE_LEAF, inter = p->kind == TREE_INTERMEDIATE, root = p->kind == TREE_ROOT;
  const int state = p->state;
  const bool received = event == TREE_PACKET_RECEIVED;
  if (leaf && state == TREE_BEGIN) return then_state(p, tree_bundle(p, false), TREE_SENDING_TO_PARENT);
  if (leaf && state == TREE_SENDING_TO_PARENT)
    return then_state(p, tree_send(p, p->parent) && tree_recv(p, p->parent), TREE_WAITING_FROM_PARENT);
  if (leaf && state == TREE_WAITING_FROM_PARENT) return then_state(p, tree_bundle(p, false), TREE_END);
  if (leaf && state == TREE_END) return finish_phase(p->stream.ptr());
  if (inter && state == TREE_BEGIN) {
    p->state = TREE_WAITING_TWO_CHILDREN;
    return tree_recv(p, p->left) && tree_recv(p, p->right);
  }
  if (inter && state == TREE_WAITING_TWO_CHILDREN && received)
    return then_state(p, tree_bundle(p, true), TREE_WAITING_ONE_CHILD);
  if (inter && state == TREE_WAITING_ONE_CHILD && received)
    return then_state(p, tree_bundle(p, true), TREE_SENDING_TO_PARENT);
  if (inter && p->reductions < 1 && event == TREE_GENERAL) {
    ++p->reductions;
    return true;
  }
  if (inter && state == TREE_SENDING_TO_PARENT) {
    p->state = TREE_WAITING_FROM_PARENT;
    return tree_send(p, p->parent) && tree_recv(p, p->parent);
  }
  if (inter && state == TREE_WAITING_FROM_PARENT && received)
    return then_state(p, tree_bundle(p, true), TREE_SENDING_TO_CHILDREN);
  if (inter && state == TREE_SENDING_TO_CHILDREN)
    return tree_send(p, p->left) && tree_send(p, p->right) && finish_phase(p->stream.ptr());
  if (root && state == TREE_BEGIN) {
    p->state = TREE_WAITING_ONE_CHILD;
    return tree_recv(p, p->left >= 0 ? p->left : p->right);
  }
  if (root && state == TREE_WAITING_ONE_CHILD) return then_state(p, tree_bundle(p, true), TREE_SENDING_TO_CHILDREN);
  if (root && state == TREE_SENDING_TO_CHILDREN)
    return tree_send(p, p->left >= 0 ? p->left : p->right) && finish_phase(p->stream.ptr());
  return true;
}

static bool tree_received(TreePhase* p) { return tree_run(p, TREE_PACKET_RECEIVED); }

static bool tree_general(TreePhase* p) { return tree_run(p, TREE_GENERAL); }

static bool tree_reduce(TreePhase* p, int64_t size) {
  return register_call(p->at.events, static_cast<double>(reduction_delay_ns(p->at.events, size)), true,
                       kernel_call(CALL_TREE_GENERAL, p->self, 0));
}

static void bind_tree_phase(py::module_& module) {
  py::class_<TreePhase> phase(
      module, "TreePhase", collected<TreePhase>(),
      "TreePhase(comm_type, rank, data_size, kind, parent, left, right): one rank's double-binary-tree phase of "
      "one chunk (kind 0 leaf, 1 intermediate, 2 root; -1 for a missing neighbour), upstream's state table.");
  phase.def(py::init<CommTypeObject, long long, long long, int, long long, long long, long long>(), py::arg("comm_type"),
            py::arg("rank"), py::arg("data_size"), py::arg("kind"), py::arg("parent"), py::arg("left"),
            py::arg("right"));
  def_phase<TreePhase>(
      phase, [](TreePhase* p) { return p->at.bind(p->stream.ptr(), &p->tag) && tree_run(p, TREE_STREAM_INIT); },
      "STREAM_INIT: the phase got its slot.");
  phase.def(
      "received",
      [](TreePhase& p, py::args) {
        if (!tree_received(&p)) throw py::error_already_set();
      },
      "PACKET_RECEIVED: a message this phase posted a receive for arrived (any argument ignored).");
  phase.def(
      "general",
      [](TreePhase& p, py::args) {
        if (!tree_general(&p)) throw py::error_already_set();
      },
      "GENERAL: the chunk is through local memory (any argument ignored).");
  phase.def_readonly("rank", &TreePhase::rank, "the rank");
  phase.def_readonly("data_size", &TreePhase::data_size, "bytes of the chunk");
  phase.def_readonly("final_data_size", &TreePhase::data_size, "bytes leaving the phase (the chunk)");
  phase.def_readonly("parent", &TreePhase::parent, "the parent rank (-1: none)");
  phase.def_readonly("left", &TreePhase::left, "the left child (-1: none)");
  phase.def_readonly("right", &TreePhase::right, "the right child (-1: none)");
  phase.def_readonly("state", &TreePhase::state, "the state in upstream's table (0: begin)");
}
