/*
 * credit.h - Reactive Streams demand arithmetic. Demand is a monotonic
 * total per subscriber that saturates at CRS_UNBOUNDED and never wraps.
 */
#ifndef CRS_CREDIT_H
#define CRS_CREDIT_H

#include <stdint.h>

#include "crs/crs.h"

/* total + n, saturating at CRS_UNBOUNDED (which absorbs any addition). */
static inline uint64_t credit_add(uint64_t total, uint64_t n)
{
	return n > CRS_UNBOUNDED - total ? CRS_UNBOUNDED : total + n;
}

/* Highest publisher sequence (exclusive) a subscriber that joined at
 * join_seq and requested `requested` in total may be sent. */
static inline uint64_t credit_seq_limit(uint64_t join_seq, uint64_t requested)
{
	return credit_add(join_seq, requested);
}

/* Outstanding demand at publisher sequence seq given a limit. */
static inline uint64_t credit_outstanding(uint64_t limit, uint64_t seq)
{
	if (limit == CRS_UNBOUNDED)
		return CRS_UNBOUNDED;
	return limit > seq ? limit - seq : 0;
}

/* The replenish threshold for a prefetch: request again once this many
 * of the batch have been consumed (75%, as RxJava's limit = p - p/4). */
static inline uint32_t credit_replenish(uint32_t prefetch)
{
	uint32_t limit = prefetch - prefetch / 4;
	return limit ? limit : 1;
}

#endif
