/*
 * message.c - crs.Message: one received message. A zero-copy message is
 * a read-only window on the subscriber's ring, valid while it is the
 * subscriber's held message; afterwards (the next poll, release(),
 * close()) reading it raises StaleMessageError, and buffers taken from it
 * while valid keep the subscriber from handing its space back. A copied
 * message (delivered by an event loop) owns a bytes object and never goes
 * stale.
 */
#include "binding.h"

static const char empty[1];

PyObject *py_msg_owned(PyObject *bytes, uint64_t seq)
{
	py_msg *m = PyObject_New(py_msg, &py_msg_type);
	if (!m)
		return NULL;
	m->sub = NULL;
	m->owned = Py_NewRef(bytes);
	m->data = PyBytes_AS_STRING(bytes);
	m->len = PyBytes_GET_SIZE(bytes);
	m->seq = seq;
	m->gen = 0;
	return (PyObject *)m;
}

static int msg_valid(const py_msg *m)
{
	const py_sub *s = m->sub;
	return m->owned || (!s->closed && s->held && s->gen == m->gen);
}

static int msg_check(const py_msg *m)
{
	if (msg_valid(m))
		return 0;
	PyErr_Format(py_stale_error(),
		     "message %llu was released; its ring space may hold "
		     "other data now (copy it, e.g. bytes(msg), to keep it)",
		     (unsigned long long)m->seq);
	return -1;
}

static void msg_dealloc(py_msg *m)
{
	Py_XDECREF(m->sub);
	Py_XDECREF(m->owned);
	PyObject_Free(m);
}

static int msg_getbuffer(py_msg *m, Py_buffer *view, int flags)
{
	if (msg_check(m) < 0) {
		view->obj = NULL;
		return -1;
	}
	void *data = (void *)(m->data ? m->data : empty);
	if (PyBuffer_FillInfo(view, (PyObject *)m, data, m->len, 1, flags) < 0)
		return -1;
	if (!m->owned)
		m->sub->exports++;
	return 0;
}

static void msg_releasebuffer(py_msg *m, Py_buffer *view)
{
	(void)view;
	if (!m->owned)
		py_sub_export_done(m->sub);
}

static PyBufferProcs msg_as_buffer = {
	.bf_getbuffer = (getbufferproc)msg_getbuffer,
	.bf_releasebuffer = (releasebufferproc)msg_releasebuffer,
};

static Py_ssize_t msg_length(py_msg *m)
{
	return m->len;
}

static PySequenceMethods msg_as_sequence = {
	.sq_length = (lenfunc)msg_length,
};

static PyObject *msg_tobytes(py_msg *m, PyObject *unused)
{
	(void)unused;
	if (m->owned)
		return Py_NewRef(m->owned);
	if (msg_check(m) < 0)
		return NULL;
	return PyBytes_FromStringAndSize(m->data, m->len);
}

static PyObject *msg_release(py_msg *m, PyObject *unused)
{
	(void)unused;
	py_sub *s = m->sub;
	if (m->owned || !msg_valid(m))
		Py_RETURN_NONE;
	if (s->exports) {
		PyErr_SetString(PyExc_BufferError,
				"a memoryview or array still uses this message");
		return NULL;
	}
	crs_sub_release(s->sub);
	s->held = 0;
	s->gen++;
	Py_RETURN_NONE;
}

static PyObject *msg_enter(PyObject *m, PyObject *unused)
{
	(void)unused;
	return Py_NewRef(m);
}

static PyObject *msg_exit(py_msg *m, PyObject *args)
{
	(void)args;
	return msg_release(m, NULL);
}

static PyObject *msg_repr(py_msg *m)
{
	return PyUnicode_FromFormat("<crs.Message seq=%llu len=%zd%s>",
				    (unsigned long long)m->seq, m->len,
				    msg_valid(m) ? "" : " released");
}

static PyObject *msg_get_seq(py_msg *m, void *unused)
{
	(void)unused;
	return PyLong_FromUnsignedLongLong(m->seq);
}

static PyObject *msg_get_valid(py_msg *m, void *unused)
{
	(void)unused;
	return PyBool_FromLong(msg_valid(m));
}

static PyObject *msg_get_copied(py_msg *m, void *unused)
{
	(void)unused;
	return PyBool_FromLong(m->owned != NULL);
}

static PyMethodDef msg_methods[] = {
	{"tobytes", (PyCFunction)msg_tobytes, METH_NOARGS,
	 "tobytes() -> bytes\n\nA copy of the payload."},
	{"__bytes__", (PyCFunction)msg_tobytes, METH_NOARGS, NULL},
	{"release", (PyCFunction)msg_release, METH_NOARGS,
	 "release() -> None\n\nHand the message's ring space back now (the "
	 "next poll does it otherwise).\nRaises BufferError while a "
	 "memoryview or array still uses it."},
	{"__enter__", msg_enter, METH_NOARGS, NULL},
	{"__exit__", (PyCFunction)msg_exit, METH_VARARGS, NULL},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef msg_getset[] = {
	{"seq", (getter)msg_get_seq, NULL,
	 "Sequence number in the stream, from 0.", NULL},
	{"valid", (getter)msg_get_valid, NULL,
	 "False once released: reading it then raises StaleMessageError.",
	 NULL},
	{"copied", (getter)msg_get_copied, NULL,
	 "True for a copy owned by the message (from an event loop), "
	 "False for a zero-copy view of the ring.", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject py_msg_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "crs.Message",
	.tp_doc = "A received message: its payload through the buffer "
		  "protocol (memoryview(msg),\nnumpy.frombuffer(msg, dtype): "
		  "read-only, no copy), len(msg) and msg.seq.\nValid until "
		  "the subscriber's next poll, msg.release() or close().",
	.tp_basicsize = sizeof(py_msg),
	.tp_dealloc = (destructor)msg_dealloc,
	.tp_repr = (reprfunc)msg_repr,
	.tp_as_sequence = &msg_as_sequence,
	.tp_as_buffer = &msg_as_buffer,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_methods = msg_methods,
	.tp_getset = msg_getset,
};
