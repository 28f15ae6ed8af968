/*
 * publisher.c - crs.Publisher and crs.Claim: publishing from Python.
 * offer() copies; claim() hands out the ring space itself as a writable
 * buffer that commits when its `with` block ends (or aborts if the block
 * raised). Waits for demand or room run without the GIL in interruptible
 * slices, also for the BLOCK overflow strategy, which offer() therefore
 * carries out here rather than in crs_pub_offer.
 */
#include <errno.h>
#include <string.h>

#include "binding.h"

int py_pub_check(py_pub *self)
{
	if (self->closed || !self->pub) {
		PyErr_SetString(PyExc_ValueError,
				"operation on a closed Publisher");
		return -1;
	}
	if (self->busy) {
		PyErr_SetString(PyExc_RuntimeError,
				"Publisher is waiting in another thread");
		return -1;
	}
	return 0;
}

static void claim_end(py_claim *c, int state)
{
	c->state = state;
	if (c->pub->claim == c)
		c->pub->claim = NULL;
}

/* End the stream for subscribers at once; unmap once no claim buffer
 * shows the ring any more (until then the name stays taken). */
static void finish_close(py_pub *self)
{
	if (!self->pub)
		return;
	py_loop_forget_pub(self);
	if (self->claim) {
		crs_pub_abort(self->pub);
		claim_end(self->claim, CLAIM_ABORTED);
	}
	if (self->exports == 0) {
		crs_pub_close(self->pub);
		self->pub = NULL;
	} else {
		crs_pub_error(self->pub, EPIPE,
			      "publisher closed without completing");
	}
}

void py_pub_export_done(py_pub *self)
{
	if (--self->exports == 0 && self->closed && self->pub &&
	    !self->busy) {
		crs_pub_close(self->pub);
		self->pub = NULL;
	}
}

/* ---- waits ------------------------------------------------------------ */

enum wait_kind { W_CLAIM, W_SUBSCRIBERS, W_CONSUMED };

struct wait_ctx {
	py_pub *self;
	enum wait_kind kind;
	size_t n;
};

static int wait_slice(void *ctx, int ms)
{
	struct wait_ctx *w = ctx;
	if (__atomic_load_n(&w->self->closed, __ATOMIC_RELAXED))
		return -ECANCELED;
	switch (w->kind) {
	case W_CLAIM:
		return crs_pub_wait(w->self->pub, w->n, ms);
	case W_SUBSCRIBERS:
		return crs_pub_wait_subscribers(w->self->pub, (int)w->n, ms);
	default:
		return crs_pub_wait_consumed(w->self->pub, ms);
	}
}

/* 0 ready, -ETIMEDOUT, another -errno, or -EINTR/-ECANCELED with an
 * exception set. */
static int pub_wait(py_pub *self, enum wait_kind kind, size_t n,
		    double seconds)
{
	struct wait_ctx w = {self, kind, n};
	self->busy = 1;
	int r = py_wait(wait_slice, &w, seconds);
	self->busy = 0;
	if (self->closed) {
		finish_close(self);
		if (r != -EINTR)
			PyErr_SetString(PyExc_ValueError,
					"Publisher closed while waiting");
		return -ECANCELED;
	}
	return r;
}

/* Claim len bytes, waiting up to `seconds` for demand and room.
 * 0 (*buf set) or -1 with an exception. */
static int claim_waiting(py_pub *self, size_t len, double seconds,
			 void **buf)
{
	double deadline = seconds < 0 ? -1 : py_now() + seconds;
	for (;;) {
		int r = crs_pub_claim(self->pub, len, buf);
		if (r == 0)
			return 0;
		double left = py_remaining(deadline);
		if ((r != -CRS_ENODEMAND && r != -CRS_ENOROOM) || left == 0) {
			py_raise(r);
			return -1;
		}
		int w = pub_wait(self, W_CLAIM, len, left);
		if (w == -EINTR || w == -ECANCELED)
			return -1;
		if (w < 0 && w != -ETIMEDOUT) {
			py_raise(w);
			return -1;
		}
	}
}

/* ---- options ------------------------------------------------------------ */

/* An enum option given as an int or one of names (NULL-terminated,
 * index = value). 0 or -1. */
