/*
 * test_credit.c - Reactive Streams demand arithmetic (src/credit.h):
 * saturation at CRS_UNBOUNDED, limits, outstanding demand, and the
 * prefetch replenish threshold (RxJava's limit = p - p/4).
 */
#include "util.h"

#include "src/credit.h"

static void test_add_plain(void **state)
{
	(void)state;
	assert_int_equal(credit_add(0, 0), 0);
	assert_int_equal(credit_add(0, 1), 1);
	assert_int_equal(credit_add(5, 7), 12);
	assert_int_equal(credit_add(1ULL << 40, 1ULL << 40), 1ULL << 41);
}

static void test_add_unbounded_absorbs(void **state)
{
	(void)state;
	const uint64_t addends[] = { 0, 1, 2, 128, 1ULL << 32, 1ULL << 63,
				     CRS_UNBOUNDED - 1, CRS_UNBOUNDED };
	for (size_t i = 0; i < sizeof(addends) / sizeof(addends[0]); i++) {
		/* Unbounded + anything stays unbounded, on either side. */
		assert_true(credit_add(CRS_UNBOUNDED, addends[i]) ==
			    CRS_UNBOUNDED);
		if (addends[i])
			assert_true(credit_add(addends[i], CRS_UNBOUNDED) ==
				    CRS_UNBOUNDED);
	}
	assert_true(credit_add(0, CRS_UNBOUNDED) == CRS_UNBOUNDED);
}

static void test_add_saturates_near_max(void **state)
{
	(void)state;
	/* Sums that would wrap saturate instead. */
	assert_true(credit_add(CRS_UNBOUNDED - 1, 1) == CRS_UNBOUNDED);
	assert_true(credit_add(CRS_UNBOUNDED - 1, 2) == CRS_UNBOUNDED);
	assert_true(credit_add(CRS_UNBOUNDED - 5, 3) == CRS_UNBOUNDED - 2);
	assert_true(credit_add(1ULL << 63, 1ULL << 63) == CRS_UNBOUNDED);
	assert_true(credit_add((1ULL << 63) + 1, 1ULL << 63) ==
		    CRS_UNBOUNDED);
	assert_true(credit_add(CRS_UNBOUNDED - 1, CRS_UNBOUNDED - 1) ==
		    CRS_UNBOUNDED);

	/* Exhaustive around the edge: never wraps, never below the sum. */
	for (uint64_t a = 0; a < 64; a++) {
		for (uint64_t b = 0; b < 64; b++) {
			uint64_t x = CRS_UNBOUNDED - a, y = b;
			uint64_t s = credit_add(x, y);
			assert_true(s >= x && s >= y);
			if (b <= a)
				assert_true(s == x + y);
			else
				assert_true(s == CRS_UNBOUNDED);
		}
	}

	/* Repeated requests accumulate and then stay saturated. */
	uint64_t total = 0;
	for (int i = 0; i < 70; i++)
		total = credit_add(total, 1ULL << 62);
	assert_true(total == CRS_UNBOUNDED);
	total = credit_add(total, 1);
	assert_true(total == CRS_UNBOUNDED);
}

static void test_limit(void **state)
{
	(void)state;
	assert_int_equal(credit_seq_limit(0, 0), 0);
	assert_int_equal(credit_seq_limit(0, 128), 128);
	assert_int_equal(credit_seq_limit(1000, 5), 1005);
	assert_true(credit_seq_limit(1000, CRS_UNBOUNDED) == CRS_UNBOUNDED);
	assert_true(credit_seq_limit(CRS_UNBOUNDED - 3, 10) == CRS_UNBOUNDED);
}

static void test_outstanding(void **state)
{
	(void)state;
	assert_int_equal(credit_outstanding(0, 0), 0);
	assert_int_equal(credit_outstanding(10, 0), 10);
	assert_int_equal(credit_outstanding(10, 7), 3);
	assert_int_equal(credit_outstanding(10, 10), 0);
	/* Past the limit (cannot happen, but must not wrap). */
	assert_int_equal(credit_outstanding(10, 11), 0);
	assert_int_equal(credit_outstanding(0, UINT64_MAX - 1), 0);
	/* Unbounded stays unbounded whatever has been published. */
	assert_true(credit_outstanding(CRS_UNBOUNDED, 0) == CRS_UNBOUNDED);
	assert_true(credit_outstanding(CRS_UNBOUNDED, 1ULL << 50) ==
		    CRS_UNBOUNDED);
	assert_true(credit_outstanding(CRS_UNBOUNDED, CRS_UNBOUNDED - 1) ==
		    CRS_UNBOUNDED);
}

static void test_replenish(void **state)
{
	(void)state;
	assert_int_equal(credit_replenish(128), 96);
	assert_int_equal(credit_replenish(4), 3);
	assert_int_equal(credit_replenish(1), 1);
	assert_int_equal(credit_replenish(2), 2);
	assert_int_equal(credit_replenish(3), 3);
	assert_int_equal(credit_replenish(16), 12);
	assert_int_equal(credit_replenish(256), 192);
	/* Always within 1..prefetch for any prefetch >= 1. */
	for (uint32_t p = 1; p < 5000; p++) {
		uint32_t r = credit_replenish(p);
		assert_true(r >= 1 && r <= p);
		assert_int_equal(r, p - p / 4);
	}
	uint32_t big = credit_replenish(UINT32_MAX);
	assert_int_equal(big, UINT32_MAX - UINT32_MAX / 4);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_add_plain),
		TU_TEST(test_add_unbounded_absorbs),
		TU_TEST(test_add_saturates_near_max),
		TU_TEST(test_limit),
		TU_TEST(test_outstanding),
		TU_TEST(test_replenish),
	};
	return cmocka_run_group_tests_name("credit", tests, NULL, NULL);
}
