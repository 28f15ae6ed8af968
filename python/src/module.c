/*
 * module.c - the crs._crs extension module: its types, constants and
 * functions. The Python package (crs/__init__.py) builds on it.
 */
#include <errno.h>

#include "binding.h"

static PyObject *mod_strerror(PyObject *mod, PyObject *arg)
{
	(void)mod;
	int code = PyLong_AsLong(arg);
	if (code == -1 && PyErr_Occurred())
		return NULL;
	return PyUnicode_FromString(crs_strerror(code));
}

static PyObject *mod_runtime_dir(PyObject *mod, PyObject *unused)
{
	(void)mod;
	(void)unused;
	char buf[4096];
	int r = crs_runtime_dir(buf, sizeof(buf));
	return r < 0 ? py_raise_detail(r) : PyUnicode_DecodeFSDefault(buf);
}

static PyObject *mod_name_check(PyObject *mod, PyObject *arg)
{
	(void)mod;
	const char *name = PyUnicode_AsUTF8(arg);
	if (!name)
		return NULL;
	return PyBool_FromLong(crs_name_check(name) == 0);
}

static PyObject *mod_error_for(PyObject *mod, PyObject *arg)
{
	(void)mod;
	int code = PyLong_AsLong(arg);
	if (code == -1 && PyErr_Occurred())
		return NULL;
	return py_error_new(code);
}

static PyMethodDef mod_methods[] = {
	{"strerror", mod_strerror, METH_O,
	 "strerror(code) -> str: the library's text for any code it "
	 "returns."},
	{"runtime_dir", mod_runtime_dir, METH_NOARGS,
	 "runtime_dir() -> str: the directory streams live in."},
	{"name_check", mod_name_check, METH_O,
	 "name_check(name) -> bool: whether name is a valid stream name."},
	{"stream_names", py_stream_names, METH_NOARGS,
	 "stream_names() -> list[str]: streams in the runtime directory."},
	{"inspect", py_inspect, METH_O,
	 "inspect(name) -> (dict, list[dict]): one inspector snapshot."},
	{"_error_for", mod_error_for, METH_O,
	 "The exception instance a library code maps to."},
	{"_bench_publish", py_bench_publish, METH_VARARGS,
	 "C reference publish loop for the benchmark."},
	{"_bench_consume", py_bench_consume, METH_VARARGS,
	 "C reference consume loop for the benchmark."},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
	PyModuleDef_HEAD_INIT,
	.m_name = "crs._crs",
	.m_doc = "The C extension under the crs package.",
	.m_size = -1,
	.m_methods = mod_methods,
};

static int add_type(PyObject *m, PyTypeObject *t, const char *name)
{
	if (PyType_Ready(t) < 0)
		return -1;
	return PyModule_AddObjectRef(m, name, (PyObject *)t);
}

PyMODINIT_FUNC PyInit__crs(void)
{
	PyObject *m = PyModule_Create(&module_def);
	if (!m)
		return NULL;
	if (py_errors_init(m) < 0 ||
	    add_type(m, &py_pub_type, "Publisher") < 0 ||
	    add_type(m, &py_claim_type, "Claim") < 0 ||
	    add_type(m, &py_sub_type, "Subscriber") < 0 ||
	    add_type(m, &py_msg_type, "Message") < 0 ||
	    add_type(m, &py_loop_type, "Loop") < 0 ||
	    PyModule_AddObject(m, "UNBOUNDED",
			       PyLong_FromUnsignedLongLong(CRS_UNBOUNDED)) < 0 ||
	    PyModule_AddIntConstant(m, "NAME_MAX", CRS_NAME_MAX) < 0 ||
	    PyModule_AddIntConstant(m, "ERRMSG_MAX", CRS_ERRMSG_MAX) < 0 ||
	    PyModule_AddIntConstant(m, "EBASE", CRS_EBASE) < 0 ||
	    PyModule_AddIntConstant(m, "ENODEMAND", CRS_ENODEMAND) < 0 ||
	    PyModule_AddIntConstant(m, "ENOROOM", CRS_ENOROOM) < 0 ||
	    PyModule_AddIntConstant(m, "EEND", CRS_EEND) < 0 ||
	    PyModule_AddIntConstant(m, "EPROTO", CRS_EPROTO) < 0 ||
	    PyModule_AddIntConstant(m, "EVERSION", CRS_EVERSION) < 0 ||
	    PyModule_AddIntConstant(m, "EGAP", CRS_EGAP) < 0 ||
	    PyModule_AddIntConstant(m, "ELAST", CRS_ELAST) < 0 ||
	    PyModule_AddIntConstant(m, "VERSION_MAJOR", CRS_VERSION_MAJOR) < 0 ||
	    PyModule_AddIntConstant(m, "VERSION_MINOR", CRS_VERSION_MINOR) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
