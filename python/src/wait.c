/*
 * wait.c - blocking library calls without the GIL, in slices, so that
 * other threads run meanwhile and Ctrl-C (or any signal handler raising)
 * ends the wait within a slice.
 */
#include <errno.h>
#include <math.h>
#include <time.h>

#include "binding.h"

#define SLICE_MS 100

double py_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double py_remaining(double deadline)
{
	if (deadline < 0)
		return -1;
	double left = deadline - py_now();
	return left > 0 ? left : 0;
}

int py_timeout(PyObject *arg, double *seconds)
{
	if (!arg || arg == Py_None) {
		*seconds = -1;
		return 0;
	}
	double s = PyFloat_AsDouble(arg);
	if (s == -1.0 && PyErr_Occurred())
		return -1;
	if (!(s >= 0) || isinf(s)) {
		if (isinf(s) && s > 0) {
			*seconds = -1;
			return 0;
		}
		PyErr_SetString(PyExc_ValueError,
				"timeout must be None or a number >= 0");
		return -1;
	}
	*seconds = s;
	return 0;
}

int py_wait(py_wait_fn fn, void *ctx, double seconds)
{
	double deadline = seconds < 0 ? -1 : py_now() + seconds;
	for (;;) {
		if (PyErr_CheckSignals() < 0)
			return -EINTR;
		double left = py_remaining(deadline);
		int ms = SLICE_MS;
		if (left >= 0 && left * 1000 < SLICE_MS)
			ms = (int)ceil(left * 1000);
		int r;
		Py_BEGIN_ALLOW_THREADS
		r = fn(ctx, ms);
		Py_END_ALLOW_THREADS
		if (r != -ETIMEDOUT)
			return r;
		if (deadline >= 0 && py_remaining(deadline) == 0)
			return r;
	}
}
