/*
 * histo.c - a small log-linear latency histogram (HdrHistogram-style).
 *
 * Values (ns) below 2 * HISTO_SUB are counted exactly. Above, each power
 * of two [2^e, 2^(e+1)) is cut into HISTO_SUB equal buckets, so a bucket is
 * at most 1/HISTO_SUB (1.6%) of its values wide. Bucket index for v >= 128:
 * e = floor(log2 v), shift = e - 6, index = 64 * (e - 6) + (v >> shift),
 * which continues the exact range without a gap (v = 128 -> 128). 36 * 64
 * buckets reach 2^41 ns (about 37 minutes); larger values land in the last.
 * A percentile is reported as the highest value its bucket can hold (as
 * HdrHistogram does), min, max and mean exactly.
 */
#include "bench.h"

static unsigned bucket_of(uint64_t v)
{
	if (v < 2 * HISTO_SUB)
		return (unsigned)v;
	unsigned e = 63 - (unsigned)__builtin_clzll(v);
	unsigned shift = e - 6;
	uint64_t idx = (uint64_t)HISTO_SUB * shift + (v >> shift);
	return idx >= HISTO_BUCKETS ? HISTO_BUCKETS - 1 : (unsigned)idx;
}

/* The highest value that falls into bucket i. */
static uint64_t bucket_top(unsigned i)
{
	if (i < 2 * HISTO_SUB)
		return i;
	unsigned shift = i / HISTO_SUB - 1;
	uint64_t m = i - (uint64_t)HISTO_SUB * shift; /* 64..127 */
	return ((m + 1) << shift) - 1;
}

void histo_reset(struct histo *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

void histo_add(struct histo *h, uint64_t ns)
{
	h->n[bucket_of(ns)]++;
	h->count++;
	h->sum += (double)ns;
	if (ns < h->min)
		h->min = ns;
	if (ns > h->max)
		h->max = ns;
}

void histo_merge(struct histo *dst, const struct histo *src)
{
	if (!src->count)
		return;
	for (unsigned i = 0; i < HISTO_BUCKETS; i++)
		dst->n[i] += src->n[i];
	dst->count += src->count;
	dst->sum += src->sum;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
}

uint64_t histo_pct(const struct histo *h, double pct)
{
	if (!h->count)
		return 0;
	if (pct >= 100)
		return h->max;
	uint64_t want = (uint64_t)(pct / 100.0 * (double)h->count + 0.5);
	if (want < 1)
		want = 1;
	uint64_t seen = 0;
	for (unsigned i = 0; i < HISTO_BUCKETS; i++) {
		seen += h->n[i];
		if (seen >= want) {
			uint64_t top = bucket_top(i);
			return top > h->max ? h->max : top < h->min ? h->min : top;
		}
	}
	return h->max;
}

double histo_mean(const struct histo *h)
{
	return h->count ? h->sum / (double)h->count : 0;
}
