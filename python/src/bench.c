/*
 * bench.c - the C reference loops for bench/python_bench.py: the same
 * publish and consume work as the Python loops, done in C on the same
 * handles without the GIL, so the benchmark can report the binding's
 * figures beside the library's in one run.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "binding.h"

#define WAIT_MS 10000 /* a peer silent this long has failed the run */

/* _bench_publish(pub, size, count, copy=0): claim, stamp the sequence
 * number in the first 8 bytes (copy: copy size bytes in, as offer()
 * does), commit. Returns None. */
PyObject *py_bench_publish(PyObject *mod, PyObject *args)
{
	(void)mod;
	py_pub *p;
	Py_ssize_t size, count;
	int copy = 0;
	if (!PyArg_ParseTuple(args, "O!nn|p", &py_pub_type, &p, &size, &count,
			      &copy) ||
	    py_pub_check(p) < 0)
		return NULL;
	char *src = copy ? PyMem_RawCalloc(1, (size_t)size + 1) : NULL;
	if (copy && !src)
		return PyErr_NoMemory();
	int r = 0;
	Py_BEGIN_ALLOW_THREADS
	for (Py_ssize_t i = 0; i < count && r == 0;) {
		void *buf;
		r = crs_pub_claim(p->pub, (size_t)size, &buf);
		if (r == 0) {
			uint64_t seq = (uint64_t)i;
			if (copy)
				memcpy(buf, src, (size_t)size);
			else
				memcpy(buf, &seq, size < 8 ? (size_t)size : 8);
			r = crs_pub_commit(p->pub, (size_t)size);
			i++;
		} else if (r == -CRS_ENODEMAND || r == -CRS_ENOROOM) {
			r = crs_pub_wait(p->pub, (size_t)size, WAIT_MS);
		}
	}
	Py_END_ALLOW_THREADS
	PyMem_RawFree(src);
	return r < 0 ? py_raise(r) : Py_NewRef(Py_None);
}

/* _bench_consume(sub, count, copy=0) -> (messages, bytes): poll and
 * release up to count messages, reading the first 8 bytes of each
 * (copy: copying each out, as poll_many() does). */
PyObject *py_bench_consume(PyObject *mod, PyObject *args)
{
	(void)mod;
	py_sub *s;
	Py_ssize_t count;
	int copy = 0;
	if (!PyArg_ParseTuple(args, "O!n|p", &py_sub_type, &s, &count, &copy) ||
	    py_sub_ready_to_poll(s) < 0)
		return NULL;
	char *dst = NULL;
	unsigned long long n = 0, bytes = 0, sum = 0;
	int r = 0;
	Py_BEGIN_ALLOW_THREADS
	while (n < (unsigned long long)count) {
		struct crs_msg m;
		r = crs_sub_poll(s->sub, &m);
		if (r == 1) {
			uint64_t v = 0;
			if (copy) { /* into a fresh block, like a bytes object */
				dst = malloc(m.len + 1);
				if (dst) {
					memcpy(dst, m.data, m.len);
					/* the copy counts: keep it */
					__asm__ volatile("" : : "r"(dst) : "memory");
				}
				v = dst ? (uint8_t)dst[0] : 0;
				free(dst);
			} else {
				memcpy(&v, m.data, m.len < 8 ? m.len : 8);
			}
			sum += v;
			n++;
			bytes += m.len;
			crs_sub_release(s->sub);
			r = 0;
		} else if (r == 0) {
			r = crs_sub_wait(s->sub, WAIT_MS);
			if (r < 0)
				break;
		} else {
			break;
		}
	}
	Py_END_ALLOW_THREADS
	if (r < 0 && r != -CRS_EEND)
		return py_raise(r);
	(void)sum;
	return Py_BuildValue("(KK)", n, bytes);
}
