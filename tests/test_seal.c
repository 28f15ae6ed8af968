/*
 * test_seal.c - a subscriber cannot write to, grow or shrink the data
 * segment it maps (the memfd is sealed SHRINK | GROW | FUTURE_WRITE |
 * SEAL): writable shared mappings, mprotect of its read-only mapping,
 * ftruncate, fallocate (grow and punch), pwrite/write, reopening through
 * /proc, writing through /proc/self/mem, madvise(MADV_REMOVE) and adding
 * seals all fail. A private copy-on-write mapping is allowed but changes
 * nobody's data. Its control segment cannot be resized either. After all
 * that the publisher keeps publishing and both subscribers keep
 * receiving intact messages.
 */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "src/layout.h"

#define MAXLEN 300

static int failures;

#define MUST_FAIL(what, expr)                                               \
	do {                                                                \
		errno = 0;                                                  \
		long r_ = (long)(expr);                                     \
		if (r_ != -1) {                                             \
			fprintf(stderr, "[seal] %s succeeded (%ld)\n", what, r_); \
			failures++;                                         \
		}                                                           \
	} while (0)

/* The subscriber's own read-only mapping of the data segment. */
static void *find_mapping(const char *name, size_t *len)
{
	FILE *f = fopen("/proc/self/maps", "r");
	CHECK(f);
	char line[512], want[128];
	snprintf(want, sizeof(want), "memfd:%s ", name);
	void *addr = NULL;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8];
		if (!strstr(line, want) ||
		    sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3)
			continue;
		CHECK(perms[1] == '-'); /* mapped read-only */
		addr = (void *)lo;
		*len = hi - lo;
		break;
	}
	fclose(f);
	return addr;
}

static void attack(const char *name)
{
	char want[128];
	snprintf(want, sizeof(want), "memfd:%s ", name);
	int fd = tu_find_fd(want);
	CHECK(fd >= 0);
	struct stat st;
	CHECK_EQ(fstat(fd, &st), 0);
	size_t size = (size_t)st.st_size;
	CHECK(size >= CRS_RING_OFFSET + CRS_RING_MIN);

	int seals = fcntl(fd, F_GET_SEALS);
	int need = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE |
		   F_SEAL_SEAL;
	CHECK_EQ(seals & need, need);

	/* New writable shared mappings. */
	void *w = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	MUST_FAIL("mmap(PROT_WRITE, MAP_SHARED)",
		  w == MAP_FAILED ? -1 : 0);
	w = mmap(NULL, 4096, PROT_WRITE, MAP_SHARED, fd, CRS_RING_OFFSET);
	MUST_FAIL("mmap(PROT_WRITE) of the ring", w == MAP_FAILED ? -1 : 0);
	/* A read-only one cannot be made writable. */
	void *ro = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(ro != MAP_FAILED);
	MUST_FAIL("mprotect(new read-only map, PROT_WRITE)",
		  mprotect(ro, size, PROT_READ | PROT_WRITE));
	MUST_FAIL("madvise(MADV_REMOVE)", madvise(ro, 4096, MADV_REMOVE));
	munmap(ro, size);
	/* Nor can the library's own mapping. */
	size_t mlen = 0;
	void *mine = find_mapping(name, &mlen);
	CHECK(mine != NULL);
	MUST_FAIL("mprotect(subscriber's map, PROT_WRITE)",
		  mprotect(mine, mlen, PROT_READ | PROT_WRITE));
	MUST_FAIL("madvise(subscriber's map, MADV_REMOVE)",
		  madvise(mine, 4096, MADV_REMOVE));

	/* Size changes. */
	MUST_FAIL("ftruncate(grow)", ftruncate(fd, (off_t)size * 2));
	MUST_FAIL("ftruncate(shrink)", ftruncate(fd, (off_t)size / 2));
	MUST_FAIL("ftruncate(0)", ftruncate(fd, 0));
	MUST_FAIL("fallocate(grow)", fallocate(fd, 0, (off_t)size, 4096));
	MUST_FAIL("fallocate(punch hole)",
		  fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			    CRS_RING_OFFSET, 4096));
	MUST_FAIL("fallocate(zero range)",
		  fallocate(fd, FALLOC_FL_ZERO_RANGE, CRS_RING_OFFSET, 4096));

	/* Writes through the fd and through a reopened fd. */
	MUST_FAIL("pwrite", pwrite(fd, "x", 1, CRS_RING_OFFSET));
	MUST_FAIL("write", write(fd, "x", 1));
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int rw = open(path, O_RDWR);
	if (rw >= 0) {
		MUST_FAIL("pwrite through /proc reopen",
			  pwrite(rw, "x", 1, CRS_RING_OFFSET));
		w = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0);
		MUST_FAIL("mmap(PROT_WRITE) through /proc reopen",
			  w == MAP_FAILED ? -1 : 0);
		MUST_FAIL("ftruncate through /proc reopen", ftruncate(rw, 0));
		close(rw);
	}
	/* Writing through /proc/self/mem bypasses page protections only
	 * for private mappings. */
	int mem = open("/proc/self/mem", O_RDWR);
	if (mem >= 0) {
		uint64_t junk = 0x4242424242424242ULL;
		MUST_FAIL("pwrite(/proc/self/mem) into the ring",
			  pwrite(mem, &junk, 8,
				 (off_t)(uintptr_t)mine + CRS_RING_OFFSET));
		MUST_FAIL("pwrite(/proc/self/mem) into the header",
			  pwrite(mem, &junk, 8, (off_t)(uintptr_t)mine));
		close(mem);
	}

	/* Seals cannot be added (F_SEAL_SEAL) or removed. */
	MUST_FAIL("F_ADD_SEALS(WRITE)", fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE));
	CHECK_EQ(fcntl(fd, F_GET_SEALS), seals);

	/* A private copy may be scribbled on: it changes nothing shared. */
	void *priv = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd,
			  0);
	if (priv != MAP_FAILED) {
		memset((uint8_t *)priv + CRS_RING_OFFSET, 0x77,
		       size - CRS_RING_OFFSET);
		memset(priv, 0x66, CRS_RING_OFFSET);
		CHECK(((const uint8_t *)mine)[0] != 0x66);
		munmap(priv, size);
	}

	/* The control segment: writable, but its size is fixed. */
	int cfd = tu_find_fd("memfd:crs-ctl");
	CHECK(cfd >= 0);
	MUST_FAIL("ftruncate(control, grow)", ftruncate(cfd, 1 << 20));
	MUST_FAIL("ftruncate(control, shrink)", ftruncate(cfd, 0));
	MUST_FAIL("fallocate(control, grow)",
		  fallocate(cfd, 0, CRS_CTL_SIZE, 4096));
}

