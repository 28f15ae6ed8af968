/*
 * handle.h - the memory of a publisher's or subscriber's handle.
 *
 * Each handle starts a page of its own. With plain calloc, where a
 * handle landed against the allocations before it (the application's
 * and our own) decided a third of a spinning round trip at 32 B on an
 * AMD VM (about 480 against 630 ns, bench/results/2026-12-04): one
 * small allocation more, or a handle 8 bytes larger, moved it. On page
 * boundaries the handles' hot words keep the same place whatever came
 * before.
 */
#ifndef CRS_HANDLE_H
#define CRS_HANDLE_H

#include <stdlib.h>
#include <string.h>

#define HANDLE_ALIGN 4096

/* size bytes of zeroes, page-aligned (free() releases them), or NULL. */
static inline void *handle_alloc(size_t size)
{
	size_t rounded = (size + HANDLE_ALIGN - 1) &
			 ~(size_t)(HANDLE_ALIGN - 1);
	void *p = aligned_alloc(HANDLE_ALIGN, rounded);
	if (p)
		memset(p, 0, rounded);
	return p;
}

#endif
