// astra's kernel API for compiled network models (docs/plugins.md, "A compiled
// network model"). Include after <Python.h>.
//
// A backend whose Python object has
//   * ``events``: the kernel's EventQueue (astra_core.events.EventQueue), and
//   * ``native_send``: a capsule named "astra.native_send" holding an AstraNativeSend
// gets every message of the system layer as a call of ``send(model, src, dst, size,
// tag, token)`` instead of a Python call. The model times the message on the queue
// and, when its last byte has arrived, delivers the token exactly once: ``deliver``
// (now) or ``deliver_after`` (after a delay); a token it cannot deliver it gives to
// ``discard``. Its own steps (a link coming free) go through ``schedule``. The API
// is the capsule "_astra_kernel.C_API" (``astra_core.events.kernel().C_API``),
// which the backend's Python code passes to its model. Functions returning int give
// 0, or -1 with a Python exception set (the run stops with it). Times are ns;
// ``integral`` says a delay is a whole number, so that the clock stays a Python int
// where every delay was one.

#ifndef ASTRA_KERNEL_API_H
#define ASTRA_KERNEL_API_H

#ifdef __cplusplus
extern "C" {
#endif

/* A message's delivery, owned by whoever holds it: deliver or discard it once. A
   zeroed token is empty: discarding it does nothing. */
typedef struct {
  unsigned char opaque[32];
} AstraToken;

/* A model's own step: fn(ctx, arg) at its time; 0, or -1 with an exception set. */
typedef int (*AstraStepFn)(void* ctx, long long arg);

typedef struct {
  int version; /* 1 */
  /* the queue's time (ns); -1 with an exception set when events is not an EventQueue */
  double (*now)(PyObject* events);
  int (*schedule)(PyObject* events, double delay_ns, int integral, AstraStepFn fn, void* ctx, long long arg);
  /* the message is in: the sender's and receiver's callbacks run now */
  int (*deliver)(AstraToken token);
  int (*deliver_after)(PyObject* events, double delay_ns, int integral, AstraToken token);
  void (*discard)(AstraToken token);
} AstraKernelApi;

typedef struct {
  int (*send)(void* model, long long src, long long dst, long long size, long long tag, AstraToken token);
  void* model; /* kept alive by the backend object that holds the capsule */
} AstraNativeSend;

#ifdef __cplusplus
}
#endif

#endif
