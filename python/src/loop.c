/*
 * loop.c - crs._crs.Loop: a crs_loop for an asyncio event loop (crs.aio).
 * The loop's descriptor goes into asyncio's selector; when it fires,
 * run() dispatches: a subscription's messages are copied into its
 * pending list (the loop hands each back to the ring after its callback,
 * so a view could not outlive it) and publishers' readiness calls their
 * Python callback. A registered handle is kept alive by the loop's
 * member set and leaves it when closed.
 */
#include <errno.h>

#include "binding.h"

static void on_next(void *ctx, const struct crs_msg *m)
{
	py_sub *s = ctx;
	PyGILState_STATE g = PyGILState_Ensure();
	PyObject *b = PyBytes_FromStringAndSize(m->data, (Py_ssize_t)m->len);
	PyObject *msg = b ? py_msg_owned(b, m->seq) : NULL;
	Py_XDECREF(b);
	if (msg && PyList_Append(s->pending, msg) == 0)
		s->last_seq = (int64_t)m->seq;
	else
		PyErr_WriteUnraisable((PyObject *)s); /* out of memory */
	Py_XDECREF(msg);
	PyGILState_Release(g);
}

static void on_complete(void *ctx)
{
	((py_sub *)ctx)->loop_ended = 1;
}

static void on_error(void *ctx, int code, const char *message)
{
	(void)code;
	(void)message;
	((py_sub *)ctx)->loop_ended = 1; /* crs_sub_end() has both */
}

static const struct crs_sub_callbacks sub_callbacks = {
	.on_next = on_next,
	.on_complete = on_complete,
	.on_error = on_error,
};

static void on_ready(void *ctx, crs_pub *unused)
{
	(void)unused;
	py_pub *p = ctx;
	PyGILState_STATE g = PyGILState_Ensure();
	if (p->on_ready) {
		PyObject *r = PyObject_CallNoArgs(p->on_ready);
		if (r)
			Py_DECREF(r);
		else
			PyErr_WriteUnraisable(p->on_ready);
	}
	PyGILState_Release(g);
}

void py_loop_forget_sub(py_sub *sub)
{
	py_loop *loop = sub->loop;
	if (!loop)
		return;
	sub->loop = NULL;
	crs_loop_remove_sub(loop->loop, sub->sub); /* -ENOENT if it left */
	if (PySet_Discard(loop->members, (PyObject *)sub) < 0)
		PyErr_WriteUnraisable((PyObject *)sub);
}

void py_loop_forget_pub(py_pub *pub)
{
	py_loop *loop = pub->loop;
	if (!loop)
		return;
	pub->loop = NULL;
	crs_loop_remove_pub(loop->loop, pub->pub);
	Py_CLEAR(pub->on_ready);
	if (PySet_Discard(loop->members, (PyObject *)pub) < 0)
		PyErr_WriteUnraisable((PyObject *)pub);
}

static int loop_check(py_loop *self)
{
	if (self->loop)
		return 0;
	PyErr_SetString(PyExc_ValueError, "operation on a closed Loop");
	return -1;
}

static int loop_init(py_loop *self, PyObject *args, PyObject *kw)
{
	if (!PyArg_ParseTuple(args, ":Loop") ||
	    (kw && PyDict_Size(kw) > 0)) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_TypeError,
					"Loop() takes no arguments");
		return -1;
	}
	if (self->loop)
		return 0;
	self->members = PySet_New(NULL);
	if (!self->members)
		return -1;
	int r = crs_loop_create(&self->loop);
	if (r < 0) {
		py_raise(r);
		return -1;
	}
	return 0;
}

static void forget_all(py_loop *self)
{
	if (!self->members)
		return;
	PyObject *list = PySequence_List(self->members);
	if (!list) {
		PyErr_WriteUnraisable((PyObject *)self);
		return;
	}
	for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
		PyObject *o = PyList_GET_ITEM(list, i);
		if (Py_IS_TYPE(o, &py_sub_type) ||
		    PyObject_TypeCheck(o, &py_sub_type))
			py_loop_forget_sub((py_sub *)o);
		else
			py_loop_forget_pub((py_pub *)o);
	}
	Py_DECREF(list);
}

static PyObject *loop_close(py_loop *self, PyObject *unused)
{
	(void)unused;
	if (!self->loop)
		Py_RETURN_NONE;
	forget_all(self);
	crs_loop_close(self->loop);
	self->loop = NULL;
	Py_RETURN_NONE;
}