static int child_attacker(void *p, int chan)
{
	const char *name = p;
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(name, 128, &sub), 0);
	CHECK_EQ(tu_send(chan, TU_READY, 0), 0);
	struct crs_msg m;
	uint64_t seq = 0;
	for (; seq < 50; seq++) {
		CHECK_EQ(tu_sub_next(sub, &m, 10000), 1);
		CHECK_EQ(m.seq, seq);
		CHECK_EQ(tu_verify(m.data, m.len, seq), -1);
	}
	attack(name);
	CHECK_EQ(failures, 0);
	CHECK_EQ(tu_send(chan, 1, 0), 0);
	for (; seq < 1050; seq++) {
		CHECK_EQ(tu_sub_next(sub, &m, 10000), 1);
		CHECK_EQ(m.seq, seq);
		CHECK_EQ(m.len, tu_len(seq, MAXLEN));
		CHECK_EQ(tu_verify(m.data, m.len, seq), -1);
	}
	CHECK_EQ(tu_sub_next(sub, &m, 10000), -CRS_EEND);
	CHECK_EQ(crs_sub_end(sub)->code, 0);
	crs_sub_close(sub);
	return 0;
}

static void test_subscriber_cannot_modify_data(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "seal");
	int ac;
	pid_t ap = tu_spawn(child_attacker, name, &ac, 60);
	struct tu_agent_arg arg = { name, 128, 0, MAXLEN };
	struct tu_agents good;
	assert_int_equal(tu_agents_start(&good, 1, &arg), 0);
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.ring_bytes = 1 << 14;
	o.max_message = 0;
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, &o, &pub), 0);
	assert_int_equal(tu_agents_ready(&good, pub), 0);
	assert_int_equal(crs_pub_wait_subscribers(pub, 2, 10000), 0);
	assert_int_equal(tu_expect(ac, TU_READY, NULL, 10000), 0);
	assert_int_equal(tu_agents_send(&good, TU_CMD_RECV, 1050), 0);
	uint64_t seq = 0;
	for (; seq < 50; seq++)
		assert_int_equal(tu_pub_send(pub, seq, tu_len(seq, MAXLEN),
					     10000),
				 0);
	/* The attack happens while we keep serving. */
	uint64_t tag;
	int r;
	int64_t deadline = tu_now_ms() + 20000;
	while ((r = tu_recv(ac, &tag, NULL, 1)) == -ETIMEDOUT &&
	       tu_now_ms() < deadline)
		crs_pub_serve(pub);
	assert_int_equal(r, 0);
	assert_int_equal(crs_pub_subscribers(pub), 2);
	for (; seq < 1050; seq++)
		assert_int_equal(tu_pub_send(pub, seq, tu_len(seq, MAXLEN),
					     10000),
				 0);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(tu_agents_collect(&good, NULL, 20000), 0);
	assert_int_equal(tu_agents_cmd(&good, TU_CMD_END, 0, NULL), 0);
	assert_int_equal(tu_serve_wait_child(pub, ap, 20000), 0);
	assert_int_equal(tu_agents_finish(&good, pub), 0);
	close(ac);
	crs_pub_close(pub);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_subscriber_cannot_modify_data),
	};
	return cmocka_run_group_tests_name("seal", tests, NULL, NULL);
}