static int parse_enum(PyObject *v, const char *what,
		      const char *const *names, uint32_t *out)
{
	if (!v)
		return 0;
	if (PyUnicode_Check(v)) {
		const char *s = PyUnicode_AsUTF8(v);
		if (!s)
			return -1;
		for (uint32_t i = 0; names[i]; i++) {
			if (strcmp(s, names[i]) == 0) {
				*out = i;
				return 0;
			}
		}
		PyErr_Format(PyExc_ValueError, "unknown %s %R", what, v);
		return -1;
	}
	unsigned long x = PyLong_AsUnsignedLong(v);
	if (x == (unsigned long)-1 && PyErr_Occurred())
		return -1;
	uint32_t n = 0;
	while (names[n])
		n++;
	if (x >= n) {
		PyErr_Format(PyExc_ValueError, "unknown %s %R", what, v);
		return -1;
	}
	*out = (uint32_t)x;
	return 0;
}

static int parse_u64(PyObject *v, uint64_t *out)
{
	if (!v)
		return 0;
	unsigned long long x = PyLong_AsUnsignedLongLong(v);
	if (x == (unsigned long long)-1 && PyErr_Occurred())
		return -1;
	*out = x;
	return 0;
}

static int parse_u32(PyObject *v, uint32_t *out)
{
	uint64_t x = *out;
	if (parse_u64(v, &x) < 0)
		return -1;
	if (x > UINT32_MAX) {
		PyErr_SetString(PyExc_OverflowError, "value too large");
		return -1;
	}
	*out = (uint32_t)x;
	return 0;
}

static int parse_allow_uids(PyObject *v, struct crs_pub_opts *o)
{
	if (!v)
		return 0;
	PyObject *seq = PySequence_Fast(v, "allow_uids must be a sequence");
	if (!seq)
		return -1;
	Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
	if (n > (Py_ssize_t)(sizeof(o->allow_uids) / sizeof(o->allow_uids[0]))) {
		Py_DECREF(seq);
		PyErr_SetString(PyExc_ValueError, "at most 8 allow_uids");
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		if (parse_u32(PySequence_Fast_GET_ITEM(seq, i),
			      &o->allow_uids[i]) < 0) {
			Py_DECREF(seq);
			return -1;
		}
	}
	o->n_allow_uids = (uint32_t)n;
	Py_DECREF(seq);
	return 0;
}

static int pub_init(py_pub *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {
		"name", "mode", "ring_bytes", "max_message", "max_subscribers",
		"overflow", "on_disconnect", "auto_connect", "replay_count",
		"replay_bytes", "replay_age_ms", "untethered_ms", "spin_us",
		"allow_uid_any", "allow_gid", "allow_uids", "max_per_process",
		"max_per_uid", NULL};
	static const char *const modes[] = {"publish", "replay", NULL};
	static const char *const overflows[] = {"block", "error", "drop",
						"latest", NULL};
	static const char *const disconnects[] = {"error", "none", "complete",
						  NULL};
	const char *name;
	PyObject *mode = NULL, *ring = NULL, *maxmsg = NULL, *maxsubs = NULL,
		 *overflow = NULL, *ondisc = NULL, *autoc = NULL,
		 *rcount = NULL, *rbytes = NULL, *rage = NULL, *unteth = NULL,
		 *gid = NULL, *uids = NULL, *perproc = NULL, *peruid = NULL;
	int spin_us = 0, uid_any = 0;
	if (!PyArg_ParseTupleAndKeywords(
		    args, kw, "s|$OOOOOOOOOOOipOOOO", kwlist, &name, &mode, &ring,
		    &maxmsg, &maxsubs, &overflow, &ondisc, &autoc, &rcount,
		    &rbytes, &rage, &unteth, &spin_us, &uid_any, &gid, &uids,
		    &perproc, &peruid))
		return -1;
	if (self->pub || self->closed) {
		PyErr_SetString(PyExc_RuntimeError,
				"Publisher.__init__ called twice");
		return -1;
	}
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	if (parse_enum(mode, "mode", modes, &o.mode) < 0 ||
	    parse_u64(ring, &o.ring_bytes) < 0 ||
	    parse_u32(maxmsg, &o.max_message) < 0 ||
	    parse_u32(maxsubs, &o.max_subscribers) < 0 ||
	    parse_enum(overflow, "overflow", overflows, &o.overflow) < 0 ||
	    parse_enum(ondisc, "on_disconnect", disconnects,
		       &o.on_disconnect) < 0 ||
	    parse_u64(rcount, &o.replay_count) < 0 ||
	    parse_u64(rbytes, &o.replay_bytes) < 0 ||
	    parse_u64(rage, &o.replay_age_ms) < 0 ||
	    parse_u32(unteth, &o.untethered_ms) < 0 ||
	    parse_u32(perproc, &o.max_per_process) < 0 ||
	    parse_u32(peruid, &o.max_per_uid) < 0 ||
	    parse_allow_uids(uids, &o) < 0)
		return -1;
	if (autoc == Py_None) {
		o.auto_connect = CRS_CONNECT_MANUAL;
	} else if (autoc) {
		long n = PyLong_AsLong(autoc);
		if (n == -1 && PyErr_Occurred())
			return -1;
		if (n < 0 || n > 64) {
			PyErr_SetString(PyExc_ValueError,
					"auto_connect must be None or 0..64");
			return -1;
		}
		o.auto_connect = (int32_t)n;
	}
	if (gid && gid != Py_None) {
		o.allow_group = 1;
		if (parse_u32(gid, &o.allow_gid) < 0)
			return -1;
	}
	o.allow_uid_any = (uint32_t)uid_any;
	o.spin_us = spin_us;
	int r;
	crs_pub *pub = NULL;
	Py_BEGIN_ALLOW_THREADS
	r = crs_pub_create(name, &o, &pub);
	Py_END_ALLOW_THREADS
	if (r < 0) {
		py_raise_detail(r);
		return -1;
	}
	self->pub = pub;
	self->overflow = o.overflow;
	return 0;
}

