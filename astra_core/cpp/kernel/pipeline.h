// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// The lone message's pipeline (astra_pipeline.h) and the ps grid, for Python and for
// compiled models (api->round_ps).

// pipeline_ns(ns_per_byte, size_bytes, payload_bytes, header_bytes): the above for Python
// (astra_core.topology.pipeline), so that the ns3 backend and flow workloads time a lone
// message with this one implementation.
static PyObject* kernel_pipeline_ns(PyObject*, PyObject* args) {
  PyObject* speeds;
  long long size, payload, header;
  if (!PyArg_ParseTuple(args, "OLLL", &speeds, &size, &payload, &header)) return nullptr;
  std::vector<double> ns_per_byte;
  if (!read_numbers(speeds, "ns_per_byte: a sequence of numbers", &ns_per_byte)) return nullptr;
  if (ns_per_byte.empty() || payload <= 0 || header < 0 || size < 0)
    return PyErr_Format(PyExc_ValueError, "pipeline_ns needs a link, payload_bytes > 0 and sizes >= 0");
  return PyFloat_FromDouble(pipeline_ns(pipeline_terms(ns_per_byte), size, payload, header));
}

// Python's round(x, 3): the double nearest the decimal that x rounds to (half to even
// on x's exact value). Where x * 1000 is not within its rounding error of a half, the
// nearest integer to it is that decimal's thousandfold and one division gives the
// double; near a half (rarely) the decimal is worked out as Python does.
static double round_ps(double x) {
  double y = x * 1000.0;
  if (std::fabs(y) < 1e15) {
    double r = std::nearbyint(y);
    if (std::fabs(std::fabs(y - r) - 0.5) > std::fabs(y) * 0x1p-51 + 0x1p-60) return r / 1000.0;
  }
  char* text = PyOS_double_to_string(x, 'f', 3, 0, nullptr);
  if (text == nullptr) {
    PyErr_Clear();
    return x;
  }
  double r = PyOS_string_to_double(text, nullptr, nullptr);
  PyMem_Free(text);
  return r;
}

static PyObject* kernel_round_ps(PyObject*, PyObject* arg) {
  double x = PyFloat_AsDouble(arg);
  if (x == -1.0 && PyErr_Occurred()) return nullptr;
  return PyFloat_FromDouble(round_ps(x));
}

