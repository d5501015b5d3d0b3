// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// Custom collectives (a Chakra ET per rank, or an MSCCL algorithm; astra_core.system.
// collectives.custom reads them): OpProgram is one rank's operations with their
// dependencies, built once per program; ProgramPhase runs it for one chunk, issuing
// each operation when the ones it depends on are done, in index order: a send is done
// when its message is delivered (upstream's send handler runs at arrival), a receive
// when its message is in, a reduction after the rank's reduction time of its bytes, a
// computation after its duration. The phase ends when every operation is done.

enum ProgramOpKind : uint8_t { OP_SEND = 0, OP_RECV = 1, OP_COMP = 2, OP_REDUCE = 3 };

struct ProgramOp {
  uint8_t kind;
  int64_t peer;  // a position in the communicator (SEND, RECV)
  int64_t size;  // bytes (SEND, RECV, REDUCE)
  int64_t tag;   // added to the phase's tag (SEND, RECV)
  int64_t duration_ns;  // COMP
};

struct OpProgram {
  PyObject_HEAD
  std::vector<ProgramOp>* ops;
  std::vector<int32_t>* deps_count;   // per op: how many ops it waits for
  std::vector<int32_t>* child_start;  // per op + 1: where its children start in `children`
  std::vector<int32_t>* children;     // the ops that wait for it, in index order
};

static PyTypeObject OpProgramType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// OpProgram(ops): ops a sequence of (kind, peer, size, tag, duration_ns, deps), deps a
// sequence of earlier or later op indices (the caller checked there is no cycle).
static int OpProgram_init(OpProgram* self, PyObject* args, PyObject*) {
  PyObject* items;
  if (!PyArg_ParseTuple(args, "O", &items)) return -1;
  PyObject* fast = PySequence_Fast(items, "ops: a sequence of (kind, peer, size, tag, duration_ns, deps)");
  if (fast == nullptr) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  auto ops = std::make_unique<std::vector<ProgramOp>>();
  std::vector<std::vector<int32_t>> deps(n);
  bool ok = true;
  for (Py_ssize_t i = 0; ok && i < n; ++i) {
    PyObject* deps_seq;
    long long v[5];
    ok = PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "LLLLLO", &v[0], &v[1], &v[2], &v[3], &v[4], &deps_seq);
    if (ok && (v[0] < OP_SEND || v[0] > OP_REDUCE)) {
      PyErr_Format(PyExc_ValueError, "operation %zd: kind %lld is not 0..3", i, v[0]);
      ok = false;
    }
    ok = ok && read_numbers(deps_seq, "deps: op indices", &deps[i]);
    for (int32_t d : deps[i])
      if (ok && (d < 0 || d >= n)) {
        PyErr_Format(PyExc_ValueError, "operation %zd depends on operation %d of %zd", i, d, n);
        ok = false;
      }
    if (ok) ops->push_back(ProgramOp{static_cast<uint8_t>(v[0]), v[1], v[2], v[3], v[4]});
  }
  Py_DECREF(fast);
  if (!ok) return -1;
  auto count = std::make_unique<std::vector<int32_t>>(n, 0);
  auto start = std::make_unique<std::vector<int32_t>>(n + 1, 0);
  for (Py_ssize_t i = 0; i < n; ++i) {
    (*count)[i] = static_cast<int32_t>(deps[i].size());
    for (int32_t d : deps[i]) ++(*start)[d + 1];
  }
  for (Py_ssize_t i = 0; i < n; ++i) (*start)[i + 1] += (*start)[i];
  auto children = std::make_unique<std::vector<int32_t>>((*start)[n]);
  std::vector<int32_t> fill(start->begin(), start->end() - 1);
  for (Py_ssize_t i = 0; i < n; ++i)  // children in index order, as the Python executor had them
    for (int32_t d : deps[i]) (*children)[fill[d]++] = static_cast<int32_t>(i);
  delete self->ops;
  delete self->deps_count;
  delete self->child_start;
  delete self->children;
  self->ops = ops.release();
  self->deps_count = count.release();
  self->child_start = start.release();
  self->children = children.release();
  return 0;
}

static void OpProgram_dealloc(OpProgram* self) {
  delete self->ops;
  delete self->deps_count;
  delete self->child_start;
  delete self->children;
  Py_TYPE(self)->tp_free(reinterpret_cast<PyObject*>(self));
}

static Py_ssize_t OpProgram_len(OpProgram* self) {
  return self->ops == nullptr ? 0 : static_cast<Py_ssize_t>(self->ops->size());
}

static PySequenceMethods OpProgram_as_sequence = {reinterpret_cast<lenfunc>(OpProgram_len)};

