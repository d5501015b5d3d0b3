// Part of the simulation kernel's one translation unit: included by kernel.cc before
// its namespace's body (it specializes pybind11's templates); not compiled on its own.
//
// Python objects of classes the kernel does not define, named for the signatures
// pybind11 writes, from which scripts/kernel_stub.py makes the kernel's stub
// (astra_core/_astra_kernel.pyi): mypy then checks what Python passes and reads as
// these classes. Each converts from any object, as py::object does (the kernel checks
// what it uses).

namespace __attribute__((visibility("hidden"))) astra_kernel {

static inline bool any_object(PyObject*) { return true; }

#define ASTRA_PYTHON_CLASS(Name)                                   \
  class Name : public pybind11::object {                           \
   public:                                                         \
    PYBIND11_OBJECT_DEFAULT(Name, pybind11::object, any_object)    \
  };

ASTRA_PYTHON_CLASS(CommTypeObject)    // astra_core.system.comm_types.CommType
ASTRA_PYTHON_CLASS(StreamObject)      // astra_core.system.stream.Stream
ASTRA_PYTHON_CLASS(DataSetObject)     // astra_core.system.stream.DataSet
ASTRA_PYTHON_CLASS(PhaseObject)       // astra_core.system.stream.Phase
ASTRA_PYTHON_CLASS(AlgorithmObject)   // astra_core.system.collectives.base.PhaseAlgorithm
ASTRA_PYTHON_CLASS(PhasePortObject)   // astra_core.system.collectives.base.PhasePort
ASTRA_PYTHON_CLASS(AnyObject)         // typing.Any: whatever the caller hands back to itself
ASTRA_PYTHON_CLASS(Callback)          // callback(arg), its result ignored
ASTRA_PYTHON_CLASS(TimeObject)        // a time or delay in ns: an int or a float
ASTRA_PYTHON_CLASS(OptionalTime)      // a time in ns, or None

#undef ASTRA_PYTHON_CLASS

}  // namespace astra_kernel

namespace pybind11::detail {

#define ASTRA_PYTHON_NAME(Name, python_name)                 \
  template <>                                                \
  struct handle_type_name<astra_kernel::Name> {              \
    static constexpr auto name = const_name(python_name);    \
  };

ASTRA_PYTHON_NAME(CommTypeObject, "astra_core.system.comm_types.CommType")
ASTRA_PYTHON_NAME(StreamObject, "astra_core.system.stream.Stream")
ASTRA_PYTHON_NAME(DataSetObject, "astra_core.system.stream.DataSet")
ASTRA_PYTHON_NAME(PhaseObject, "astra_core.system.stream.Phase")
ASTRA_PYTHON_NAME(AlgorithmObject, "astra_core.system.collectives.base.PhaseAlgorithm")
ASTRA_PYTHON_NAME(PhasePortObject, "astra_core.system.collectives.base.PhasePort")
ASTRA_PYTHON_NAME(AnyObject, "typing.Any")
ASTRA_PYTHON_NAME(Callback, "typing.Callable[[typing.Any], object]")
ASTRA_PYTHON_NAME(TimeObject, "float")
ASTRA_PYTHON_NAME(OptionalTime, "float | None")

#undef ASTRA_PYTHON_NAME

}  // namespace pybind11::detail
