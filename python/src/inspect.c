/*
 * inspect.c - the inspector for Python: stream names and one snapshot of
 * a stream and its subscribers as dicts (crs/__init__.py makes them
 * StreamInfo and SubscriberInfo), the figures crs-top shows.
 */
#include <errno.h>
#include <stdlib.h>

#include "binding.h"

#define MAX_SUBS 64

PyObject *py_stream_names(PyObject *mod, PyObject *unused)
{
	(void)mod;
	(void)unused;
	int cap = 64;
	for (;;) {
		char (*names)[CRS_NAME_MAX + 1] = calloc((size_t)cap,
							 sizeof(*names));
		if (!names)
			return PyErr_NoMemory();
		int n = crs_inspect_list(names, cap);
		if (n > cap) {
			free(names);
			cap = n;
			continue;
		}
		PyObject *list = n < 0 ? py_raise_detail(n) : PyList_New(0);
		for (int i = 0; list && i < n; i++) {
			PyObject *s = PyUnicode_DecodeFSDefault(names[i]);
			if (!s || PyList_Append(list, s) < 0)
				Py_CLEAR(list);
			Py_XDECREF(s);
		}
		free(names);
		return list;
	}
}

static const char *state_name(int state)
{
	static const char *const names[] = {"live",   "completed", "failed",
					    "closed", "dead",	   "denied"};
	return state >= 0 && state <= CRS_STREAM_DENIED ? names[state]
							: "unknown";
}

static PyObject *sub_dict(const struct crs_sub_info *s)
{
	return Py_BuildValue(
		"{s:i,s:i,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:O}", "slot", s->slot,
		"pid", s->pid, "requested", (unsigned long long)s->requested,
		"outstanding", (unsigned long long)s->outstanding, "consumed",
		(unsigned long long)s->consumed, "joined",
		(unsigned long long)s->joined, "lag_messages",
		(unsigned long long)s->lag_messages, "lag_bytes",
		(unsigned long long)s->lag_bytes, "wakeups",
		(unsigned long long)s->wakeups, "paced",
		(unsigned long long)s->paced, "holding_back",
		s->holding_back ? Py_True : Py_False);
}

static PyObject *info_dict(const struct crs_stream_info *i)
{
	PyObject *d = Py_BuildValue(
		"{s:s,s:s,s:i,s:s,s:K,s:I,s:I,s:K,s:K,s:K,s:K,s:K,s:K}",
		"name", i->name, "state", state_name(i->state), "pub_pid",
		i->pub_pid, "mode", i->mode == CRS_MODE_REPLAY ? "replay"
							      : "publish",
		"ring_size", (unsigned long long)i->ring_size, "max_message",
		i->max_message, "subscriber_count", i->subscribers, "published",
		(unsigned long long)i->published, "bytes",
		(unsigned long long)i->bytes, "dropped",
		(unsigned long long)i->dropped, "ring_used",
		(unsigned long long)i->ring_used, "wakes",
		(unsigned long long)i->wakes, "no_demand",
		(unsigned long long)i->no_demand);
	PyObject *more = Py_BuildValue(
		"{s:K,s:K,s:K,s:K,s:K,s:K,s:L,s:i,s:s,s:L}", "no_room",
		(unsigned long long)i->no_room, "evicted",
		(unsigned long long)i->evicted, "refused",
		(unsigned long long)i->refused, "epoch",
		(unsigned long long)i->epoch, "retained",
		(unsigned long long)i->retained, "retained_bytes",
		(unsigned long long)i->retained_bytes, "retained_age_ns",
		(long long)i->retained_age_ns, "end_code", i->end_code,
		"end_message", i->end_message, "sampled_ns",
		(long long)i->sampled_ns);
	if (!d || !more || PyDict_Update(d, more) < 0)
		Py_CLEAR(d);
	Py_XDECREF(more);
	return d;
}

/* (info, [sub, ...]) for stream `name`. */
PyObject *py_inspect(PyObject *mod, PyObject *arg)
{
	(void)mod;
	const char *name = PyUnicode_AsUTF8(arg);
	if (!name)
		return NULL;
	crs_inspector *in;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = crs_inspect_open(name, &in);
	Py_END_ALLOW_THREADS
	if (r < 0)
		return py_raise_detail(r);
	struct crs_stream_info info;
	struct crs_sub_info subs[MAX_SUBS];
	int n = crs_inspect_read(in, &info, subs, MAX_SUBS);
	crs_inspect_close(in);
	if (n < 0)
		return py_raise(n);
	PyObject *d = info_dict(&info);
	PyObject *list = PyList_New(0);
	for (int i = 0; d && list && i < n && i < MAX_SUBS; i++) {
		PyObject *s = sub_dict(&subs[i]);
		if (!s || PyList_Append(list, s) < 0)
			Py_CLEAR(list);
		Py_XDECREF(s);
	}
	PyObject *res = d && list ? PyTuple_Pack(2, d, list) : NULL;
	Py_XDECREF(d);
	Py_XDECREF(list);
	return res;
}
