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

struct TreePhase {
  PyObject_HEAD
  PyObject* comm_type;
  PyObject* stream;
  long long rank, data_size;
  long long parent, left, right;  // -1: none
  int kind, state;
  long long reductions;
  RankEvents* events;       // owned, bound at start
  MessageMatcher* matcher;  // owned, bound at start
  long long tag;
};

static PyTypeObject TreePhaseType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// The chunk between NPU and memory (upstream's PacketBundle; never the fast hop here),
// reduced after if ``reduce``; then GENERAL.
static bool tree_bundle(TreePhase* p, bool reduce) {
  return register_call(p->events, static_cast<double>(p->events->endpoint_delay_ns), true,
                       kernel_call(reduce ? CALL_TREE_REDUCE : CALL_TREE_GENERAL, reinterpret_cast<PyObject*>(p),
                                   p->data_size));
}

static bool tree_send(TreePhase* p, long long dst) {
  return matcher_send(p->matcher, p->events->rank, dst, p->data_size, p->tag, Call{CALL_NONE, nullptr, nullptr, {0}},
                      true, NAN, false);
}

static bool tree_recv(TreePhase* p, long long src) {
  return matcher_recv(p->matcher, src, p->events->rank, p->data_size, p->tag,
                      kernel_call(CALL_TREE_RECEIVED, reinterpret_cast<PyObject*>(p), 0));
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
  if (leaf && state == TREE_END) return finish_phase(p->stream);
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
    return tree_send(p, p->left) && tree_send(p, p->right) && finish_phase(p->stream);
  if (root && state == TREE_BEGIN) {
    p->state = TREE_WAITING_ONE_CHILD;
    return tree_recv(p, p->left >= 0 ? p->left : p->right);
  }
  if (root && state == TREE_WAITING_ONE_CHILD) return then_state(p, tree_bundle(p, true), TREE_SENDING_TO_CHILDREN);
  if (root && state == TREE_SENDING_TO_CHILDREN)
    return tree_send(p, p->left >= 0 ? p->left : p->right) && finish_phase(p->stream);
  return true;
}

static bool tree_received(TreePhase* p) { return tree_run(p, TREE_PACKET_RECEIVED); }

static bool tree_general(TreePhase* p) { return tree_run(p, TREE_GENERAL); }

static bool tree_reduce(TreePhase* p, int64_t size) {
  return register_call(p->events, static_cast<double>(reduction_delay_ns(p->events, size)), true,
                       kernel_call(CALL_TREE_GENERAL, reinterpret_cast<PyObject*>(p), 0));
}

static PyObject* TreePhase_new(PyTypeObject* type, PyObject*, PyObject*) {
  TreePhase* p = reinterpret_cast<TreePhase*>(type->tp_alloc(type, 0));
  if (p == nullptr) return nullptr;
  Py_INCREF(Py_None);
  p->stream = Py_None;
  Py_INCREF(Py_None);
  p->comm_type = Py_None;
  p->parent = p->left = p->right = -1;
  return reinterpret_cast<PyObject*>(p);
}

// TreePhase(comm_type, rank, data_size, kind, parent, left, right)
static int TreePhase_init(TreePhase* p, PyObject* args, PyObject* kwds) {
  static const char* names[] = {"comm_type", "rank", "data_size", "kind", "parent", "left", "right", nullptr};
  PyObject* comm_type;
  long long rank, data_size, parent, left, right;
  int kind;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OLLiLLL", const_cast<char**>(names), &comm_type, &rank, &data_size,
                                   &kind, &parent, &left, &right))
    return -1;
  if (kind < TREE_LEAF || kind > TREE_ROOT) {
    PyErr_Format(PyExc_ValueError, "a tree node's kind is 0 (leaf), 1 (intermediate) or 2 (root), got %d", kind);
    return -1;
  }
  Py_INCREF(comm_type);
  Py_XSETREF(p->comm_type, comm_type);
  p->rank = rank;
  p->data_size = data_size;
  p->kind = kind;
  p->parent = parent;
  p->left = left;
  p->right = right;
  p->state = TREE_BEGIN;
  p->reductions = 0;
  return 0;
}

