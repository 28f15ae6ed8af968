/*
 * errors.c - library return codes to Python exceptions: errno values to
 * OSError (which picks Python's subclass), crs's own codes to the classes
 * of crs/_errors.py, terminal signals to crs.StreamError.
 */
#include <string.h>

#include "binding.h"

static PyObject *classes[CRS_ELAST - CRS_EBASE]; /* by code - CRS_EBASE */
static PyObject *stream_error, *stale_error;

int py_errors_init(PyObject *module)
{
	static const char *const names[CRS_ELAST - CRS_EBASE] = {
		[0] = "Error",
		[CRS_ENODEMAND - CRS_EBASE] = "NoDemandError",
		[CRS_ENOROOM - CRS_EBASE] = "NoRoomError",
		[CRS_EEND - CRS_EBASE] = "EndedError",
		[CRS_EPROTO - CRS_EBASE] = "ProtocolError",
		[CRS_EVERSION - CRS_EBASE] = "VersionError",
		[CRS_EGAP - CRS_EBASE] = "GapError",
	};
	/* A new code in crs.h needs its class here and in crs/_errors.py. */
	_Static_assert(CRS_ELAST - CRS_EBASE == 7, "a crs code without a class");
	PyObject *mod = PyImport_ImportModule("crs._errors");
	if (!mod)
		return -1;
	for (int i = 0; i < CRS_ELAST - CRS_EBASE; i++) {
		if (!names[i]) { /* a code added to crs.h but not here */
			PyErr_Format(PyExc_ImportError,
				     "crs._errors: no class for code %d",
				     CRS_EBASE + i);
			goto fail;
		}
		classes[i] = PyObject_GetAttrString(mod, names[i]);
		if (!classes[i] ||
		    PyModule_AddObjectRef(module, names[i], classes[i]) < 0)
			goto fail;
	}
	stream_error = PyObject_GetAttrString(mod, "StreamError");
	stale_error = PyObject_GetAttrString(mod, "StaleMessageError");
	if (!stream_error || !stale_error ||
	    PyModule_AddObjectRef(module, "StreamError", stream_error) < 0 ||
	    PyModule_AddObjectRef(module, "StaleMessageError", stale_error) < 0)
		goto fail;
	Py_DECREF(mod);
	return 0;
fail:
	Py_DECREF(mod);
	return -1;
}

PyObject *py_error_new(int rc)
{
	int code = rc < 0 ? -rc : rc;
	PyObject *cls = PyExc_OSError;
	if (code > CRS_EBASE && code < CRS_ELAST)
		cls = classes[code - CRS_EBASE];
	else if (code >= CRS_EBASE)
		cls = classes[0];
	return PyObject_CallFunction(cls, "is", code, crs_strerror(code));
}

static PyObject *raise_instance(PyObject *e)
{
	if (e) {
		PyErr_SetObject((PyObject *)Py_TYPE(e), e);
		Py_DECREF(e);
	}
	return NULL;
}

PyObject *py_raise(int rc)
{
	return raise_instance(py_error_new(rc));
}

PyObject *py_raise_detail(int rc)
{
	const char *detail = crs_errmsg();
	if (!detail || !*detail || strcmp(detail, "no error") == 0)
		return py_raise(rc);
	int code = rc < 0 ? -rc : rc;
	PyObject *e = py_error_new(rc);
	if (!e)
		return NULL;
	PyObject *args = Py_BuildValue("(is)", code, detail);
	if (!args || PyObject_SetAttrString(e, "args", args) < 0 ||
	    PyObject_SetAttrString(e, "strerror", PyTuple_GET_ITEM(args, 1)) < 0)
		Py_CLEAR(e);
	Py_XDECREF(args);
	return raise_instance(e);
}

PyObject *py_raise_stream(int code, const char *message)
{
	return raise_instance(
		PyObject_CallFunction(stream_error, "is", code, message));
}

PyObject *py_stale_error(void)
{
	return stale_error;
}
