/*
 * subscriber.c - crs.Subscriber: a subscription, iterated or polled from
 * Python. Polls hand out zero-copy Message objects (message.c); at most
 * one is valid at a time, as in C, and a poll that would hand back ring
 * space a buffer still shows is refused with BufferError. Blocking waits
 * run without the GIL in interruptible slices (wait.c). A handle is used
 * by one thread at a time: another thread gets RuntimeError, except for
 * close(), which the waiting thread carries out within a slice.
 */
#include <errno.h>
#include <limits.h>

#include "binding.h"

int py_sub_check(py_sub *self)
{
	if (self->closed || !self->sub) {
		PyErr_SetString(PyExc_ValueError,
				"operation on a closed Subscriber");
		return -1;
	}
	if (self->busy) {
		PyErr_SetString(PyExc_RuntimeError,
				"Subscriber is waiting in another thread");
		return -1;
	}
	return 0;
}

/* Cancel at once; unmap once no buffer shows the mapping any more. */
static void finish_close(py_sub *self)
{
	if (!self->sub)
		return;
	py_loop_forget_sub(self);
	crs_sub_cancel(self->sub);
	self->cancelled = 1;
	self->held = 0;
	self->gen++;
	if (self->exports == 0) {
		crs_sub_close(self->sub);
		self->sub = NULL;
	}
}

void py_sub_export_done(py_sub *self)
{
	if (--self->exports == 0 && self->closed && self->sub &&
	    !self->busy) {
		crs_sub_close(self->sub);
		self->sub = NULL;
	}
}

static void release_held(py_sub *self)
{
	if (self->held) {
		crs_sub_release(self->sub);
		self->held = 0;
		self->gen++;
	}
}

/* The stream ended: StopIteration on completion (or our own cancel),
 * else StreamError. Always returns -1. */
static int raise_end(py_sub *self)
{
	const struct crs_end *end = crs_sub_end(self->sub);
	if (!end || end->code == 0 ||
	    (self->cancelled && end->code == ECANCELED))
		PyErr_SetNone(PyExc_StopIteration);
	else
		py_raise_stream(end->code, end->message);
	return -1;
}

/* Ready to poll the ring: not closed, not in a loop, no buffer left on
 * the held message (which this releases). 0 or -1. */
int py_sub_ready_to_poll(py_sub *self)
{
	if (py_sub_check(self) < 0)
		return -1;
	if (self->loop) {
		PyErr_SetString(PyExc_RuntimeError,
				"Subscriber is being awaited by an event loop");
		return -1;
	}
	if (self->exports) {
		PyErr_SetString(PyExc_BufferError,
				"the previous message is still used by a "
				"memoryview or array: release or delete it "
				"(or copy it) before the next poll");
		return -1;
	}
	release_held(self);
	return 0;
}

/* 1: *out is the next message; 0: none yet; -1: exception (the end is
 * StopIteration or StreamError). */
static int next_nowait(py_sub *self, PyObject **out)
{
	if (self->pending && PyList_GET_SIZE(self->pending) > 0) {
		if (py_sub_check(self) < 0)
			return -1;
		*out = Py_NewRef(PyList_GET_ITEM(self->pending, 0));
		if (PySequence_DelItem(self->pending, 0) < 0) {
			Py_CLEAR(*out);
			return -1;
		}
		return 1;
	}
	if (py_sub_ready_to_poll(self) < 0)
		return -1;
	struct crs_msg m;
	int r = crs_sub_poll(self->sub, &m);
	if (r == 0)
		return 0;
	if (r < 0)
		return r == -CRS_EEND ? raise_end(self) : (py_raise(r), -1);
	py_msg *msg = PyObject_New(py_msg, &py_msg_type);
	if (!msg) {
		crs_sub_release(self->sub); /* gen still current: none saw it */
		return -1;
	}
	self->held = 1;
	self->last_seq = (int64_t)m.seq;
	msg->sub = (py_sub *)Py_NewRef(self);
	msg->owned = NULL;
	msg->data = m.data;
	msg->len = (Py_ssize_t)m.len;
	msg->seq = m.seq;
	msg->gen = self->gen;
	*out = (PyObject *)msg;
	return 1;
}

static int wait_slice(void *ctx, int ms)
{
	py_sub *self = ctx;
	if (__atomic_load_n(&self->closed, __ATOMIC_RELAXED))
		return -ECANCELED; /* close() from another thread */
	return crs_sub_wait(self->sub, ms);
}