static void pub_dealloc(py_pub *self)
{
	if (self->weakrefs)
		PyObject_ClearWeakRefs((PyObject *)self);
	self->closed = 1;
	finish_close(self); /* no buffer is left: each holds a reference */
	Py_CLEAR(self->on_ready);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

/* ---- publishing ------------------------------------------------------- */

static int offer_one(py_pub *self, const Py_buffer *b, double seconds)
{
	if (self->overflow != CRS_OVERFLOW_BLOCK) {
		int r = crs_pub_offer(self->pub, b->buf, (size_t)b->len);
		return r < 0 ? (py_raise(r), -1) : 0;
	}
	void *buf;
	if (claim_waiting(self, (size_t)b->len, seconds, &buf) < 0)
		return -1;
	memcpy(buf, b->buf, (size_t)b->len);
	int r = crs_pub_commit(self->pub, (size_t)b->len);
	return r < 0 ? (py_raise(r), -1) : 0;
}

static PyObject *pub_offer(py_pub *self, PyObject *const *args,
			   Py_ssize_t nargs, PyObject *kwnames)
{
	if (nargs < 1 || nargs > 2 || kwnames) {
		PyErr_SetString(PyExc_TypeError,
				"offer(data, timeout=None) takes positional "
				"arguments");
		return NULL;
	}
	double seconds = -1;
	if (nargs == 2 && py_timeout(args[1], &seconds) < 0)
		return NULL;
	if (py_pub_check(self) < 0)
		return NULL;
	Py_buffer b;
	if (PyObject_GetBuffer(args[0], &b, PyBUF_SIMPLE) < 0)
		return NULL;
	int r = offer_one(self, &b, seconds);
	PyBuffer_Release(&b);
	if (r < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *pub_offer_many(py_pub *self, PyObject *iterable)
{
	if (py_pub_check(self) < 0)
		return NULL;
	PyObject *it = PyObject_GetIter(iterable);
	if (!it)
		return NULL;
	Py_ssize_t n = 0;
	PyObject *item;
	while ((item = PyIter_Next(it))) {
		Py_buffer b;
		int r = PyObject_GetBuffer(item, &b, PyBUF_SIMPLE);
		Py_DECREF(item);
		if (r < 0)
			break;
		r = offer_one(self, &b, -1);
		PyBuffer_Release(&b);
		if (r < 0)
			break;
		n++;
	}
	Py_DECREF(it);
	if (PyErr_Occurred())
		return NULL;
	return PyLong_FromSsize_t(n);
}

static PyObject *pub_claim(py_pub *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"size", "timeout", NULL};
	Py_ssize_t len;
	PyObject *timeout = NULL;
	double seconds = -1;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "n|O", kwlist, &len,
					 &timeout))
		return NULL;
	if (timeout && py_timeout(timeout, &seconds) < 0)
		return NULL;
	if (py_pub_check(self) < 0)
		return NULL;
	if (len < 0) {
		PyErr_SetString(PyExc_ValueError, "size must be >= 0");
		return NULL;
	}
	py_claim *c = PyObject_New(py_claim, &py_claim_type);
	if (!c)
		return NULL;
	c->pub = (py_pub *)Py_NewRef(self);
	c->len = len;
	c->exports = 0;
	c->state = CLAIM_ABORTED;
	void *buf;
	if (claim_waiting(self, (size_t)len, seconds, &buf) < 0) {
		Py_DECREF(c);
		return NULL;
	}
	c->data = buf;
	c->state = CLAIM_OPEN;
	self->claim = c;
	return (PyObject *)c;
}

