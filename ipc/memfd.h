/*
 * memfd.h - anonymous shared memory: create, seal, map, inspect.
 * The publisher creates and seals; receivers check seals and map.
 */
#ifndef CRS_IPC_MEMFD_H
#define CRS_IPC_MEMFD_H

#include <stddef.h>

#include "compiler.h"

CRS_MUST_USE int ipc_memfd_create(const char *name, size_t size);
/* readonly: the data segment's seals (fixed size, no new writable
 * mappings); otherwise a control segment's (fixed size only: both sides
 * write). */
CRS_MUST_USE int ipc_memfd_seal(int fd, int readonly);
/* 0 if fd carries at least the seals of the given kind and is size bytes. */
CRS_MUST_USE int ipc_memfd_check(int fd, size_t size, int readonly);
CRS_MUST_USE int ipc_memfd_size(int fd, size_t *size);
/* Map size bytes of fd, shared, read-only or writable. */
CRS_MUST_USE int ipc_map(int fd, size_t size, int writable, void **out);
/* Have every page of the mapping at p present and accessed through it
 * now rather than at its first use (memfd.c says what that costs), as
 * far as memory allows: best effort. writable: the mapping is, and may
 * be shared with a peer that writes it (no byte changes). */
void ipc_prefault(void *p, size_t size, int writable);
void ipc_unmap(void *addr, size_t size);
void ipc_close(int fd);

#endif