/* Wait up to `seconds` (< 0: forever) for poll to have something.
 * 1: maybe ready, 0: timed out, -1: exception (a signal, or closed). */
static int wait_ready(py_sub *self, double seconds)
{
	self->busy = 1;
	int r = py_wait(wait_slice, self, seconds);
	self->busy = 0;
	if (self->closed) {
		finish_close(self);
		if (r != -EINTR)
			PyErr_SetString(PyExc_ValueError,
					"Subscriber closed while waiting");
		return -1;
	}
	if (r == -EINTR)
		return -1;
	return r == -ETIMEDOUT ? 0 : 1;
}

static int next_blocking(py_sub *self, double seconds, PyObject **out)
{
	double deadline = seconds < 0 ? -1 : py_now() + seconds;
	for (;;) {
		int r = next_nowait(self, out);
		if (r != 0)
			return r;
		double left = py_remaining(deadline);
		if (left == 0)
			return 0;
		r = wait_ready(self, left);
		if (r <= 0)
			return r;
	}
}

/* ---- type slots ----------------------------------------------------- */

struct open_ctx {
	const char *name;
	struct crs_sub_opts opts;
	crs_sub *sub;
	int err;
};

/* One slice of waiting for the stream to appear: a missing stream
 * counts as a timeout so that py_wait tries again. */
static int open_slice(void *ctx, int ms)
{
	struct open_ctx *o = ctx;
	o->opts.wait_ms = ms;
	o->err = crs_sub_open(o->name, &o->opts, &o->sub);
	return o->err == -ENOENT ? -ETIMEDOUT : o->err;
}

static int sub_init(py_sub *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"name", "prefetch", "wait",
				 "handshake_timeout", "spin_us", NULL};
	struct open_ctx o = {0};
	crs_sub_opts_init(&o.opts);
	PyObject *wait = NULL, *handshake = NULL;
	unsigned int prefetch = o.opts.prefetch;
	int spin_us = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "s|$IOOi", kwlist, &o.name,
					 &prefetch, &wait, &handshake,
					 &spin_us))
		return -1;
	if (self->sub || self->closed) {
		PyErr_SetString(PyExc_RuntimeError,
				"Subscriber.__init__ called twice");
		return -1;
	}
	double wait_s = 0, hs_s;
	if (wait && py_timeout(wait, &wait_s) < 0)
		return -1;
	if (py_timeout(handshake, &hs_s) < 0)
		return -1;
	o.opts.prefetch = prefetch;
	o.opts.spin_us = spin_us;
	if (handshake && handshake != Py_None)
		o.opts.handshake_ms = hs_s < 0 || hs_s * 1000 >= INT_MAX
					      ? -1
					      : (int)(hs_s * 1000) + 1;
	int r;
	if (wait_s == 0) {
		Py_BEGIN_ALLOW_THREADS
		r = crs_sub_open(o.name, &o.opts, &o.sub);
		Py_END_ALLOW_THREADS
	} else {
		r = py_wait(open_slice, &o, wait_s);
		if (r == -EINTR)
			return -1;
		if (r == -ETIMEDOUT && o.err == -ENOENT)
			r = -ENOENT;
	}
	if (r < 0) {
		py_raise_detail(r);
		return -1;
	}
	self->sub = o.sub;
	self->last_seq = -1;
	self->pending = PyList_New(0);
	return self->pending ? 0 : -1;
}

static void sub_dealloc(py_sub *self)
{
	if (self->weakrefs)
		PyObject_ClearWeakRefs((PyObject *)self);
	self->closed = 1;
	finish_close(self); /* no buffer is left: each holds a reference */
	Py_CLEAR(self->pending);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *sub_iternext(py_sub *self)
{
	PyObject *out = NULL;
	next_blocking(self, -1, &out);
	return out; /* NULL with StopIteration set, or none, ends a for */
}

static PyObject *sub_poll(py_sub *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"timeout", NULL};
	PyObject *timeout = NULL;
	double seconds = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O", kwlist, &timeout))
		return NULL;
	if (timeout && py_timeout(timeout, &seconds) < 0)
		return NULL;
	PyObject *out = NULL;
	int r = next_blocking(self, seconds, &out);
	if (r < 0)
		return NULL;
	return r ? out : Py_NewRef(Py_None);
}

