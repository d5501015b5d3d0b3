// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, first; not compiled on its own.

// ---------------------------------------------------------------------------------
// What the kernel's classes bound by pybind11 share.

// The C++ object of ``o``, an instance of the bound class T (or of a Python subclass of
// it) that the caller has checked; nullptr before its __init__ has run. It reads the
// instance's layout (pybind11 2.x: a one-base class keeps its value pointer in the
// instance) rather than casting, which looks the type up and may allocate: the garbage
// collector's traverse, which must not allocate, uses it too.
template <class T>
static inline T* bound_value(PyObject* o) {
  auto* inst = reinterpret_cast<py::detail::instance*>(o);
  if (inst->simple_layout)
    return inst->simple_holder_constructed ? static_cast<T*>(inst->simple_value_holder[0]) : nullptr;
  py::detail::value_and_holder v = inst->get_value_and_holder();
  return v.holder_constructed() ? static_cast<T*>(v.value_ptr()) : nullptr;
}

// ``o`` as the bound class T when it is an instance of ``type`` (T's Python class, or
// a subclass of it), else nullptr.
template <class T>
static inline T* bound_instance(PyObject* o, PyTypeObject* type) {
  return o != nullptr && PyObject_TypeCheck(o, type) ? bound_value<T>(o) : nullptr;
}

// The class option that makes a bound class T seen by Python's garbage collector: T
// has ``int traverse(visitproc, void*) const``, visiting the Python objects it holds,
// and ``void clear()``, dropping those that can form a cycle. An instance whose
// __init__ has not run holds nothing.
template <class T>
static py::custom_type_setup collected() {
  return py::custom_type_setup([](PyHeapTypeObject* heap) {
    PyTypeObject* type = &heap->ht_type;
    type->tp_flags |= Py_TPFLAGS_HAVE_GC;
    type->tp_traverse = [](PyObject* self, visitproc visit, void* arg) -> int {
      Py_VISIT(Py_TYPE(self));  // a heap type is visited by its instances
      const T* object = bound_value<T>(self);
      return object == nullptr ? 0 : object->traverse(visit, arg);
    };
    type->tp_clear = [](PyObject* self) -> int {
      if (T* object = bound_value<T>(self)) object->clear();
      return 0;
    };
  });
}

// Runs f, which may throw pybind11's exceptions, for a caller that reports errors the
// C API's way: true, or false with the Python error set.
template <class F>
static bool python_ok(F&& f) {
  try {
    f();
    return true;
  } catch (py::error_already_set& err) {
    err.restore();
  } catch (const py::builtin_exception& err) {
    err.set_error();
  }
  return false;
}

// The Python object of ``object``, a bound C++ object (borrowed: the two live and die
// together), from ``cache`` or else looked up once in the binding's registry.
template <class T>
static PyObject* python_self(T* object, PyObject*& cache) {
  if (cache == nullptr) cache = py::cast(object, py::return_value_policy::reference).ptr();
  return cache;
}
