// astra's kernel API for compiled network models (docs/plugins.md, "A compiled
// network model"). Needs no other header: a model written against it uses no
// Python C API (PyObject below is an opaque handle).
//
// A backend whose Python object has
//   * ``events``: the kernel's EventQueue (astra_core.events.EventQueue), and
//   * ``native_send``: a capsule named "astra.native_send" holding an AstraNativeSend
// gets every message of the system layer as a call of ``send(model, src, dst, size,
// tag, token)`` instead of a Python call. The model times the message on the queue
// and, when its last byte has arrived, delivers the token exactly once: ``deliver``
// (now), ``deliver_after`` (after a delay) or ``deliver_at`` (at a time); a token it
// cannot deliver it gives to ``discard``. Its own steps (a link coming free) go
// through ``schedule`` or ``schedule_at``. The API is the capsule "_astra_kernel.C_API"
// (``astra_core.events.kernel().C_API``; its address: ``kernel_api_address()``),
// which the backend's Python code passes to its model. Functions returning int give
// 0, or -1 with a Python exception set (the run stops with it); a model raises one
// with ``fail``. Times are ns; ``integral`` says a delay or time is a whole number, so
// that the clock stays a Python int where every delay was one.

#ifndef ASTRA_KERNEL_API_H
#define ASTRA_KERNEL_API_H

#ifdef __cplusplus
extern "C" {
#endif

/* CPython's object type, opaque here (the same declaration as <Python.h>'s). */
struct _object;
typedef struct _object PyObject;

/* A message's delivery, owned by whoever holds it: deliver or discard it once. A
   zeroed token is empty: discarding it does nothing. */
typedef struct {
  unsigned char opaque[32];
} AstraToken;

/* A model's own step: fn(ctx, arg) at its time; 0, or -1 with an exception set. */
typedef int (*AstraStepFn)(void* ctx, long long arg);

/* The Python exception ``fail`` raises. */
enum { ASTRA_VALUE_ERROR = 0, ASTRA_INDEX_ERROR = 1 };

typedef struct {
  int version; /* 2: version 1's members, then those marked (2) */
  /* the queue's time (ns); -1 with an exception set when events is not an EventQueue */
  double (*now)(PyObject* events);
  int (*schedule)(PyObject* events, double delay_ns, int integral, AstraStepFn fn, void* ctx, long long arg);
  /* the message is in: the sender's and receiver's callbacks run now */
  int (*deliver)(AstraToken token);
  int (*deliver_after)(PyObject* events, double delay_ns, int integral, AstraToken token);
  void (*discard)(AstraToken token);
  /* (2) at time_ns (>= now; integral: a whole number), as schedule and deliver_after */
  int (*schedule_at)(PyObject* events, double time_ns, int integral, AstraStepFn fn, void* ctx, long long arg);
  int (*deliver_at)(PyObject* events, double time_ns, int integral, AstraToken token);
  /* (2) sets a Python exception (kind: ASTRA_VALUE_ERROR or ASTRA_INDEX_ERROR); returns -1 */
  int (*fail)(int kind, const char* message);
  /* (2) the deterministic 32-bit hash of a flow (astra_core.events.kernel().flow_hash) */
  unsigned long long (*flow_hash)(long long src, long long dst, long long tag);
  /* (2) the route of (src, dst, key) from a routing ``route``: the kernel's ShortestPaths
     (key: a flow bucket) or a Python callable route(src, dst, key) -> link ids. Writes
     up to ``capacity`` link ids to ``links`` and returns how many the route has (call
     again with room for them all when that is more), or -1 with an exception set. */
  long long (*route)(PyObject* route, long long src, long long dst, long long key, int* links, long long capacity);
  /* (2) t rounded to whole ps as Python's round(t, 3): a grid on which instants that
     exact arithmetic makes equal stay equal */
  double (*round_ps)(double t_ns);
  /* (2) whether the queue's time is a whole number: 1 or 0, or -1 with an exception set */
  int (*now_integral)(PyObject* events);
  /* (2) the queue's step_end (a model's end-of-instant work, such as a re-solve) runs
     before the clock next moves */
  int (*request_step_end)(PyObject* events);
  /* (2) The queue owns the model from now: destroy(model) runs when the queue is cleared
     or freed (after its events and held deliveries are released, so that none of them
     outlives the model). On error the model is destroyed at once. */
  int (*adopt)(PyObject* events, void* model, void (*destroy)(void* model));
  /* (2) the queue holds a reference to ``object`` (a routing the model calls) as long
     as it lives */
  int (*keep)(PyObject* events, PyObject* object);
  /* (2) the model's table of the deliveries it waits to make, kept by the queue: at
     least ``count`` tokens (new ones zeroed: empty), which the model reads and writes
     by its own indices, emptying an entry when it takes its token out. The garbage
     collector sees them through the queue, which discards those left when it is
     cleared. The table moves when it grows: use the address of the last call. NULL
     with an exception set when events is not an EventQueue. */
  AstraToken* (*tokens)(PyObject* events, void* model, long long count);
} AstraKernelApi;

typedef struct {
  int (*send)(void* model, long long src, long long dst, long long size, long long tag, AstraToken token);
  void* model; /* kept alive by the backend object that holds the capsule */
} AstraNativeSend;

#ifdef __cplusplus
}
#endif

#endif
