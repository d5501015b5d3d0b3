// Part of the simulation kernel's one translation unit: included by kernel.cc inside
// namespace astra_kernel, after the parts before it; not compiled on its own.

// ---------------------------------------------------------------------------------
// The C API of compiled network models (docs/plugins.md, "A compiled network model").
// A backend offers ``native_send``, a capsule "astra.native_send" holding an
// AstraNativeSend; the matcher then hands it each message with a token, which the
// model delivers (exactly once) through the kernel's API, a capsule
// "_astra_kernel.C_API" holding an AstraKernelApi. The kernel's own models use it too.

static_assert(sizeof(Call) <= sizeof(AstraToken), "a token holds a call");

static inline AstraToken token_of(const Call& call) {
  AstraToken token;
  memset(&token, 0, sizeof token);
  memcpy(&token, &call, sizeof call);
  return token;
}

static inline Call call_of(const AstraToken& token) {
  Call call;
  memcpy(&call, &token, sizeof call);
  return call;
}

static EventQueue* api_queue(PyObject* events) {
  EventQueue* q = kernel_queue(events);
  if (q == nullptr) PyErr_SetString(PyExc_TypeError, "a compiled model's events must be the kernel's EventQueue");
  return q;
}

static double api_now(PyObject* events) {
  EventQueue* q = api_queue(events);
  return q == nullptr ? -1.0 : q->now;
}

static int api_schedule(PyObject* events, double delay_ns, int integral, AstraStepFn fn, void* ctx, long long arg) {
  EventQueue* q = api_queue(events);
  if (q == nullptr) return -1;
  if (!(delay_ns >= 0 && delay_ns < INFINITY)) {
    char text[96];
    snprintf(text, sizeof text, "a compiled model scheduled a delay of %g ns", delay_ns);
    PyErr_SetString(PyExc_ValueError, text);
    return -1;
  }
  push_call(q, q->now + delay_ns, integral && q->now_integral, step_call(fn, ctx, arg));
  return 0;
}

static int api_deliver(AstraToken token) {
  Call c = call_of(token);
  bool ok = fire(c);
  release(c);
  return ok ? 0 : -1;
}

static int api_deliver_after(PyObject* events, double delay_ns, int integral, AstraToken token) {
  EventQueue* q = api_queue(events);
  Call c = call_of(token);
  if (q == nullptr || !(delay_ns >= 0 && delay_ns < INFINITY)) {
    if (q != nullptr) PyErr_SetString(PyExc_ValueError, "a compiled model delivered with a bad delay");
    release(c);
    return -1;
  }
  push_call(q, q->now + delay_ns, integral && q->now_integral, c);
  return 0;
}

static void api_discard(AstraToken token) {
  Call c = call_of(token);
  release(c);
}

static bool api_time_ok(EventQueue* q, double time_ns) {
  if (q->now <= time_ns && time_ns < INFINITY) return true;
  char text[128];
  snprintf(text, sizeof text, "a compiled model scheduled at %.17g ns, the clock being at %.17g ns", time_ns, q->now);
  PyErr_SetString(PyExc_ValueError, text);
  return false;
}

static int api_schedule_at(PyObject* events, double time_ns, int integral, AstraStepFn fn, void* ctx, long long arg) {
  EventQueue* q = api_queue(events);
  if (q == nullptr || !api_time_ok(q, time_ns)) return -1;
  push_call(q, time_ns, integral != 0, step_call(fn, ctx, arg));
  return 0;
}

static int api_deliver_at(PyObject* events, double time_ns, int integral, AstraToken token) {
  EventQueue* q = api_queue(events);
  Call c = call_of(token);
  if (q == nullptr || !api_time_ok(q, time_ns)) {
    release(c);
    return -1;
  }
  push_call(q, time_ns, integral != 0, c);
  return 0;
}

static int api_fail(int kind, const char* message) {
  PyErr_SetString(kind == ASTRA_INDEX_ERROR ? PyExc_IndexError : PyExc_ValueError, message);
  return -1;
}

static unsigned long long api_flow_hash(long long src, long long dst, long long tag) {
  return flow_hash(src, dst, tag);
}

static long long api_route(PyObject* route, long long src, long long dst, long long key, int* links,
                           long long capacity) {
  std::vector<int32_t> hops;
  if (ShortestPaths* paths = kernel_routing(route)) {  // the kernel's own routing: no Python call
    if (!paths->route(src, dst, static_cast<uint64_t>(key), &hops)) return -1;
  } else {
    std::vector<int64_t> ids;
    py::object found = py::reinterpret_steal<py::object>(PyObject_CallFunction(route, "LLL", src, dst, key));
    if (!found || !read_numbers(found.ptr(), "a route: link ids", &ids)) return -1;
    for (int64_t id : ids) hops.push_back(id < 0 || id > INT32_MAX ? -1 : static_cast<int32_t>(id));
  }
  long long n = static_cast<long long>(hops.size());
  for (long long i = 0; i < n && i < capacity; ++i) links[i] = hops[i];
  return n;
}