static void init_op_program_type() {
  PyTypeObject& t = OpProgramType;
  t.tp_name = "_astra_kernel.OpProgram";
  t.tp_basicsize = sizeof(OpProgram);
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc =
      "OpProgram(ops): one rank's custom-collective operations, each (kind, peer, size, tag, duration_ns, deps): "
      "kind 0 send, 1 receive, 2 computation, 3 reduction; peer a position in the communicator; deps op indices.";
  t.tp_new = PyType_GenericNew;
  t.tp_init = reinterpret_cast<initproc>(OpProgram_init);
  t.tp_dealloc = reinterpret_cast<destructor>(OpProgram_dealloc);
  t.tp_as_sequence = &OpProgram_as_sequence;
}

struct ProgramPhase {
  PyObject_HEAD
  PyObject* comm_type;
  PyObject* stream;
  OpProgram* program;  // owned
  PyObject* members;   // owned tuple: the rank at each position
  long long rank, data_size, tag_base;
  long long left;
  std::vector<int32_t>* waiting;  // per op: dependencies not yet done
  std::vector<char>* issued;      // per op: issued and not done
  RankEvents* events;             // owned, bound at start
  MessageMatcher* matcher;        // owned, bound at start
};

static PyTypeObject ProgramPhaseType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// Custom collectives' tags start above NCCL's (2^48): 2^56 + stream id * 2^24 + the op's tag.
static const long long CUSTOM_TAG_BASE = 1LL << 56;

static bool program_member(ProgramPhase* p, int64_t position, int64_t* rank) {
  if (position < 0 || position >= PyTuple_GET_SIZE(p->members)) {
    PyErr_Format(PyExc_IndexError, "custom collective of rank %lld: peer position %lld of %zd", p->rank,
                 static_cast<long long>(position), PyTuple_GET_SIZE(p->members));
    return false;
  }
  long long r = PyLong_AsLongLong(PyTuple_GET_ITEM(p->members, position));
  if (r == -1 && PyErr_Occurred()) return false;
  *rank = r;
  return true;
}

static bool program_issue(ProgramPhase* p, int32_t i) {
  (*p->issued)[i] = 1;
  const ProgramOp& op = (*p->program->ops)[i];
  PyObject* me = reinterpret_cast<PyObject*>(p);
  int64_t peer;
  switch (op.kind) {
    case OP_SEND:
      return program_member(p, op.peer, &peer) &&
             matcher_send(p->matcher, p->rank, peer, op.size, p->tag_base + op.tag, kernel_call(CALL_PROGRAM_DONE, me, i),
                          true, NAN, false);
    case OP_RECV:
      return program_member(p, op.peer, &peer) &&
             matcher_recv(p->matcher, peer, p->rank, op.size, p->tag_base + op.tag, kernel_call(CALL_PROGRAM_DONE, me, i));
    case OP_REDUCE:
      return register_call(p->events, static_cast<double>(reduction_delay_ns(p->events, op.size)), true,
                           kernel_call(CALL_PROGRAM_DONE, me, i));
    default:
      return register_call(p->events, static_cast<double>(op.duration_ns), true, kernel_call(CALL_PROGRAM_DONE, me, i));
  }
}

static bool program_done(ProgramPhase* p, int64_t i) {
  (*p->issued)[i] = 0;
  --p->left;
  const std::vector<int32_t>& start = *p->program->child_start;
  for (int32_t k = start[i]; k < start[i + 1]; ++k) {
    int32_t child = (*p->program->children)[k];
    if (--(*p->waiting)[child] == 0 && !program_issue(p, child)) return false;
  }
  if (p->left == 0) return finish_phase(p->stream);
  return true;
}

static bool program_start(ProgramPhase* p) {
  long long stream_id;
  if (!bind_to_stream(p->stream, &p->events, &p->matcher, &stream_id)) return false;
  p->tag_base = CUSTOM_TAG_BASE + stream_id * (1LL << 24);
  if (p->left == 0) return finish_phase(p->stream);
  for (size_t i = 0; i < p->waiting->size(); ++i)
    if ((*p->waiting)[i] == 0 && !program_issue(p, static_cast<int32_t>(i))) return false;
  return true;
}

static PyObject* ProgramPhase_new(PyTypeObject* type, PyObject*, PyObject*) {
  ProgramPhase* p = reinterpret_cast<ProgramPhase*>(type->tp_alloc(type, 0));
  if (p == nullptr) return nullptr;
  Py_INCREF(Py_None);
  p->stream = Py_None;
  Py_INCREF(Py_None);
  p->comm_type = Py_None;
  p->waiting = new std::vector<int32_t>();
  p->issued = new std::vector<char>();
  return reinterpret_cast<PyObject*>(p);
}

