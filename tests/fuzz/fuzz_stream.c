/*
 * fuzz_stream.c - libFuzzer harness for the real writer and reader: a
 * publisher and a subscriber of one stream in this process (through the
 * real handshake, memfds and mappings), driven by the input through the
 * public calls. fuzz_ring.c checks ring.h against a writer written after
 * pubring.h; this one runs pubring.h, pubring.c, pub.c and sub.c
 * themselves, so a change to the writer's discipline (zeroing ahead,
 * short commits, aborted claims, deferred frames, padding at the wrap,
 * the limits) is fuzzed as it is.
 *
 * The input picks the ring (4 to 32 KiB) and whether demand is by hand,
 * then is a list of operations: publish a message (committed plainly or
 * deferred, claimed longer than committed, with a flush while its claim
 * is open), claim and abort, flush,
 * serve, request, and read (poll or take, with a byte bound). Every
 * claim's bytes past what is committed, and an aborted claim's, are
 * filled with the header a frame would have at each position they
 * cover. Properties: the subscriber gets the committed messages only,
 * each once, in order, with its length, sequence and bytes, never more
 * than it requested, never a deferred one before a flush (an explicit
 * one, or the one of a serve, a plain commit, or a claim that finds its
 * demand or room used up); and once the
 * publisher has flushed and the reader drained, nothing committed is
 * left behind. A failed property aborts; the sanitizers watch the rest.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crs/crs.h"
#include "src/frame.h"
#include "src/pub.h"

#define MAX_KEPT 65536 /* lengths of messages not yet read, circular */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct model {
	crs_pub *pub;
	crs_sub *sub;
	int manual;	     /* demand by hand (prefetch 0) */
	uint64_t committed;  /* messages committed (deferred ones too) */
	uint64_t visible;    /* of them, the ones readers may see now */
	uint64_t read;	     /* messages the subscriber got */
	uint64_t requested;  /* manual: demand asked for */
	uint32_t lens[MAX_KEPT];
};

static struct model m;
static char dir[] = "/tmp/crs-fuzz-stream-XXXXXX";

static void remove_dir(void)
{
	rmdir(dir); /* empty: every stream was closed */
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (!getenv("CRS_DIR")) {
		if (!mkdtemp(dir))
			abort();
		setenv("CRS_DIR", dir, 1);
		atexit(remove_dir);
	}
	return 0;
}

static uint8_t pattern(uint64_t seq, uint64_t j)
{
	return (uint8_t)(seq * 131 + j);
}

/* Fill bytes [from, to) of the payload at the publisher's position with
 * the header a frame would have at each position they cover. */
static void plant_headers(uint8_t *buf, uint64_t from, uint64_t to)
{
	uint64_t pos = m.pub->ring.pos + CRS_FRAME_HEADER;
	from = (from + 7) & ~(uint64_t)7;
	for (uint64_t off = from; off + 8 <= to; off += 8) {
		uint64_t fake = frame_word(pos + off, (uint32_t)(off & 63));
		memcpy(buf + off, &fake, sizeof(fake));
	}
}

static void check_msg(const struct crs_msg *msg)
{
	if (m.read >= m.visible || msg->seq != m.read ||
	    msg->len != m.lens[m.read % MAX_KEPT])
		abort();
	const uint8_t *p = msg->data;
	for (uint64_t j = 0; j < msg->len; j++)
		if (p[j] != pattern(m.read, j))
			abort();
	m.read++;
}

/* Read up to max messages (take: in batches of at most batch, with a
 * byte bound); returns how many came. */
static uint64_t read_some(uint64_t max, int take, size_t batch,
			  size_t max_bytes)
{
	uint64_t got = 0;
	struct crs_msg msgs[16];
	while (got < max) {
		int n = take ? crs_sub_take(m.sub, msgs, batch, max_bytes)
			     : crs_sub_poll(m.sub, msgs);
		if (n < 0)
			abort(); /* nothing ends this stream */
		if (n == 0)
			break;
		for (int i = 0; i < n; i++)
			check_msg(&msgs[i]);
		crs_sub_release(m.sub);
		got += (uint64_t)n;
	}
	if (m.manual && m.read > m.requested)
		abort();
	return got;
}

/* Everything visible and asked for is readable now. */
static void drain_all(void)
{
	read_some(UINT64_MAX, 0, 1, 0);
	uint64_t want = m.visible;
	if (m.manual && m.requested < want)
		want = m.requested;
	if (m.read != want)
		abort();
}

/* How publish() ends its claim: operations 0-3 of the input. */
enum how { PLAIN, FLUSH_OPEN, DEFERRED, ABORTED };

/* Claim len (claimed extra bytes more), fill, and commit it (plainly,
 * after a flush with the claim open, or deferred) or abort it. A claim
 * refused for demand or room is dropped. */
