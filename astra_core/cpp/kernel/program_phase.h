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

static PyTypeObject* program_type = nullptr;  // set by bind_programs

struct OpProgram {
  std::vector<ProgramOp> ops;
  std::vector<int32_t> deps_count;   // per op: how many ops it waits for
  std::vector<int32_t> child_start;  // per op + 1: where its children start in `children`
  std::vector<int32_t> children;     // the ops that wait for it, in index order

  // ops: a sequence of (kind, peer, size, tag, duration_ns, deps), deps a sequence of
  // earlier or later op indices (the caller checked there is no cycle). Raises
  // ValueError naming the operation (a kind not 0..3, a dependency out of range).
  explicit OpProgram(const py::handle& items) {
    py::sequence seq = py::reinterpret_borrow<py::sequence>(items);
    size_t n = seq.size();
    std::vector<std::vector<int32_t>> deps(n);
    for (size_t i = 0; i < n; ++i) {
      PyObject* deps_seq;
      long long v[5];
      if (!PyArg_ParseTuple(py::object(seq[i]).ptr(), "LLLLLO", &v[0], &v[1], &v[2], &v[3], &v[4], &deps_seq) ||
          !read_numbers(deps_seq, "deps: op indices", &deps[i]))
        throw py::error_already_set();
      if (v[0] < OP_SEND || v[0] > OP_REDUCE)
        throw py::value_error("operation " + std::to_string(i) + ": kind " + std::to_string(v[0]) + " is not 0..3");
      for (int32_t d : deps[i])
        if (d < 0 || static_cast<size_t>(d) >= n)
          throw py::value_error("operation " + std::to_string(i) + " depends on operation " + std::to_string(d) +
                                " of " + std::to_string(n));
      ops.push_back(ProgramOp{static_cast<uint8_t>(v[0]), v[1], v[2], v[3], v[4]});
    }
    deps_count.assign(n, 0);
    child_start.assign(n + 1, 0);
    for (size_t i = 0; i < n; ++i) {
      deps_count[i] = static_cast<int32_t>(deps[i].size());
      for (int32_t d : deps[i]) ++child_start[d + 1];
    }
    for (size_t i = 0; i < n; ++i) child_start[i + 1] += child_start[i];
    children.resize(child_start[n]);
    std::vector<int32_t> fill(child_start.begin(), child_start.end() - 1);
    for (size_t i = 0; i < n; ++i)  // children in index order, as the Python executor had them
      for (int32_t d : deps[i]) children[fill[d]++] = static_cast<int32_t>(i);
  }
};

struct ProgramPhase : BoundPhase {
  py::object program_object;  // the OpProgram
  const OpProgram* program;   // borrowed from program_object
  py::tuple members;          // the rank at each position
  long long rank, data_size, tag_base = 0;
  long long left;
  std::vector<int32_t> waiting;  // per op: dependencies not yet done
  std::vector<char> issued;      // per op: issued and not done

  ProgramPhase(CommTypeObject comm_type_, long long rank_, long long data_size_, const py::object& program_,
               py::tuple members_)
      : BoundPhase(std::move(comm_type_)), program_object(program_), program(program_.cast<const OpProgram*>()),
        members(std::move(members_)), rank(rank_), data_size(data_size_),
        left(static_cast<long long>(program->ops.size())), waiting(program->deps_count),
        issued(program->ops.size(), 0) {}


  py::list pending() const {
    py::list out;
    for (size_t i = 0; i < issued.size(); ++i)
      if (issued[i]) out.append(i);
    return out;
  }
};

// Custom collectives' tags start above NCCL's (2^48): 2^56 + stream id * 2^24 + the op's tag.
static const long long CUSTOM_TAG_BASE = 1LL << 56;

static bool program_member(ProgramPhase* p, int64_t position, int64_t* rank) {
  if (position < 0 || position >= PyTuple_GET_SIZE(p->members.ptr())) {
    PyErr_Format(PyExc_IndexError, "custom collective of rank %lld: peer position %lld of %zd", p->rank,
                 static_cast<long long>(position), PyTuple_GET_SIZE(p->members.ptr()));
    return false;
  }
  long long r = PyLong_AsLongLong(PyTuple_GET_ITEM(p->members.ptr(), position));
  if (r == -1 && PyErr_Occurred()) return false;
  *rank = r;
  return true;
}