static int api_now_integral(PyObject* events) {
  EventQueue* q = api_queue(events);
  return q == nullptr ? -1 : q->now_integral;
}

static int api_request_step_end(PyObject* events) {
  EventQueue* q = api_queue(events);
  if (q == nullptr) return -1;
  q->step_pending = true;
  return 0;
}

static int api_adopt(PyObject* events, void* model, void (*destroy)(void* model)) {
  EventQueue* q = api_queue(events);
  if (q == nullptr) {
    destroy(model);
    return -1;
  }
  q->owned.adopted.emplace_back(model, destroy);
  return 0;
}

static int api_keep(PyObject* events, PyObject* object) {
  EventQueue* q = api_queue(events);
  if (q == nullptr) return -1;
  q->owned.kept.push_back(py::reinterpret_borrow<py::object>(object));
  return 0;
}

static AstraToken* api_tokens(PyObject* events, void* model, long long count) {
  EventQueue* q = api_queue(events);
  if (q == nullptr) return nullptr;
  auto& tables = q->owned.tokens;
  auto table = std::find_if(tables.begin(), tables.end(), [&](const auto& t) { return t.first == model; });
  if (table == tables.end()) {
    tables.emplace_back(model, BigVector<AstraToken>());
    table = tables.end() - 1;
  }
  BigVector<AstraToken>& entries = table->second;
  if (count > static_cast<long long>(entries.size())) {
    AstraToken empty;
    memset(&empty, 0, sizeof empty);
    entries.resize(std::max<size_t>(count, 2 * entries.size()), empty);
  }
  return entries.data();
}

static AstraKernelApi kernel_api = {
    2,           api_now,         api_schedule,   api_deliver,      api_deliver_after,    api_discard,
    api_schedule_at, api_deliver_at, api_fail,    api_flow_hash,    api_route,            round_ps,
    api_now_integral, api_request_step_end, api_adopt, api_keep,  api_tokens};

static const AstraKernelApi* kernel_c_api() { return &kernel_api; }

// The kernel's own models through the same interface.
static int analytical_native_send(void* model, long long src, long long dst, long long size, long long tag,
                                  AstraToken token) {
  return reinterpret_cast<AnalyticalLinks*>(model)->send(src, dst, size, tag, call_of(token)) ? 0 : -1;
}

// The capsule of a kernel model's send entry (held in the model: valid while it lives,
// as the model pointer inside any such capsule is).
static PyObject* analytical_native_send_capsule(AnalyticalLinks* links) {
  links->native_entry = AstraNativeSend{analytical_native_send, links};
  return PyCapsule_New(&links->native_entry, "astra.native_send", nullptr);
}


// native_send(capsule, src, dst, size_bytes, on_delivered, arg=None, tag=0): a message
// from Python through a compiled model's send, delivered as on_delivered(arg); the
// Python ``send`` of a backend whose model has no Python type of its own.
static PyObject* kernel_native_send(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* bound[7];
  static const char* const names[] = {"native_send", "src", "dst", "size_bytes", "on_delivered", "arg", "tag"};
  if (!bind_args("native_send", names, 7, 5, args, nargs, kwnames, bound)) return nullptr;
  AstraNativeSend* native = reinterpret_cast<AstraNativeSend*>(PyCapsule_GetPointer(bound[0], "astra.native_send"));
  int64_t src, dst, size, tag = 0;
  if (native == nullptr || !read_int64(bound[1], &src) || !read_int64(bound[2], &dst) ||
      !read_int64(bound[3], &size) || (bound[6] != Py_None && !read_int64(bound[6], &tag)))
    return nullptr;
  if (native->send(native->model, src, dst, size, tag, token_of(py_call(bound[4], bound[5]))) < 0) return nullptr;
  Py_RETURN_NONE;
}

// step_call(fn_address, ctx_address, arg=0): a compiled model's step fn(ctx, arg) as a
// Python callable (a KernelCall), e.g. for EventQueue.step_end.
static PyObject* kernel_step_call(PyObject*, PyObject* args) {
  unsigned long long fn, ctx;
  long long arg = 0;
  if (!PyArg_ParseTuple(args, "KK|L", &fn, &ctx, &arg)) return nullptr;
  if (fn == 0) return PyErr_Format(PyExc_ValueError, "step_call: no function");
  return as_callable(step_call(reinterpret_cast<AstraStepFn>(static_cast<uintptr_t>(fn)),
                               reinterpret_cast<void*>(static_cast<uintptr_t>(ctx)), arg));
}