static PyObject *pub_ready(py_pub *self, PyObject *arg)
{
	Py_ssize_t len = PyLong_AsSsize_t(arg);
	if (len == -1 && PyErr_Occurred())
		return NULL;
	if (py_pub_check(self) < 0)
		return NULL;
	void *buf;
	int r = crs_pub_claim(self->pub, (size_t)(len < 0 ? 0 : len), &buf);
	if (r == 0) {
		crs_pub_abort(self->pub);
		Py_RETURN_TRUE;
	}
	if (r == -CRS_ENODEMAND || r == -CRS_ENOROOM)
		Py_RETURN_FALSE;
	return py_raise(r);
}

static PyObject *wait_result(int r)
{
	if (r == 0)
		Py_RETURN_TRUE;
	if (r == -ETIMEDOUT)
		Py_RETURN_FALSE;
	if (r == -EINTR || r == -ECANCELED)
		return NULL;
	return py_raise(r);
}

static PyObject *pub_wait_demand(py_pub *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"size", "timeout", NULL};
	Py_ssize_t len = 0;
	PyObject *timeout = NULL;
	double seconds = -1;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|nO", kwlist, &len,
					 &timeout) ||
	    (timeout && py_timeout(timeout, &seconds) < 0) ||
	    py_pub_check(self) < 0)
		return NULL;
	return wait_result(pub_wait(self, W_CLAIM, (size_t)(len < 0 ? 0 : len),
				    seconds));
}

static PyObject *pub_wait_subscribers(py_pub *self, PyObject *args,
				      PyObject *kw)
{
	static char *kwlist[] = {"n", "timeout", NULL};
	int n = 1;
	PyObject *timeout = NULL;
	double seconds = -1;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|iO", kwlist, &n,
					 &timeout) ||
	    (timeout && py_timeout(timeout, &seconds) < 0) ||
	    py_pub_check(self) < 0)
		return NULL;
	return wait_result(pub_wait(self, W_SUBSCRIBERS,
				    (size_t)(n < 0 ? 0 : n), seconds));
}

static PyObject *pub_wait_consumed(py_pub *self, PyObject *args,
				   PyObject *kw)
{
	static char *kwlist[] = {"timeout", NULL};
	PyObject *timeout = NULL;
	double seconds = -1;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O", kwlist, &timeout) ||
	    (timeout && py_timeout(timeout, &seconds) < 0) ||
	    py_pub_check(self) < 0)
		return NULL;
	return wait_result(pub_wait(self, W_CONSUMED, 0, seconds));
}

static PyObject *pub_complete(py_pub *self, PyObject *unused)
{
	(void)unused;
	if (py_pub_check(self) < 0)
		return NULL;
	int r = crs_pub_complete(self->pub);
	return r < 0 ? py_raise(r) : Py_NewRef(Py_None);
}

static PyObject *pub_error(py_pub *self, PyObject *args)
{
	int code;
	const char *message = "";
	if (!PyArg_ParseTuple(args, "i|s", &code, &message) ||
	    py_pub_check(self) < 0)
		return NULL;
	if (code <= 0) {
		PyErr_SetString(PyExc_ValueError, "code must be > 0");
		return NULL;
	}
	int r = crs_pub_error(self->pub, code, message);
	return r < 0 ? py_raise(r) : Py_NewRef(Py_None);
}

static PyObject *pub_connect(py_pub *self, PyObject *unused)
{
	(void)unused;
	if (py_pub_check(self) < 0)
		return NULL;
	int64_t r = crs_pub_connect(self->pub);
	return r < 0 ? py_raise((int)r) : PyLong_FromLongLong(r);
}

