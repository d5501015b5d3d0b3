// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// MaxMin(capacities): the solver alone, for Python (astra_flow.maxmin.MaxMinSolver).
// add_new(links, weights, cap) -> id starts a new flow; add(id), remove(id) and
// free(id) as the solver's; solve() -> [(id, old_rate, new_rate)] in the order the
// rates changed (a new flow placed at once and refilled later is there twice).
struct MaxMin {
  PyObject_HEAD
  maxmin::Solver* solver;
};

static PyTypeObject MaxMinType = {PyVarObject_HEAD_INIT(nullptr, 0)};

static int MaxMin_init(MaxMin* self, PyObject* args, PyObject*) {
  PyObject* capacities;
  if (!PyArg_ParseTuple(args, "O", &capacities)) return -1;
  std::vector<double> cap;
  if (!read_numbers(capacities, "capacities: a sequence of numbers", &cap)) return -1;
  for (double c : cap)
    if (!(c > 0 && c < INFINITY)) {
      PyErr_SetString(PyExc_ValueError, "every link's capacity must be positive and finite");
      return -1;
    }
  delete self->solver;
  self->solver = new maxmin::Solver(static_cast<int>(cap.size()), cap.data());
  return 0;
}

static void MaxMin_dealloc(MaxMin* self) {
  delete self->solver;
  Py_TYPE(self)->tp_free(reinterpret_cast<PyObject*>(self));
}

static bool maxmin_ready(MaxMin* self) {
  if (self->solver != nullptr) return true;
  PyErr_SetString(PyExc_RuntimeError, "MaxMin.__init__ was not called");
  return false;
}

// A flow number the solver knows (and, with ``active``, one whose state fits the call).
static bool maxmin_flow(MaxMin* self, PyObject* arg, int* id) {
  if (!maxmin_ready(self)) return false;
  long long v = PyLong_AsLongLong(arg);
  if (v == -1 && PyErr_Occurred()) return false;
  if (v < 0 || v >= static_cast<long long>(self->solver->flows.size()) || !self->solver->flows[v].live) {
    PyErr_Format(PyExc_ValueError, "no flow %lld", v);
    return false;
  }
  *id = static_cast<int>(v);
  return true;
}

static PyObject* MaxMin_add_new(MaxMin* self, PyObject* args) {
  PyObject *links, *weights;
  double cap = 0.0;
  if (!maxmin_ready(self) || !PyArg_ParseTuple(args, "OO|d", &links, &weights, &cap)) return nullptr;
  std::vector<int> l;
  std::vector<double> w;
  if (!read_numbers(links, "links: a sequence of link ids", &l) ||
      !read_numbers(weights, "weights: a sequence of numbers", &w))
    return nullptr;
  if (l.size() != w.size() || l.empty()) {
    PyErr_SetString(PyExc_ValueError, "a flow needs one weight per link and at least one link");
    return nullptr;
  }
  for (size_t k = 0; k < l.size(); ++k) {
    if (l[k] < 0 || l[k] >= static_cast<int>(self->solver->capacity.size())) {
      PyErr_Format(PyExc_ValueError, "a flow crosses link %d of %zu", l[k], self->solver->capacity.size());
      return nullptr;
    }
    if (!(w[k] > 0 && w[k] < INFINITY)) {
      PyErr_Format(PyExc_ValueError, "a flow's weight on link %d must be positive and finite", l[k]);
      return nullptr;
    }
    for (size_t j = 0; j < k; ++j)
      if (l[j] == l[k]) {
        PyErr_Format(PyExc_ValueError, "a flow crosses link %d twice", l[k]);
        return nullptr;
      }
  }
  if (!(cap >= 0 && cap < INFINITY)) {
    PyErr_SetString(PyExc_ValueError, "a flow's cap must be finite and at least 0 (0: none)");
    return nullptr;
  }
  int id = self->solver->new_flow(static_cast<int>(l.size()), l.data(), w.data(), cap);
  self->solver->add(id);
  return PyLong_FromLong(id);
}

static PyObject* MaxMin_add(MaxMin* self, PyObject* arg) {
  int id;
  if (!maxmin_flow(self, arg, &id)) return nullptr;
  if (self->solver->flows[id].active) return PyErr_Format(PyExc_ValueError, "flow %d is already active", id);
  self->solver->add(id);
  Py_RETURN_NONE;
}

