/*
 * memfd.c - memfd segments. Sealing against SHRINK and GROW means a mapping
 * can never fault with SIGBUS because a peer truncated the file;
 * FUTURE_WRITE means receivers can only ever map the data read-only.
 */
#include "memfd.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define IPC_HUGE_PAGE ((size_t)2 << 20)
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
	 * the advice above, so that it gets huge pages): a page a commit
	 * touches first costs a page fault (page allocated, zeroed,
	 * mapped: 2-10 us in a VM) inside that message's latency, one per
	 * 4 KiB of ring in the first lap, the spinning ping-pong's p99. The
	 * ring is all touched after one lap anyway. Best effort: where the
	 * kernel lacks it or memory is short, pages come at first touch. */
	if (writable)
		(void)madvise(p, size, MADV_POPULATE_WRITE);
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