// ProgramPhase(comm_type, rank, data_size, program, members)
static int ProgramPhase_init(ProgramPhase* p, PyObject* args, PyObject* kwds) {
  static const char* names[] = {"comm_type", "rank", "data_size", "program", "members", nullptr};
  PyObject *comm_type, *program, *members;
  long long rank, data_size;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OLLO!O!", const_cast<char**>(names), &comm_type, &rank, &data_size,
                                   &OpProgramType, &program, &PyTuple_Type, &members))
    return -1;
  OpProgram* prog = reinterpret_cast<OpProgram*>(program);
  if (prog->ops == nullptr) {
    PyErr_SetString(PyExc_ValueError, "OpProgram.__init__ was not called");
    return -1;
  }
  *p->waiting = *prog->deps_count;
  p->issued->assign(prog->ops->size(), 0);
  p->left = static_cast<long long>(prog->ops->size());
  p->rank = rank;
  p->data_size = data_size;
  Py_INCREF(comm_type);
  Py_XSETREF(p->comm_type, comm_type);
  Py_INCREF(program);
  Py_XSETREF(p->program, prog);
  Py_INCREF(members);
  Py_XSETREF(p->members, members);
  return 0;
}

static int ProgramPhase_traverse(ProgramPhase* p, visitproc visit, void* arg) {
  Py_VISIT(p->comm_type);
  Py_VISIT(p->stream);
  Py_VISIT(p->events);
  Py_VISIT(p->matcher);
  return 0;
}

static int ProgramPhase_clear(ProgramPhase* p) {
  Py_CLEAR(p->comm_type);
  Py_CLEAR(p->stream);
  Py_CLEAR(p->events);
  Py_CLEAR(p->matcher);
  return 0;
}

static void ProgramPhase_dealloc(ProgramPhase* p) {
  PyObject_GC_UnTrack(p);
  ProgramPhase_clear(p);
  Py_CLEAR(p->program);
  Py_CLEAR(p->members);
  delete p->waiting;
  delete p->issued;
  Py_TYPE(p)->tp_free(reinterpret_cast<PyObject*>(p));
}

static PyObject* ProgramPhase_start(ProgramPhase* p, PyObject*) {
  if (p->program == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "ProgramPhase.__init__ was not called");
    return nullptr;
  }
  if (!program_start(p)) return nullptr;
  Py_RETURN_NONE;
}

// The operations issued and not done, ascending (for reports).
static PyObject* ProgramPhase_pending(ProgramPhase* p, PyObject*) {
  PyObject* out = PyList_New(0);
  for (size_t i = 0; out != nullptr && i < p->issued->size(); ++i) {
    if (!(*p->issued)[i]) continue;
    PyObject* index = PyLong_FromSize_t(i);
    if (index == nullptr || PyList_Append(out, index) < 0) Py_CLEAR(out);
    Py_XDECREF(index);
  }
  return out;
}

static PyMethodDef ProgramPhase_methods[] = {
    {"start", reinterpret_cast<PyCFunction>(ProgramPhase_start), METH_NOARGS,
     "STREAM_INIT: the phase got its slot; the operations that wait for none are issued."},
    {"pending", reinterpret_cast<PyCFunction>(ProgramPhase_pending), METH_NOARGS,
     "pending() -> the indices of the operations issued and not done, ascending"},
    {nullptr, nullptr, 0, nullptr}};

static PyMemberDef ProgramPhase_members[] = {
    {"comm_type", T_OBJECT, offsetof(ProgramPhase, comm_type), READONLY, "the collective (CommType)"},
    {"stream", T_OBJECT, offsetof(ProgramPhase, stream), 0, "the stream this phase belongs to"},
    {"rank", T_LONGLONG, offsetof(ProgramPhase, rank), READONLY, "the rank"},
    {"data_size", T_LONGLONG, offsetof(ProgramPhase, data_size), READONLY, "bytes entering the phase"},
    {"final_data_size", T_LONGLONG, offsetof(ProgramPhase, data_size), READONLY, "bytes leaving it"},
    {"members", T_OBJECT, offsetof(ProgramPhase, members), READONLY, "the rank at each position"},
    {"left", T_LONGLONG, offsetof(ProgramPhase, left), READONLY, "operations not done"},
    {nullptr, 0, 0, 0, nullptr}};

static void init_program_phase_type() {
  PyTypeObject& t = ProgramPhaseType;
  t.tp_name = "_astra_kernel.ProgramPhase";
  t.tp_basicsize = sizeof(ProgramPhase);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE;
  t.tp_doc =
      "ProgramPhase(comm_type, rank, data_size, program, members): one rank's custom collective for one chunk, "
      "run from its OpProgram; members[p] is the rank at position p.";
  t.tp_new = ProgramPhase_new;
  t.tp_init = reinterpret_cast<initproc>(ProgramPhase_init);
  t.tp_dealloc = reinterpret_cast<destructor>(ProgramPhase_dealloc);
  t.tp_traverse = reinterpret_cast<traverseproc>(ProgramPhase_traverse);
  t.tp_clear = reinterpret_cast<inquiry>(ProgramPhase_clear);
  t.tp_methods = ProgramPhase_methods;
  t.tp_members = ProgramPhase_members;
}