static PyObject *sub_try_next(py_sub *self, PyObject *unused)
{
	(void)unused;
	PyObject *out = NULL;
	int r = next_nowait(self, &out);
	if (r < 0)
		return NULL;
	return r ? out : Py_NewRef(Py_None);
}

/* Copies of up to max messages: the fast path for small messages. */
static PyObject *sub_poll_many(py_sub *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"max", "timeout", NULL};
	Py_ssize_t max;
	PyObject *timeout = NULL;
	double seconds = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "n|O", kwlist, &max,
					 &timeout))
		return NULL;
	if (timeout && py_timeout(timeout, &seconds) < 0)
		return NULL;
	if (max < 0) {
		PyErr_SetString(PyExc_ValueError, "max must be >= 0");
		return NULL;
	}
	PyObject *list = PyList_New(0);
	if (!list)
		return NULL;
	while (PyList_GET_SIZE(list) < max && self->pending &&
	       PyList_GET_SIZE(self->pending) > 0) {
		/* copies an event loop dispatched come first */
		py_msg *m = (py_msg *)PyList_GET_ITEM(self->pending, 0);
		if (PyList_Append(list, m->owned) < 0 ||
		    PySequence_DelItem(self->pending, 0) < 0)
			goto fail;
	}
	double deadline = seconds < 0 ? -1 : py_now() + seconds;
	while (PyList_GET_SIZE(list) < max) {
		if (py_sub_ready_to_poll(self) < 0)
			goto fail;
		struct crs_msg m;
		int r = crs_sub_poll(self->sub, &m);
		if (r == 1) {
			PyObject *b = PyBytes_FromStringAndSize(m.data,
								(Py_ssize_t)m.len);
			crs_sub_release(self->sub);
			self->last_seq = (int64_t)m.seq;
			if (!b || PyList_Append(list, b) < 0) {
				Py_XDECREF(b);
				goto fail;
			}
			Py_DECREF(b);
			continue;
		}
		if (PyList_GET_SIZE(list) > 0)
			break; /* the end, if it is one, comes next call */
		if (r < 0) {
			if (r == -CRS_EEND)
				raise_end(self);
			else
				py_raise(r);
			goto fail;
		}
		double left = py_remaining(deadline);
		if (left == 0)
			break;
		r = wait_ready(self, left);
		if (r < 0)
			goto fail;
		if (r == 0)
			break;
	}
	return list;
fail:
	Py_DECREF(list);
	return NULL;
}

static PyObject *sub_request(py_sub *self, PyObject *arg)
{
	if (py_sub_check(self) < 0)
		return NULL;
	int overflow = 0;
	long long v = PyLong_AsLongLongAndOverflow(arg, &overflow);
	if (v == -1 && PyErr_Occurred())
		return NULL;
	uint64_t n;
	if (overflow > 0)
		n = CRS_UNBOUNDED;
	else if (overflow < 0 || v <= 0)
		n = 0; /* a violation: ends the subscription with EINVAL */
	else
		n = (uint64_t)v;
	int r = crs_sub_request(self->sub, n);
	if (r < 0)
		return py_raise(r);
	Py_RETURN_NONE;
}

static PyObject *sub_cancel(py_sub *self, PyObject *unused)
{
	(void)unused;
	if (self->closed || !self->sub)
		Py_RETURN_NONE;
	if (py_sub_check(self) < 0)
		return NULL;
	crs_sub_cancel(self->sub);
	self->cancelled = 1;
	Py_RETURN_NONE;
}

static PyObject *sub_close(py_sub *self, PyObject *unused)
{
	(void)unused;
	if (self->closed)
		Py_RETURN_NONE;
	__atomic_store_n(&self->closed, 1, __ATOMIC_RELAXED);
	if (!self->busy)
		finish_close(self);
	Py_RETURN_NONE;
}

static PyObject *sub_enter(PyObject *self, PyObject *unused)
{
	(void)unused;
	return Py_NewRef(self);
}

static PyObject *sub_exit(py_sub *self, PyObject *args)
{
	(void)args;
	sub_close(self, NULL);
	Py_RETURN_FALSE;
}

static PyObject *sub_get_requested(py_sub *self, void *unused)
{
	(void)unused;
	if (py_sub_check(self) < 0)
		return NULL;
	return PyLong_FromUnsignedLongLong(crs_sub_requested(self->sub));
}

static PyObject *sub_get_received(py_sub *self, void *unused)
{
	(void)unused;
	if (py_sub_check(self) < 0)
		return NULL;
	return PyLong_FromUnsignedLongLong(crs_sub_received(self->sub));
}