static PyObject *pub_disconnect(py_pub *self, PyObject *arg)
{
	long long epoch = PyLong_AsLongLong(arg);
	if ((epoch == -1 && PyErr_Occurred()) || py_pub_check(self) < 0)
		return NULL;
	crs_pub_disconnect(self->pub, epoch);
	Py_RETURN_NONE;
}

static PyObject *pub_serve(py_pub *self, PyObject *unused)
{
	(void)unused;
	if (py_pub_check(self) < 0)
		return NULL;
	int r = crs_pub_serve(self->pub);
	return r < 0 ? py_raise(r) : PyLong_FromLong(r);
}

static PyObject *pub_fileno(py_pub *self, PyObject *unused)
{
	(void)unused;
	if (py_pub_check(self) < 0)
		return NULL;
	return PyLong_FromLong(crs_pub_fd(self->pub));
}

static PyObject *pub_close(py_pub *self, PyObject *unused)
{
	(void)unused;
	if (self->closed)
		Py_RETURN_NONE;
	__atomic_store_n(&self->closed, 1, __ATOMIC_RELAXED);
	if (!self->busy)
		finish_close(self);
	Py_RETURN_NONE;
}

static PyObject *pub_enter(PyObject *self, PyObject *unused)
{
	(void)unused;
	return Py_NewRef(self);
}

static PyObject *pub_exit(py_pub *self, PyObject *args)
{
	(void)args;
	pub_close(self, NULL);
	Py_RETURN_FALSE;
}

static PyObject *pub_get_epoch(py_pub *self, void *unused)
{
	(void)unused;
	if (py_pub_check(self) < 0)
		return NULL;
	return PyLong_FromLongLong(crs_pub_epoch(self->pub));
}

static PyObject *pub_get_dropped(py_pub *self, void *unused)
{
	(void)unused;
	if (py_pub_check(self) < 0)
		return NULL;
	return PyLong_FromUnsignedLongLong(crs_pub_dropped(self->pub));
}

static PyObject *pub_get_demand(py_pub *self, void *unused)
{
	(void)unused;
	if (py_pub_check(self) < 0)
		return NULL;
	return PyLong_FromUnsignedLongLong(crs_pub_demand(self->pub));
}

static PyObject *pub_get_subscribers(py_pub *self, void *unused)
{
	(void)unused;
	if (py_pub_check(self) < 0)
		return NULL;
	return PyLong_FromLong(crs_pub_subscribers(self->pub));
}

static PyObject *pub_get_closed(py_pub *self, void *unused)
{
	(void)unused;
	return PyBool_FromLong(self->closed);
}

