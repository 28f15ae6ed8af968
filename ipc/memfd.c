/*
 * memfd.c - memfd segments. Sealing against SHRINK and GROW means a mapping
 * can never fault with SIGBUS because a peer truncated the file;
 * FUTURE_WRITE means receivers can only ever map the data read-only.
 */
#include "memfd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define IPC_HUGE_PAGE ((size_t)2 << 20)
#define IPC_READ_TOUCH_MAX ((size_t)64 << 20)
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

#define SEALS_FIXED (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
#define SEALS_READONLY (SEALS_FIXED | F_SEAL_FUTURE_WRITE)

int ipc_memfd_create(const char *name, size_t size)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0) {
		int err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

int ipc_memfd_seal(int fd, int readonly)
{
	int seals = readonly ? SEALS_READONLY : SEALS_FIXED;
	return fcntl(fd, F_ADD_SEALS, seals) < 0 ? -errno : 0;
}

int ipc_memfd_size(int fd, size_t *size)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	*size = (size_t)st.st_size;
	return 0;
}

int ipc_memfd_check(int fd, size_t size, int readonly)
{
	int want = readonly ? SEALS_READONLY : SEALS_FIXED;
	int seals = fcntl(fd, F_GET_SEALS);
	size_t actual;
	if (seals < 0)
		return -errno;
	if ((seals & want) != want)
		return -EPERM;
	int err = ipc_memfd_size(fd, &actual);
	if (err)
		return err;
	return actual == size ? 0 : -EINVAL;
}

/* One access to every page through this mapping, a store if it is
 * writable. It may already be shared with a peer that writes it: the
 * store is an atomic OR of 0, which changes no byte. */
static void touch_pages(void *p, size_t size, int writable)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *b = p;
	for (size_t off = 0; off < size; off += page) {
		if (writable)
			(void)__atomic_fetch_or(b + off, 0, __ATOMIC_RELAXED);
		else
			(void)*(volatile const uint8_t *)(b + off);
	}
}

int ipc_map(int fd, size_t size, int writable, void **out)
{
	int prot = PROT_READ | (writable ? PROT_WRITE : 0);
	void *p = mmap(NULL, size, prot, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	/* Ask for transparent huge pages on rings of 2 MiB or more: a late
	 * joiner's first pass over a fresh mapping is bound by building
	 * page tables (one fault per 64 KiB), about 0.4x of the memory read
	 * rate with 4 KiB pages and on a par with it with 2 MiB pages. The
	 * kernel honours it where shmem THP is "advise" (or "within_size",
	 * "always"); under "never", or without THP, it fails or is ignored
	 * and the mapping works as before, so the result does not matter. */
	if (size >= IPC_HUGE_PAGE)
		(void)madvise(p, size, MADV_HUGEPAGE);
	/* A writer's mapping is allocated and mapped in full now (after
	 * the advice above, so that it gets huge pages), then touched: a
	 * page a commit touches first costs a page fault (page allocated,
	 * zeroed, mapped: 2-10 us in a VM) inside that message's latency,
	 * one per 4 KiB of ring in the first lap. And where the hypervisor
	 * shadows the guest's page tables, the first access through each
	 * page of a new mapping traps into it even when the page is mapped:
	 * on the VM of bench/results/2026-12-05, 4-6 us for the first store
	 * to a page, 0.5-1 us for the first load. Left to the first lap,
	 * those were one message in a hundred at 32 B: the spinning
	 * ping-pong's p99 at 3x its later laps', its p99.9 at 4x. The ring
	 * is all touched after one lap anyway.
	 * A reader does the same (mapping, then loads) for a ring of at
	 * most IPC_READ_TOUCH_MAX: about 1 ms per 8 MiB here, well under
	 * on bare metal. A bigger ring's subscriber may read little of it,
	 * and a late joiner that reads it all pays as it goes.
	 * Best effort: where the kernel lacks the advice or memory is
	 * short, pages come at first touch. Loads may map pages of a sparse
	 * segment a hostile writer sent: no more than reading it would. */
	if (writable) {
		(void)madvise(p, size, MADV_POPULATE_WRITE);
		touch_pages(p, size, 1);
	} else if (size <= IPC_READ_TOUCH_MAX) {
		(void)madvise(p, size, MADV_POPULATE_READ);
		touch_pages(p, size, 0);
	}
	*out = p;
	return 0;
}

void ipc_unmap(void *addr, size_t size)
{
	if (addr)
		munmap(addr, size);
}

void ipc_close(int fd)
{
	if (fd >= 0)
		close(fd);
}