static PyObject *sub_get_last_seq(py_sub *self, void *unused)
{
	(void)unused;
	if (self->last_seq < 0)
		Py_RETURN_NONE;
	return PyLong_FromLongLong(self->last_seq);
}

static PyObject *sub_get_end(py_sub *self, void *unused)
{
	(void)unused;
	const struct crs_end *end = self->sub ? crs_sub_end(self->sub) : NULL;
	if (!end)
		Py_RETURN_NONE;
	return Py_BuildValue("(is)", end->code, end->message);
}

static PyObject *sub_get_closed(py_sub *self, void *unused)
{
	(void)unused;
	return PyBool_FromLong(self->closed);
}

static PyObject *sub_get_loop_state(py_sub *self, void *unused)
{
	(void)unused;
	return Py_BuildValue("(nO)",
			     self->pending ? PyList_GET_SIZE(self->pending) : 0,
			     self->loop_ended ? Py_True : Py_False);
}

static PyMethodDef sub_methods[] = {
	{"poll", (PyCFunction)(void (*)(void))sub_poll,
	 METH_VARARGS | METH_KEYWORDS,
	 "poll(timeout=0) -> Message | None\n\nThe next message, waiting "
	 "up to timeout seconds (None: forever) without\nthe GIL; None if "
	 "there is none. Releases the previous message. At the end\nof "
	 "the stream raises StopIteration (completed) or StreamError."},
	{"poll_many", (PyCFunction)(void (*)(void))sub_poll_many,
	 METH_VARARGS | METH_KEYWORDS,
	 "poll_many(max, timeout=0) -> list[bytes]\n\nCopies of up to max "
	 "messages that are ready now, waiting up to timeout\nseconds for "
	 "the first; [] if none. The last one's seq is last_seq and\nseqs "
	 "are consecutive. At the end of the stream (with nothing left to\n"
	 "return) raises like poll()."},
	{"request", (PyCFunction)sub_request, METH_O,
	 "request(n) -> None\n\nAdd n to the demand (crs.UNBOUNDED or "
	 "more: unbounded). n <= 0 violates\nthe protocol: the subscription "
	 "ends with EINVAL and OSError(EINVAL) is raised."},
	{"cancel", (PyCFunction)sub_cancel, METH_NOARGS,
	 "cancel() -> None\n\nStop receiving and release the pressure on "
	 "the publisher at once. Idempotent;\niteration then stops (no "
	 "error)."},
	{"close", (PyCFunction)sub_close, METH_NOARGS,
	 "close() -> None\n\nCancel at once; the mapping goes once no "
	 "message buffer uses it. Idempotent."},
	{"_try_next", (PyCFunction)sub_try_next, METH_NOARGS,
	 "The next message without waiting, or None (for crs.aio)."},
	{"__enter__", sub_enter, METH_NOARGS, NULL},
	{"__exit__", (PyCFunction)sub_exit, METH_VARARGS, NULL},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef sub_getset[] = {
	{"requested", (getter)sub_get_requested, NULL,
	 "Total demand requested so far (crs.UNBOUNDED if unbounded).", NULL},
	{"received", (getter)sub_get_received, NULL,
	 "Messages received and released so far.", NULL},
	{"last_seq", (getter)sub_get_last_seq, NULL,
	 "seq of the last message polled, or None.", NULL},
	{"end", (getter)sub_get_end, NULL,
	 "None while the stream runs, then (code, message): code 0 is "
	 "completion.", NULL},
	{"closed", (getter)sub_get_closed, NULL, "True after close().", NULL},
	{"_loop_state", (getter)sub_get_loop_state, NULL,
	 "(copies waiting, terminal seen by a loop), for crs.aio.", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject py_sub_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "crs._crs.Subscriber",
	.tp_doc = "Subscriber(name, *, prefetch=1048576, wait=0, "
		  "handshake_timeout=None, spin_us=0)\n\nA subscription to "
		  "stream `name`.",
	.tp_basicsize = sizeof(py_sub),
	.tp_dealloc = (destructor)sub_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_weaklistoffset = offsetof(py_sub, weakrefs),
	.tp_iter = PyObject_SelfIter,
	.tp_iternext = (iternextfunc)sub_iternext,
	.tp_methods = sub_methods,
	.tp_getset = sub_getset,
	.tp_init = (initproc)sub_init,
	.tp_new = PyType_GenericNew,
};
