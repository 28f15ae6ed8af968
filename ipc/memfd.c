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

/* Store to the byte at b the value it holds. It may be shared with a
 * peer that writes it: a compare-and-swap of the value with itself
 * changes no byte, whatever the peer does. Not an atomic OR of 0, which
 * compilers may turn into a load when its result goes unused (clang 14
 * does, volatile or not), and the store is the point. */
static void store_same(uint8_t *b)
{
	uint8_t v = __atomic_load_n(b, __ATOMIC_RELAXED);
	while (!__atomic_compare_exchange_n(b, &v, v, 1, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED))
		;
}

/* One access to every page through this mapping, a store if it is
 * writable. */
static void touch_pages(void *p, size_t size, int writable)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *b = p;
	for (size_t off = 0; off < size; off += page) {
		if (writable)
			store_same(b + off);
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
	 * and the mapping works as before, so the result does not matter.
	 * Before any ipc_prefault(), so that the pages it brings are huge. */
	if (size >= IPC_HUGE_PAGE)
		(void)madvise(p, size, MADV_HUGEPAGE);
	*out = p;
	return 0;
}

void ipc_prefault(void *p, size_t size, int writable)
{
	/* Populate (allocate and map) every page, then touch each through
	 * this mapping: a page a commit touches first costs a page fault
	 * (page allocated, zeroed, mapped: 2-10 us in a VM) inside that
	 * message's latency, one per 4 KiB of ring in the first lap. And
	 * where the hypervisor shadows the guest's page tables, the first
	 * access through each page of a new mapping traps into it even when
	 * the page is mapped: on the VM of bench/results/2026-12-05, 4-6 us
	 * for the first store to a page, 0.5-1 us for the first load. Left
	 * to the first lap, those were one message in a hundred at 32 B:
	 * the spinning ping-pong's p99 at 3x its later laps', its p99.9 at
	 * 4x. Best effort: only what the populate mapped is touched, so
	 * where the kernel lacks the advice (before 5.14) or memory is
	 * short, nothing is, and pages come at first use as they would
	 * have (a touch would fault them in now, inside the call, where
	 * running out of memory can only kill or raise SIGBUS). */
	int advice = writable ? MADV_POPULATE_WRITE : MADV_POPULATE_READ;
	if (madvise(p, size, advice) == 0)
		touch_pages(p, size, writable);
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
