/*
 * binding.h - the crs extension module's types and the helpers its files
 * share: error mapping, GIL-free interruptible waits, and the lifetime
 * rules that keep Python views away from ring space that was handed back.
 *
 * Lifetimes. A message object refers to its Subscriber (strongly), so a
 * subscription outlives every message and every buffer taken from one.
 * Each subscriber counts the buffers exported into its mapping; a poll or
 * release that would hand back ring space a buffer still shows is refused
 * (BufferError), and close() cancels at once but unmaps only when the
 * count drops to zero. The publisher side counts buffers into claimed
 * ring space the same way.
 */
#ifndef CRS_PY_BINDING_H
#define CRS_PY_BINDING_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <crs/crs.h>
#include <crs/inspect.h>

struct py_loop;

typedef struct py_pub {
	PyObject_HEAD
	crs_pub *pub;		  /* NULL once closed and unmapped */
	Py_ssize_t exports;	  /* buffers into claimed ring space */
	int closed;		  /* close() called; unmap when exports == 0 */
	int busy;		  /* a thread waits without the GIL */
	uint32_t overflow;	  /* enum crs_overflow, for offer() */
	struct py_claim *claim;	  /* the open claim (borrowed), or NULL */
	struct py_loop *loop;	  /* registered with (borrowed), or NULL */
	PyObject *on_ready;	  /* loop callback, while registered */
	PyObject *weakrefs;
} py_pub;

typedef struct py_claim {
	PyObject_HEAD
	py_pub *pub;		  /* strong */
	char *data;
	Py_ssize_t len;
	Py_ssize_t exports;
	int state;		  /* CLAIM_OPEN, CLAIM_COMMITTED, CLAIM_ABORTED */
} py_claim;

enum { CLAIM_OPEN, CLAIM_COMMITTED, CLAIM_ABORTED };

typedef struct py_sub {
	PyObject_HEAD
	crs_sub *sub;		  /* NULL once closed and unmapped */
	uint64_t gen;		  /* bumped whenever the held message goes */
	int held;		  /* a polled message not yet released */
	Py_ssize_t exports;	  /* buffers into the mapping */
	int closed;		  /* close() called; unmap when exports == 0 */
	int busy;		  /* a thread waits without the GIL */
	int cancelled;		  /* we cancelled: the end is no error */
	int64_t last_seq;	  /* seq of the last message polled, -1 none */
	PyObject *pending;	  /* list: copies the event loop dispatched */
	int loop_ended;		  /* the loop delivered the terminal signal */
	struct py_loop *loop;	  /* registered with (borrowed), or NULL */
	PyObject *weakrefs;
} py_sub;

typedef struct py_msg {
	PyObject_HEAD
	py_sub *sub;		  /* strong; NULL for an owned copy */
	PyObject *owned;	  /* bytes of an owned copy, else NULL */
	const char *data;
	Py_ssize_t len;
	uint64_t seq;
	uint64_t gen;		  /* sub->gen when polled */
} py_msg;

typedef struct py_loop {
	PyObject_HEAD
	crs_loop *loop;
	PyObject *members;	  /* set of registered Publisher/Subscriber */
} py_loop;

extern PyTypeObject py_pub_type, py_claim_type, py_sub_type, py_msg_type,
	py_loop_type;

/* ---- errors.c ------------------------------------------------------- */

/* Import crs._errors and keep its classes. 0 or -1 (exception set). */
int py_errors_init(PyObject *module);
/* The exception for a library return code (negative or not), as an
 * instance; NULL with an exception set if even that fails. */
PyObject *py_error_new(int rc);
/* Raise it; returns NULL for convenience. */
PyObject *py_raise(int rc);
/* py_raise, with crs_errmsg()'s words as the message: for the calls
 * that open or create, which set it. */
PyObject *py_raise_detail(int rc);
/* crs.StreamError(code, message) for a terminal signal. */
PyObject *py_raise_stream(int code, const char *message);
PyObject *py_stale_error(void); /* crs.StaleMessageError */

/* ---- waits ---------------------------------------------------------- */

/* A timeout argument: None waits forever (-1), a number of seconds >= 0.
 * Returns 0, or -1 with TypeError/ValueError set. */
int py_timeout(PyObject *arg, double *seconds);

/* Calls fn(ctx, ms) without the GIL, in slices of at most 100 ms, until
 * it returns something other than -ETIMEDOUT or `seconds` (< 0: no
 * limit) have passed; between slices it runs Python's signal handlers,
 * so Ctrl-C interrupts a wait promptly. Returns fn's last result, or
 * -EINTR with the handler's exception set. */
typedef int (*py_wait_fn)(void *ctx, int ms);
int py_wait(py_wait_fn fn, void *ctx, double seconds);

/* Monotonic clock in seconds, and a deadline's remaining seconds
 * (< 0: none; 0 once passed). */
double py_now(void);
double py_remaining(double deadline);

/* ---- per-type helpers ----------------------------------------------- */

int py_pub_check(py_pub *self);		/* 0, or -1 closed (set) */
void py_pub_export_done(py_pub *self);	/* a claim buffer went away */
int py_sub_check(py_sub *self);
void py_sub_export_done(py_sub *self);	/* a message buffer went away */
/* Release the held message unless a buffer still shows it: 0, or -1
 * (BufferError, closed, or already in a loop). */
int py_sub_ready_to_poll(py_sub *self);
PyObject *py_msg_owned(PyObject *bytes, uint64_t seq);

/* loop.c: leave the loop the handle is registered with, if any. */
void py_loop_forget_pub(py_pub *pub);
void py_loop_forget_sub(py_sub *sub);

/* inspect.c and bench.c: module-level functions. */
PyObject *py_stream_names(PyObject *mod, PyObject *unused);
PyObject *py_inspect(PyObject *mod, PyObject *name);
PyObject *py_bench_publish(PyObject *mod, PyObject *args);
PyObject *py_bench_consume(PyObject *mod, PyObject *args);

#endif