static PyMethodDef pub_methods[] = {
	{"offer", (PyCFunction)(void (*)(void))pub_offer, METH_FASTCALL | METH_KEYWORDS,
	 "offer(data, timeout=None) -> None\n\nPublish a copy of the bytes-"
	 "like data. With overflow 'block' (the default)\nwait up to timeout "
	 "seconds (None: forever) for demand and room, without\nthe GIL, "
	 "then raise NoDemandError/NoRoomError; the other strategies\n"
	 "never wait (see crs_pub_offer)."},
	{"offer_many", (PyCFunction)pub_offer_many, METH_O,
	 "offer_many(iterable) -> int\n\noffer() each bytes-like item in "
	 "turn; returns how many were published."},
	{"claim", (PyCFunction)(void (*)(void))pub_claim, METH_VARARGS | METH_KEYWORDS,
	 "claim(size, timeout=None) -> Claim\n\nReserve size bytes in the "
	 "ring, waiting like offer() for demand and room.\nUse as `with "
	 "pub.claim(n) as buf:`: buf is writable in place and commits\n"
	 "when the block ends (aborts if it raises); buf.commit(k) "
	 "publishes fewer."},
	{"wait_demand", (PyCFunction)(void (*)(void))pub_wait_demand,
	 METH_VARARGS | METH_KEYWORDS,
	 "wait_demand(size=0, timeout=None) -> bool\n\nWait until a claim "
	 "of size bytes would succeed; False on timeout."},
	{"wait_subscribers", (PyCFunction)(void (*)(void))pub_wait_subscribers,
	 METH_VARARGS | METH_KEYWORDS,
	 "wait_subscribers(n=1, timeout=None) -> bool\n\nWait until at "
	 "least n subscribers are present; False on timeout."},
	{"wait_consumed", (PyCFunction)(void (*)(void))pub_wait_consumed,
	 METH_VARARGS | METH_KEYWORDS,
	 "wait_consumed(timeout=None) -> bool\n\nWait until every "
	 "subscriber consumed everything; False on timeout."},
	{"complete", (PyCFunction)pub_complete, METH_NOARGS,
	 "complete() -> None\n\nEnd the stream: subscribers complete after "
	 "the messages before it."},
	{"error", (PyCFunction)pub_error, METH_VARARGS,
	 "error(code, message='') -> None\n\nEnd the stream with an error "
	 "(code > 0): subscribers get StreamError."},
	{"connect", (PyCFunction)pub_connect, METH_NOARGS,
	 "connect() -> int\n\nStart emitting (a new epoch); returns the "
	 "epoch."},
	{"disconnect", (PyCFunction)pub_disconnect, METH_O,
	 "disconnect(epoch) -> None\n\nEnd that epoch with the "
	 "on_disconnect strategy; a stale epoch is ignored."},
	{"serve", (PyCFunction)pub_serve, METH_NOARGS,
	 "serve() -> int\n\nServe subscribers without blocking; returns "
	 "how many are active."},
	{"fileno", (PyCFunction)pub_fileno, METH_NOARGS,
	 "fileno() -> int\n\nA descriptor readable while subscribers "
	 "connect or leave (crs_pub_fd)."},
	{"close", (PyCFunction)pub_close, METH_NOARGS,
	 "close() -> None\n\nClose the stream (subscribers of an "
	 "unterminated one get EPIPE). Idempotent."},
	{"_ready", (PyCFunction)pub_ready, METH_O,
	 "True if a claim of that size would succeed now (for crs.aio)."},
	{"__enter__", pub_enter, METH_NOARGS, NULL},
	{"__exit__", (PyCFunction)pub_exit, METH_VARARGS, NULL},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef pub_getset[] = {
	{"epoch", (getter)pub_get_epoch, NULL,
	 "The current (or last) epoch; 0 before the first connect.", NULL},
	{"dropped", (getter)pub_get_dropped, NULL,
	 "Messages dropped by the 'drop' and 'latest' strategies.", NULL},
	{"demand", (getter)pub_get_demand, NULL,
	 "Messages that may be published now (crs.UNBOUNDED if unbounded), "
	 "among the subscribers admitted so far (see serve()).",
	 NULL},
	{"subscribers", (getter)pub_get_subscribers, NULL,
	 "Active subscribers, as of the last serve.", NULL},
	{"closed", (getter)pub_get_closed, NULL, "True after close().", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject py_pub_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "crs._crs.Publisher",
	.tp_doc = "Publisher(name, *, mode='publish', ring_bytes=1 MiB, ...)"
		  "\n\nThe publisher of stream `name` (see crs.Publisher).",
	.tp_basicsize = sizeof(py_pub),
	.tp_dealloc = (destructor)pub_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_weaklistoffset = offsetof(py_pub, weakrefs),
	.tp_methods = pub_methods,
	.tp_getset = pub_getset,
	.tp_init = (initproc)pub_init,
	.tp_new = PyType_GenericNew,
};

/* ---- Claim ----------------------------------------------------------- */

static int claim_open_check(py_claim *c)
{
	if (c->state == CLAIM_OPEN && c->pub->pub && !c->pub->closed)
		return 0;
	PyErr_SetString(PyExc_ValueError,
			c->state == CLAIM_COMMITTED
				? "claim already committed"
				: "claim aborted (or its publisher closed)");
	return -1;
}

static PyObject *commit_len(py_claim *c, Py_ssize_t len)
{
	if (claim_open_check(c) < 0)
		return NULL;
	if (len < 0 || len > c->len) {
		PyErr_Format(PyExc_ValueError,
			     "commit length %zd not in 0..%zd", len, c->len);
		return NULL;
	}
	int r = crs_pub_commit(c->pub->pub, (size_t)len);
	if (r < 0)
		return py_raise(r);
	claim_end(c, CLAIM_COMMITTED);
	Py_RETURN_NONE;
}

static PyObject *claim_commit(py_claim *c, PyObject *args)
{
	Py_ssize_t len = c->len;
	if (!PyArg_ParseTuple(args, "|n", &len))
		return NULL;
	return commit_len(c, len);
}

static PyObject *claim_abort(py_claim *c, PyObject *unused)
{
	(void)unused;
	if (c->state == CLAIM_OPEN) {
		if (c->pub->pub)
			crs_pub_abort(c->pub->pub);
		claim_end(c, CLAIM_ABORTED);
	}
	Py_RETURN_NONE;
}

static PyObject *claim_enter(PyObject *c, PyObject *unused)
{
	(void)unused;
	return Py_NewRef(c);
}

static PyObject *claim_exit(py_claim *c, PyObject *args)
{
	PyObject *type = Py_None, *value, *tb;
	if (!PyArg_ParseTuple(args, "|OOO", &type, &value, &tb))
		return NULL;
	if (c->state == CLAIM_OPEN) {
		PyObject *r = type == Py_None ? commit_len(c, c->len)
					      : claim_abort(c, NULL);
		if (!r)
			return NULL;
		Py_DECREF(r);
	}
	Py_RETURN_FALSE;
}

static void claim_dealloc(py_claim *c)
{
	claim_abort(c, NULL);
	Py_DECREF(c->pub);
	PyObject_Free(c);
}

static int claim_getbuffer(py_claim *c, Py_buffer *view, int flags)
{
	if (claim_open_check(c) < 0) {
		view->obj = NULL;
		return -1;
	}
	if (PyBuffer_FillInfo(view, (PyObject *)c, c->data, c->len, 0,
			      flags) < 0)
		return -1;
	c->exports++;
	c->pub->exports++;
	return 0;
}

static void claim_releasebuffer(py_claim *c, Py_buffer *view)
{
	(void)view;
	c->exports--;
	py_pub_export_done(c->pub);
}

static PyBufferProcs claim_as_buffer = {
	.bf_getbuffer = (getbufferproc)claim_getbuffer,
	.bf_releasebuffer = (releasebufferproc)claim_releasebuffer,
};

static Py_ssize_t claim_length(py_claim *c)
{
	return c->len;
}

/* buf[i], buf[a:b] and assignments go through a memoryview of the claim
 * that lives for the one operation. */
static PyObject *claim_subscript(py_claim *c, PyObject *key)
{
	PyObject *mv = PyMemoryView_FromObject((PyObject *)c);
	if (!mv)
		return NULL;
	PyObject *r = PyObject_GetItem(mv, key);
	if (r && PyMemoryView_Check(r)) {
		/* a slice would keep the view: hand out a copy instead */
		PyObject *b = PyObject_CallMethod(r, "tobytes", NULL);
		Py_DECREF(r);
		r = b;
	}
	Py_DECREF(mv);
	return r;
}

static int claim_ass_subscript(py_claim *c, PyObject *key, PyObject *v)
{
	if (!v) {
		PyErr_SetString(PyExc_TypeError, "cannot delete claim bytes");
		return -1;
	}
	PyObject *mv = PyMemoryView_FromObject((PyObject *)c);
	if (!mv)
		return -1;
	int r = PyObject_SetItem(mv, key, v);
	Py_DECREF(mv);
	return r;
}

static PyMappingMethods claim_as_mapping = {
	.mp_length = (lenfunc)claim_length,
	.mp_subscript = (binaryfunc)claim_subscript,
	.mp_ass_subscript = (objobjargproc)claim_ass_subscript,
};

static PyMethodDef claim_methods[] = {
	{"commit", (PyCFunction)claim_commit, METH_VARARGS,
	 "commit(length=len(buf)) -> None\n\nPublish the first length "
	 "bytes now. The buffer may not be used afterwards."},
	{"abort", (PyCFunction)claim_abort, METH_NOARGS,
	 "abort() -> None\n\nDrop the claim, publishing nothing."},
	{"__enter__", claim_enter, METH_NOARGS, NULL},
	{"__exit__", (PyCFunction)claim_exit, METH_VARARGS, NULL},
	{NULL, NULL, 0, NULL},
};

PyTypeObject py_claim_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "crs.Claim",
	.tp_doc = "Claimed ring space, writable in place through the buffer "
		  "protocol\n(memoryview(buf), numpy.frombuffer(buf, dtype), "
		  "buf[a:b] = data).\nCommits when its `with` block ends, "
		  "aborts if the block raised.\nDo not write through views of "
		  "it after the commit: the bytes are then\nthe subscribers'.",
	.tp_basicsize = sizeof(py_claim),
	.tp_dealloc = (destructor)claim_dealloc,
	.tp_as_mapping = &claim_as_mapping,
	.tp_as_buffer = &claim_as_buffer,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_methods = claim_methods,
};
