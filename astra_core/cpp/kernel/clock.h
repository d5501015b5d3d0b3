// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// A kernel step as a Python callable, for clocks and backends written in Python
// (they schedule and deliver through Python calls).

struct KernelCall {
  PyObject_HEAD
  Call call;
};

static PyTypeObject KernelCallType = {PyVarObject_HEAD_INIT(nullptr, 0)};

static PyObject* KernelCall_call(KernelCall* self, PyObject*, PyObject*) {
  if (!fire(self->call)) return nullptr;
  Py_RETURN_NONE;
}

static int KernelCall_traverse(KernelCall* self, visitproc visit, void* arg) {
  VISIT_CALL(self->call);
  return 0;
}

static int KernelCall_clear(KernelCall* self) {
  release(self->call);
  return 0;
}

static void KernelCall_dealloc(KernelCall* self) {
  PyObject_GC_UnTrack(self);
  release(self->call);
  Py_TYPE(self)->tp_free(reinterpret_cast<PyObject*>(self));
}

// A callable that runs ``call`` (whose references it takes).
static PyObject* as_callable(const Call& call) {
  KernelCall* self = PyObject_GC_New(KernelCall, &KernelCallType);
  if (self == nullptr) {
    Call c = call;
    release(c);
    return nullptr;
  }
  self->call = call;
  PyObject_GC_Track(self);
  return reinterpret_cast<PyObject*>(self);
}

static void init_kernel_call_type() {
  PyTypeObject& t = KernelCallType;
  t.tp_name = "_astra_kernel.KernelCall";
  t.tp_basicsize = sizeof(KernelCall);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  t.tp_doc = "One step of the kernel, called by a Python clock or backend (any arguments are ignored).";
  t.tp_call = reinterpret_cast<ternaryfunc>(KernelCall_call);
  t.tp_dealloc = reinterpret_cast<destructor>(KernelCall_dealloc);
  t.tp_traverse = reinterpret_cast<traverseproc>(KernelCall_traverse);
  t.tp_clear = reinterpret_cast<inquiry>(KernelCall_clear);
}

// ---------------------------------------------------------------------------------
// A clock: the kernel's EventQueue (native events), or any Python object with
// ``now`` and ``schedule(delay, callback, arg)`` (a backend that keeps its own time).

struct Clock {
  EventQueue* queue = nullptr;  // borrowed from `object`
  py::object object;

  bool set(PyObject* clock) {
    object = py::reinterpret_borrow<py::object>(clock);
    queue = kernel_queue(clock);
    return true;
  }

  // The time (ns); false with an error set when a Python clock failed.
  bool now(double* t, bool* integral) const {
    if (queue != nullptr) {
      *t = queue->now;
      *integral = queue->now_integral;
      return true;
    }
    py::object value = py::reinterpret_steal<py::object>(PyObject_GetAttrString(object.ptr(), "now"));
    return value && read_number(value.ptr(), t, integral);
  }

  // Runs ``call`` (its references move here) after ``delay`` ns; false with an error set.
  bool schedule(double delay, bool integral, const Call& call) const {
    if (queue != nullptr) {
      push_call(queue, queue->now + delay, integral && queue->now_integral, call);
      return true;
    }
    py::object callable = py::reinterpret_steal<py::object>(as_callable(call));
    py::object number = py::reinterpret_steal<py::object>(callable ? time_object(delay, integral) : nullptr);
    return number && py::reinterpret_steal<py::object>(PyObject_CallMethod(object.ptr(), "schedule", "OOO",
                                                                           number.ptr(), callable.ptr(), Py_None));
  }
};
