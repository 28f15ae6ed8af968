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
CRS_MUST_USE int ipc_map(int fd, size_t size, int writable, void **out);
void ipc_unmap(void *addr, size_t size);
void ipc_close(int fd);

#endif