// Issues operation i of the phase.
static bool program_issue(ProgramPhase* p, int32_t i) {
  p->issued[i] = 1;
  const ProgramOp& op = p->program->ops[i];
  int64_t peer;
  switch (op.kind) {
    case OP_SEND:
      return program_member(p, op.peer, &peer) &&
             matcher_send(p->at.matcher, p->rank, peer, op.size, p->tag_base + op.tag,
                          kernel_call(CALL_PROGRAM_DONE, p->self, i), true, NAN, false);
    case OP_RECV:
      return program_member(p, op.peer, &peer) &&
             matcher_recv(p->at.matcher, peer, p->rank, op.size, p->tag_base + op.tag,
                          kernel_call(CALL_PROGRAM_DONE, p->self, i));
    case OP_REDUCE:
      return register_call(p->at.events, static_cast<double>(reduction_delay_ns(p->at.events, op.size)), true,
                           kernel_call(CALL_PROGRAM_DONE, p->self, i));
    default:
      return register_call(p->at.events, static_cast<double>(op.duration_ns), true,
                           kernel_call(CALL_PROGRAM_DONE, p->self, i));
  }
}

// Operation i of the phase is done.
static bool program_done(ProgramPhase* p, int64_t i) {
  p->issued[i] = 0;
  --p->left;
  const std::vector<int32_t>& start = p->program->child_start;
  for (int32_t k = start[i]; k < start[i + 1]; ++k) {
    int32_t child = p->program->children[k];
    if (--p->waiting[child] == 0 && !program_issue(p, child)) return false;
  }
  if (p->left == 0) return finish_phase(p->stream.ptr());
  return true;
}

static bool program_start(ProgramPhase* p) {
  long long stream_id;
  if (!p->at.bind(p->stream.ptr(), &stream_id)) return false;
  p->tag_base = CUSTOM_TAG_BASE + stream_id * (1LL << 24);
  if (p->left == 0) return finish_phase(p->stream.ptr());
  for (size_t i = 0; i < p->waiting.size(); ++i)
    if (p->waiting[i] == 0 && !program_issue(p, static_cast<int32_t>(i))) return false;
  return true;
}

static void bind_programs(py::module_& module) {
  py::class_<OpProgram> program(
      module, "OpProgram",
      "OpProgram(ops): one rank's custom-collective operations, each (kind, peer, size, tag, duration_ns, deps): "
      "kind 0 send, 1 receive, 2 computation, 3 reduction; peer a position in the communicator; deps op indices.");
  program.def(py::init<py::handle>(), py::arg("ops"));
  program.def("__len__", [](const OpProgram& self) { return self.ops.size(); });
  program_type = reinterpret_cast<PyTypeObject*>(program.ptr());

  py::class_<ProgramPhase> phase(
      module, "ProgramPhase", collected<ProgramPhase>(),
      "ProgramPhase(comm_type, rank, data_size, program, members): one rank's custom collective for one chunk, "
      "run from its OpProgram; members[p] is the rank at position p.");
  phase.def(py::init([](CommTypeObject comm_type, long long rank, long long data_size, const py::object& program,
                        py::tuple members) {
              if (Py_TYPE(program.ptr()) != program_type) throw py::type_error("ProgramPhase: program must be an OpProgram");
              return ProgramPhase(std::move(comm_type), rank, data_size, program, std::move(members));
            }),
            py::arg("comm_type"), py::arg("rank"), py::arg("data_size"), py::arg("program"), py::arg("members"));
  def_phase<ProgramPhase>(phase, program_start,
                          "STREAM_INIT: the phase got its slot; the operations that wait for none are issued.");
  phase.def("pending", &ProgramPhase::pending, "the indices of the operations issued and not done, ascending");
  phase.def_readonly("rank", &ProgramPhase::rank, "the rank");
  phase.def_readonly("data_size", &ProgramPhase::data_size, "bytes entering the phase");
  phase.def_readonly("final_data_size", &ProgramPhase::data_size, "bytes leaving it");
  phase.def_readonly("members", &ProgramPhase::members, "the rank at each position");
  phase.def_readonly("left", &ProgramPhase::left, "operations not done");
}
