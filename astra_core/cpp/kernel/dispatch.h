// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// The dispatch of a call

static bool fire(const Call& c) {
  switch (c.kind) {
    case CALL_PY: {
      PyObject* r = PyObject_CallOneArg(c.obj, c.arg);
      if (r == nullptr) return false;
      Py_DECREF(r);
      return true;
    }
    case CALL_BUCKET:
      return call_bucket(reinterpret_cast<RankEvents*>(c.arg), c.v.d);
    case CALL_ARRIVED:
      return matcher_arrived(reinterpret_cast<MessageMatcher*>(c.arg), static_cast<uint32_t>(c.v.i));
    case CALL_RECEIVED:
      return phase_received(reinterpret_cast<WindowedPhase*>(c.obj));
    case CALL_GENERAL:
      return phase_general(reinterpret_cast<WindowedPhase*>(c.obj));
    case CALL_REDUCE:
      return phase_reduce(reinterpret_cast<WindowedPhase*>(c.obj), c.v.i);
    case CALL_NCCL_SENT:
      return nccl_sent(bound_value<NcclPhase>(c.obj), c.v.i);
    case CALL_NCCL_RECEIVED:
      return nccl_received(bound_value<NcclPhase>(c.obj), c.v.i);
    case CALL_NCCL_FLOOR:
      return nccl_floor(bound_value<NcclPhase>(c.obj));
    case CALL_TREE_RECEIVED:
      return tree_received(bound_value<TreePhase>(c.obj));
    case CALL_TREE_GENERAL:
      return tree_general(bound_value<TreePhase>(c.obj));
    case CALL_TREE_REDUCE:
      return tree_reduce(bound_value<TreePhase>(c.obj), c.v.i);
    case CALL_PROGRAM_DONE:
      return program_done(bound_value<ProgramPhase>(c.obj), c.v.i);
    case CALL_C_FN:
      return reinterpret_cast<AstraStepFn>(reinterpret_cast<void*>(c.obj))(reinterpret_cast<void*>(c.arg), c.v.i) == 0;
    default:
      return true;
  }
}