static int TreePhase_traverse(TreePhase* p, visitproc visit, void* arg) {
  Py_VISIT(p->comm_type);
  Py_VISIT(p->stream);
  Py_VISIT(p->events);
  Py_VISIT(p->matcher);
  return 0;
}

static int TreePhase_clear(TreePhase* p) {
  Py_CLEAR(p->comm_type);
  Py_CLEAR(p->stream);
  Py_CLEAR(p->events);
  Py_CLEAR(p->matcher);
  return 0;
}

static void TreePhase_dealloc(TreePhase* p) {
  PyObject_GC_UnTrack(p);
  TreePhase_clear(p);
  Py_TYPE(p)->tp_free(reinterpret_cast<PyObject*>(p));
}

static PyObject* TreePhase_start(TreePhase* p, PyObject*) {
  if (!bind_to_stream(p->stream, &p->events, &p->matcher, &p->tag) || !tree_run(p, TREE_STREAM_INIT)) return nullptr;
  Py_RETURN_NONE;
}

static PyObject* TreePhase_received(TreePhase* p, PyObject* const*, Py_ssize_t) {
  if (!tree_received(p)) return nullptr;
  Py_RETURN_NONE;
}

static PyObject* TreePhase_general(TreePhase* p, PyObject* const*, Py_ssize_t) {
  if (!tree_general(p)) return nullptr;
  Py_RETURN_NONE;
}

static PyMethodDef TreePhase_methods[] = {
    {"start", reinterpret_cast<PyCFunction>(TreePhase_start), METH_NOARGS, "STREAM_INIT: the phase got its slot."},
    {"received", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(TreePhase_received)), METH_FASTCALL,
     "PACKET_RECEIVED: a message this phase posted a receive for arrived (any argument ignored)."},
    {"general", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(TreePhase_general)), METH_FASTCALL,
     "GENERAL: the chunk is through local memory (any argument ignored)."},
    {nullptr, nullptr, 0, nullptr}};

static PyMemberDef TreePhase_members[] = {
    {"comm_type", T_OBJECT, offsetof(TreePhase, comm_type), READONLY, "the collective (CommType)"},
    {"stream", T_OBJECT, offsetof(TreePhase, stream), 0, "the stream this phase belongs to"},
    {"rank", T_LONGLONG, offsetof(TreePhase, rank), READONLY, "the rank"},
    {"data_size", T_LONGLONG, offsetof(TreePhase, data_size), READONLY, "bytes of the chunk"},
    {"final_data_size", T_LONGLONG, offsetof(TreePhase, data_size), READONLY, "bytes leaving the phase (the chunk)"},
    {"parent", T_LONGLONG, offsetof(TreePhase, parent), READONLY, "the parent rank (-1: none)"},
    {"left", T_LONGLONG, offsetof(TreePhase, left), READONLY, "the left child (-1: none)"},
    {"right", T_LONGLONG, offsetof(TreePhase, right), READONLY, "the right child (-1: none)"},
    {"state", T_INT, offsetof(TreePhase, state), READONLY, "the state in upstream's table (0: begin)"},
    {nullptr, 0, 0, 0, nullptr}};

static void init_tree_phase_type() {
  PyTypeObject& t = TreePhaseType;
  t.tp_name = "_astra_kernel.TreePhase";
  t.tp_basicsize = sizeof(TreePhase);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE;
  t.tp_doc =
      "TreePhase(comm_type, rank, data_size, kind, parent, left, right): one rank's double-binary-tree phase of "
      "one chunk (kind 0 leaf, 1 intermediate, 2 root; -1 for a missing neighbour), upstream's state table.";
  t.tp_new = TreePhase_new;
  t.tp_init = reinterpret_cast<initproc>(TreePhase_init);
  t.tp_dealloc = reinterpret_cast<destructor>(TreePhase_dealloc);
  t.tp_traverse = reinterpret_cast<traverseproc>(TreePhase_traverse);
  t.tp_clear = reinterpret_cast<inquiry>(TreePhase_clear);
  t.tp_methods = TreePhase_methods;
  t.tp_members = TreePhase_members;
}