static void loop_dealloc(py_loop *self)
{
	PyObject *r = loop_close(self, NULL);
	Py_XDECREF(r);
	Py_CLEAR(self->members);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *loop_add_sub(py_loop *self, PyObject *arg)
{
	if (!PyObject_TypeCheck(arg, &py_sub_type)) {
		PyErr_SetString(PyExc_TypeError, "expected a Subscriber");
		return NULL;
	}
	py_sub *sub = (py_sub *)arg;
	if (loop_check(self) < 0 || py_sub_ready_to_poll(sub) < 0)
		return NULL;
	int r = crs_loop_add_sub(self->loop, sub->sub, &sub_callbacks, sub);
	if (r < 0)
		return py_raise(r);
	if (PySet_Add(self->members, arg) < 0) {
		crs_loop_remove_sub(self->loop, sub->sub);
		return NULL;
	}
	sub->loop = self;
	sub->loop_ended = 0;
	Py_RETURN_NONE;
}

static PyObject *loop_remove(py_loop *self, PyObject *arg)
{
	if (PyObject_TypeCheck(arg, &py_sub_type)) {
		if (((py_sub *)arg)->loop == self)
			py_loop_forget_sub((py_sub *)arg);
	} else if (PyObject_TypeCheck(arg, &py_pub_type)) {
		if (((py_pub *)arg)->loop == self)
			py_loop_forget_pub((py_pub *)arg);
	} else {
		PyErr_SetString(PyExc_TypeError,
				"expected a Subscriber or Publisher");
		return NULL;
	}
	Py_RETURN_NONE;
}

static PyObject *loop_add_pub(py_loop *self, PyObject *args)
{
	PyObject *pubobj, *callback;
	if (!PyArg_ParseTuple(args, "O!O:add_pub", &py_pub_type, &pubobj,
			      &callback))
		return NULL;
	py_pub *pub = (py_pub *)pubobj;
	if (loop_check(self) < 0 || py_pub_check(pub) < 0)
		return NULL;
	if (pub->loop) {
		PyErr_SetString(PyExc_RuntimeError,
				"Publisher is already in a loop");
		return NULL;
	}
	if (PySet_Add(self->members, pubobj) < 0)
		return NULL;
	pub->on_ready = Py_NewRef(callback);
	pub->loop = self;
	int r = crs_loop_add_pub(self->loop, pub->pub, on_ready, pub);
	if (r < 0) {
		pub->loop = NULL;
		Py_CLEAR(pub->on_ready);
		PySet_Discard(self->members, pubobj);
		return py_raise(r);
	}
	Py_RETURN_NONE;
}

/* Subscriptions whose terminal signal the loop delivered have left it. */
static int sweep_ended(py_loop *self)
{
	PyObject *list = PySequence_List(self->members);
	if (!list)
		return -1;
	for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
		PyObject *o = PyList_GET_ITEM(list, i);
		if (PyObject_TypeCheck(o, &py_sub_type) &&
		    ((py_sub *)o)->loop_ended)
			py_loop_forget_sub((py_sub *)o);
	}
	Py_DECREF(list);
	return 0;
}

static PyObject *loop_run(py_loop *self, PyObject *args)
{
	int timeout_ms = 0;
	if (!PyArg_ParseTuple(args, "|i:run", &timeout_ms) ||
	    loop_check(self) < 0)
		return NULL;
	int r;
	if (timeout_ms == 0) {
		r = crs_loop_run(self->loop, 0);
	} else {
		Py_BEGIN_ALLOW_THREADS
		r = crs_loop_run(self->loop, timeout_ms);
		Py_END_ALLOW_THREADS
	}
	if (sweep_ended(self) < 0)
		return NULL;
	if (r == -EINTR)
		r = PyErr_CheckSignals() < 0 ? -1 : 0;
	if (r == -1 && PyErr_Occurred())
		return NULL;
	if (r < 0)
		return py_raise(r);
	return PyLong_FromLong(r);
}

static PyObject *loop_fileno(py_loop *self, PyObject *unused)
{
	(void)unused;
	if (loop_check(self) < 0)
		return NULL;
	int fd = crs_loop_fd(self->loop);
	return fd < 0 ? py_raise(fd) : PyLong_FromLong(fd);
}

static PyObject *loop_get_engine(py_loop *self, void *unused)
{
	(void)unused;
	if (loop_check(self) < 0)
		return NULL;
	return PyUnicode_FromString(crs_loop_engine(self->loop));
}

static PyMethodDef loop_methods[] = {
	{"add_sub", (PyCFunction)loop_add_sub, METH_O,
	 "add_sub(sub): dispatch sub's messages as copies into its pending "
	 "list."},
	{"add_pub", (PyCFunction)loop_add_pub, METH_VARARGS,
	 "add_pub(pub, callback): serve pub's subscribers; call "
	 "callback() when demand or room may have appeared."},
	{"remove", (PyCFunction)loop_remove, METH_O,
	 "remove(handle): leave the loop (no-op if not in it)."},
	{"run", (PyCFunction)loop_run, METH_VARARGS,
	 "run(timeout_ms=0) -> int: dispatch what is ready (crs_loop_run)."},
	{"fileno", (PyCFunction)loop_fileno, METH_NOARGS,
	 "fileno() -> int: readable when run() has work (on the fallback "
	 "engines an eventfd); OSError if it cannot be made."},
	{"close", (PyCFunction)loop_close, METH_NOARGS,
	 "close(): remove every handle and free the loop."},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef loop_getset[] = {
	{"engine", (getter)loop_get_engine, NULL, "'io_uring' or 'poll'.",
	 NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject py_loop_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "crs._crs.Loop",
	.tp_doc = "Loop()\n\nA crs event loop, for crs.aio.",
	.tp_basicsize = sizeof(py_loop),
	.tp_dealloc = (destructor)loop_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_methods = loop_methods,
	.tp_getset = loop_getset,
	.tp_init = (initproc)loop_init,
	.tp_new = PyType_GenericNew,
};