static void publish(uint32_t len, uint32_t extra, enum how how)
{
	uint32_t max = m.pub->ring.max_message;
	uint32_t claimed = len + extra <= max ? len + extra : len;
	/* A claim that finds the demand or room it knows of used up
	 * flushes before it looks again (claim_slow in pub.c). */
	uint64_t pad;
	struct pub_ring *r = &m.pub->ring;
	if (pubring_check(r, pubring_need(r, claimed, &pad)))
		m.visible = m.committed;
	void *buf;
	int err = crs_pub_claim(m.pub, claimed, &buf);
	if (err == -CRS_ENODEMAND || err == -CRS_ENOROOM)
		return;
	if (err)
		abort();
	uint8_t *p = buf;
	if (how == ABORTED) {
		plant_headers(p, 0, claimed);
		crs_pub_abort(m.pub);
		return;
	}
	for (uint32_t j = 0; j < len; j++)
		p[j] = pattern(m.committed, j);
	plant_headers(p, len, claimed);
	if (how == FLUSH_OPEN) { /* a flush (and its tick) with the claim open */
		crs_pub_flush(m.pub);
		m.visible = m.committed;
	}
	m.lens[m.committed % MAX_KEPT] = len;
	err = how == DEFERRED ? crs_pub_commit_more(m.pub, len)
			      : crs_pub_commit(m.pub, len);
	if (err)
		abort();
	m.committed++;
	if (how != DEFERRED)
		m.visible = m.committed; /* a plain commit flushes first */
	if (m.committed - m.read >= MAX_KEPT)
		abort(); /* the ring holds far fewer */
}

/* A publisher and a subscriber of a fresh stream, connected. */
static void open_stream(uint64_t ring_bytes, int manual)
{
	static unsigned serial;
	char name[64];
	snprintf(name, sizeof(name), "fz-%d-%u", (int)getpid(), serial++);
	struct crs_pub_opts po;
	crs_pub_opts_init(&po);
	po.ring_bytes = ring_bytes;
	if (crs_pub_create(name, &po, &m.pub))
		abort();
	struct crs_sub_opts so;
	crs_sub_opts_init(&so);
	so.async = 1;
	if (manual)
		so.prefetch = 0;
	if (crs_sub_open(name, &so, &m.sub))
		abort();
	struct crs_msg msg;
	for (int i = 0; i < 1000000 && crs_pub_subscribers(m.pub) == 0; i++) {
		if (crs_pub_serve(m.pub) < 0 || crs_sub_poll(m.sub, &msg) < 0)
			abort();
	}
	/* Attached on its side too: its next poll finds the ring. */
	for (int i = 0; i < 1000 && crs_sub_poll(m.sub, &msg) == 0 &&
			crs_sub_stream_id(m.sub) == 0;
	     i++)
		crs_pub_serve(m.pub);
	if (crs_pub_subscribers(m.pub) != 1 || !crs_sub_stream_id(m.sub))
		abort();
	m.manual = manual;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	memset(&m, 0, sizeof(m));
	open_stream(4096u << (data[0] % 4), data[1] & 1);
	uint32_t max = m.pub->ring.max_message;
	/* Three bytes an operation: the kind (low 3 bits) and its
	 * arguments. */
	for (size_t i = 2; i + 3 <= size; i += 3) {
		uint8_t a = data[i], b = data[i + 1], c = data[i + 2];
		uint32_t x = (uint32_t)(b | c << 8);
		/* Mostly small messages: the ones zeroed ahead of. */
		uint32_t len = (a & 0x80) ? x % (max + 1) : x % 129;
		uint32_t extra = ((a >> 3) & 15) * 8;
		switch (a & 7) {
		case PLAIN:
		case FLUSH_OPEN:
		case DEFERRED:
		case ABORTED:
			publish(len, extra, (enum how)(a & 7));
			break;
		case 4:
			crs_pub_flush(m.pub);
			m.visible = m.committed;
			break;
		case 5:
			if (crs_pub_serve(m.pub) < 0)
				abort();
			m.visible = m.committed; /* serving flushes */
			break;
		case 6:
			if (m.manual) {
				if (crs_sub_request(m.sub, b % 64 + 1))
					abort();
				m.requested += b % 64 + 1;
			}
			break;
		default:
			read_some(b % 64 + 1, c & 1, (size_t)(c >> 1) % 16 + 1,
				  (c & 0x80) ? (size_t)b * 4 : 0);
			break;
		}
	}
	crs_pub_flush(m.pub);
	m.visible = m.committed;
	drain_all();
	crs_sub_close(m.sub);
	crs_pub_close(m.pub);
	return 0;
}