static PyObject* MaxMin_remove(MaxMin* self, PyObject* arg) {
  int id;
  if (!maxmin_flow(self, arg, &id)) return nullptr;
  if (!self->solver->flows[id].active) return PyErr_Format(PyExc_ValueError, "flow %d is not active", id);
  self->solver->remove(id);
  Py_RETURN_NONE;
}

static PyObject* MaxMin_free(MaxMin* self, PyObject* arg) {
  int id;
  if (!maxmin_flow(self, arg, &id)) return nullptr;
  if (self->solver->flows[id].active) return PyErr_Format(PyExc_ValueError, "flow %d is still active", id);
  self->solver->free_flow(id);
  Py_RETURN_NONE;
}

static PyObject* MaxMin_solve(MaxMin* self, PyObject*) {
  if (!maxmin_ready(self)) return nullptr;
  maxmin::Solver& s = *self->solver;
  int n = s.solve();
  PyObject* out = PyList_New(n);
  for (int i = 0; out != nullptr && i < n; ++i) {
    PyObject* item = Py_BuildValue("(idd)", s.out_ids[i], s.out_old[i], s.out_new[i]);
    if (item == nullptr) Py_CLEAR(out);
    else PyList_SET_ITEM(out, i, item);
  }
  return out;
}

static PyObject* MaxMin_held_at(MaxMin* self, PyObject* arg) {
  int id;
  if (!maxmin_flow(self, arg, &id)) return nullptr;
  return PyLong_FromLong(self->solver->held_at(id));
}

static PyObject* MaxMin_get_used(MaxMin* self, void*) {
  if (!maxmin_ready(self)) return nullptr;
  return number_list(self->solver->used);
}

static PyObject* MaxMin_get_peak(MaxMin* self, void*) {
  return maxmin_ready(self) ? number_list(self->solver->peak) : nullptr;
}

static PyObject* MaxMin_get_solved(MaxMin* self, void*) {
  return maxmin_ready(self) ? PyLong_FromLongLong(self->solver->flows_solved) : nullptr;
}

static PyMethodDef MaxMin_methods[] = {
    {"add_new", reinterpret_cast<PyCFunction>(MaxMin_add_new), METH_VARARGS,
     "add_new(links, weights, cap=0.0) -> id: a new flow, started (rate 0 until the next solve)"},
    {"add", reinterpret_cast<PyCFunction>(MaxMin_add), METH_O, "add(id): start a known flow again"},
    {"remove", reinterpret_cast<PyCFunction>(MaxMin_remove), METH_O, "remove(id): stop a flow"},
    {"free", reinterpret_cast<PyCFunction>(MaxMin_free), METH_O, "free(id): forget a stopped flow (its id is reused)"},
    {"held_at", reinterpret_cast<PyCFunction>(MaxMin_held_at), METH_O,
     "held_at(id) -> link: the link whose filling set the flow's rate (-1: its cap, or not solved)"},
    {"solve", reinterpret_cast<PyCFunction>(MaxMin_solve), METH_NOARGS,
     "solve() -> [(id, old_rate, new_rate)]: re-solve after the changes, in the order the rates changed"},
    {nullptr, nullptr, 0, nullptr}};

static PyGetSetDef MaxMin_getset[] = {
    {"used", reinterpret_cast<getter>(MaxMin_get_used), nullptr, "per link: the capacity its flows take", nullptr},
    {"peak_flows", reinterpret_cast<getter>(MaxMin_get_peak), nullptr, "per link: the most flows at once", nullptr},
    {"flows_solved", reinterpret_cast<getter>(MaxMin_get_solved), nullptr, "flows refilled over all solves",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

static void init_maxmin_type() {
  PyTypeObject& t = MaxMinType;
  t.tp_name = "_astra_kernel.MaxMin";
  t.tp_basicsize = sizeof(MaxMin);
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "MaxMin(capacities): weighted max-min fair rates on links of these capacities, re-solved incrementally";
  t.tp_new = PyType_GenericNew;
  t.tp_init = reinterpret_cast<initproc>(MaxMin_init);
  t.tp_dealloc = reinterpret_cast<destructor>(MaxMin_dealloc);
  t.tp_methods = MaxMin_methods;
  t.tp_getset = MaxMin_getset;
}
