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
  if (events == nullptr || !PyObject_TypeCheck(events, &EventQueueType)) {
    PyErr_SetString(PyExc_TypeError, "a compiled model's events must be the kernel's EventQueue");
    return nullptr;
  }
  return reinterpret_cast<EventQueue*>(events);
}

static double api_now(PyObject* events) {
  EventQueue* q = api_queue(events);
  return q == nullptr ? -1.0 : q->now;
}

static int api_schedule(PyObject* events, double delay_ns, int integral, AstraStepFn fn, void* ctx, long long arg) {
  EventQueue* q = api_queue(events);
  if (q == nullptr) return -1;
  if (!(delay_ns >= 0 && delay_ns < INFINITY)) {
    PyErr_Format(PyExc_ValueError, "a compiled model scheduled a delay of %R ns", PyFloat_FromDouble(delay_ns));
    return -1;
  }
  Call c{CALL_C_FN, reinterpret_cast<PyObject*>(reinterpret_cast<void*>(fn)), reinterpret_cast<PyObject*>(ctx), {0}};
  c.v.i = arg;
  push_call(q, q->now + delay_ns, integral && q->now_integral, c);
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

static AstraKernelApi kernel_api = {1, api_now, api_schedule, api_deliver, api_deliver_after, api_discard};

// The kernel's own models through the same interface.
static int analytical_native_send(void* model, long long src, long long dst, long long size, long long tag,
                                  AstraToken token) {
  return analytical_send(reinterpret_cast<AnalyticalLinks*>(model), src, dst, size, tag, call_of(token)) ? 0 : -1;
}

static int congestion_native_send(void* model, long long src, long long dst, long long size, long long tag,
                                  AstraToken token) {
  return congestion_send(reinterpret_cast<CongestionLinks*>(model), src, dst, size, tag, call_of(token)) ? 0 : -1;
}

static int flow_native_send(void* model, long long src, long long dst, long long size, long long tag,
                            AstraToken token) {
  return flow_send(reinterpret_cast<FlowLinks*>(model), src, dst, size, tag, call_of(token)) ? 0 : -1;
}

static PyObject* native_send_capsule(void* model, int (*send)(void*, long long, long long, long long, long long,
                                                              AstraToken)) {
  AstraNativeSend* native = new AstraNativeSend{send, model};
  PyObject* capsule = PyCapsule_New(native, "astra.native_send", [](PyObject* c) {
    delete reinterpret_cast<AstraNativeSend*>(PyCapsule_GetPointer(c, "astra.native_send"));
  });
  if (capsule == nullptr) delete native;
  return capsule;
}

static PyObject* AnalyticalLinks_get_native_send(AnalyticalLinks* self, void*) {
  return native_send_capsule(self, analytical_native_send);
}

static PyObject* CongestionLinks_get_native_send(CongestionLinks* self, void*) {
  return native_send_capsule(self, congestion_native_send);
}

static PyObject* FlowLinks_get_native_send(FlowLinks* self, void*) {
  return native_send_capsule(self, flow_native_send);
}
