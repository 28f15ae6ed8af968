/*
 * test_summary.c - the per-round ratios of crs-bench pair only samples
 * measured in one VM state: the probes around both sides within
 * STATE_SPREAD of each other. Cells with chosen probe figures go through
 * the same functions the table, the JSON and the targets use
 * (tp_ratio_n, tp_ratio, lat_ratio_n, targets); no measurement runs.
 */
#include <stdlib.h>

#include "bench.h"

static int failures;

#define CHECK(cond)                                                        \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "%s:%d: FAIL: %s\n", __FILE__,     \
				__LINE__, #cond);                          \
			failures++;                                        \
		}                                                          \
	} while (0)

static int near(double a, double b)
{
	return a - b < 1e-9 && b - a < 1e-9;
}

/* A fast-state probe, a slow-state one, one taken while the host ran the
 * two vCPUs in turns (it cannot see the state). */
enum { FAST, FAST2, SLOW, SLOW2, TURNS };
static const double probe_rtt[] = { 80, 95, 320, 335, 5000 };
static const double probe_cap[] = { 2.0, 1.9, 2.0, 1.9, 1.0 };

static void tp_round(struct tp_cell *c, double rate, int before, int after)
{
	struct tp_sample *s = &c->s[c->n++];
	memset(s, 0, sizeof(*s));
	s->ok = 1;
	s->rate = rate;
	s->pp_before = probe_rtt[before];
	s->cap_before = probe_cap[before];
	s->pp_after = probe_rtt[after];
	s->cap = probe_cap[after];
}

static void lat_round(struct lat_cell *c, double p50, int before, int after)
{
	struct lat_sample *s = &c->s[c->n++];
	memset(s, 0, sizeof(*s));
	s->ok = 1;
	s->p50 = p50;
	s->pp_before = probe_rtt[before];
	s->cap_before = probe_cap[before];
	s->pp_after = probe_rtt[after];
	s->cap = probe_cap[after];
}

static void test_probes_same_state(void)
{
	CHECK(probes_same_state(NULL, 0));
	CHECK(probes_same_state((double[]){ 80, 95, 110 }, 3));
	CHECK(probes_same_state((double[]){ 300, 340, 320 }, 3));
	CHECK(probes_same_state((double[]){ 80, 80 * STATE_SPREAD }, 2));
	CHECK(!probes_same_state((double[]){ 80, 80 * STATE_SPREAD + 1 }, 2));
	CHECK(!probes_same_state((double[]){ 80, 95, 330, 90 }, 4));
	CHECK(!probes_same_state((double[]){ 330, 85 }, 2));
	CHECK(!probes_same_state((double[]){ 0, 0 }, 2));
	CHECK(!probes_same_state((double[]){ -1, 80 }, 2));
}

/* Both spinning: only rounds with all four probes in one state pair. */
static void test_tp_pairs(void)
{
	static struct tp_cell a, b;
	a = (struct tp_cell){ .name = "a", .spins = 1, .size = 32 };
	b = (struct tp_cell){ .name = "b", .spins = 1, .size = 32 };
	tp_round(&a, 100, FAST, FAST2); /* both fast: 0.5 */
	tp_round(&b, 200, FAST2, FAST);
	tp_round(&a, 100, FAST, FAST); /* a fast, b slow: 2.5, not paired */
	tp_round(&b, 40, SLOW, SLOW2);
	tp_round(&a, 30, SLOW2, SLOW); /* both slow: 0.6 */
	tp_round(&b, 50, SLOW, SLOW);
	tp_round(&a, 30, FAST, SLOW); /* a flipped in its window: 1.5 */
	tp_round(&b, 20, SLOW, SLOW);
	int n = -1;
	double r = tp_ratio_n(&a, &b, 1, &n);
	CHECK(n == 2);
	CHECK(near(r, 0.55));
	CHECK(near(tp_ratio(&a, &b), 0.55));
	/* Each round is still clean on its own: the cells' figures keep
	 * the filter they had. */
	CHECK(tp_nclean(&a) == 4 && tp_nclean(&b) == 4);
	tp_ratio_n(&a, &b, 0, &n);
	CHECK(n == 4);

	/* No same-state pair: tp_ratio falls back to all rounds. */
	a.n = b.n = 0;
	tp_round(&a, 100, FAST, FAST);
	tp_round(&b, 40, SLOW, SLOW);
	tp_round(&a, 30, SLOW, SLOW);
	tp_round(&b, 100, FAST, FAST2);
	r = tp_ratio_n(&a, &b, 1, &n);
	CHECK(n == 0);
	CHECK(near(tp_ratio(&a, &b), (2.5 + 0.3) / 2));
}

/* A blocking cell's probe taken in turns cannot see the state and does
 * not break a pair; its probes that can see the state still count. */
static void test_tp_blocking(void)
{
	static struct tp_cell s, k;
	s = (struct tp_cell){ .name = "spin", .spins = 1, .size = 32 };
	k = (struct tp_cell){ .name = "block", .spins = 0, .size = 32 };
	tp_round(&s, 100, FAST, FAST2);
	tp_round(&k, 50, FAST, TURNS); /* 2, pairs */
	tp_round(&s, 100, FAST, FAST2);
	tp_round(&k, 25, SLOW, TURNS); /* 4, slow probe: not paired */
	int n = -1;
	double r = tp_ratio_n(&s, &k, 1, &n);
	CHECK(n == 1);
	CHECK(near(r, 2));
}

static void test_lat_pairs(void)
{
	static struct lat_cell a, b;
	a = (struct lat_cell){ .name = "a", .mode = "spin", .spins = 1 };
	b = (struct lat_cell){ .name = "b", .mode = "spin", .spins = 1 };
	lat_round(&a, 300, FAST, FAST2); /* 1.5 */
	lat_round(&b, 200, FAST2, FAST2);
	lat_round(&a, 300, FAST, FAST); /* b slow: 0.3, not paired */
	lat_round(&b, 1000, SLOW2, SLOW);
	lat_round(&a, 900, SLOW, SLOW2); /* 0.9 */
	lat_round(&b, 1000, SLOW2, SLOW);
	int n = -1;
	double r = lat_ratio_n(&a, &b, LAT_P50, 1, &n);
	CHECK(n == 2);
	CHECK(near(r, 1.2));
	CHECK(near(lat_ratio(&a, &b, LAT_P50), 1.2));
	CHECK(lat_nclean(&a) == 3);
}

/* The first throughput target divides by the faster of two baselines:
 * all three samples of a round must be in one state. */
static void test_target_triple(void)
{
	static struct tp_cell cells[3];
	struct tp_cell *d = &cells[0], *b = &cells[1], *i = &cells[2];
	*d = (struct tp_cell){ .name = "crs-defaults", .spins = 1, .size = 32 };
	*b = (struct tp_cell){ .name = "bare-ring", .spins = 1, .size = 32 };
	*i = (struct tp_cell){ .name = "inband-ring", .spins = 1, .size = 32 };
	tp_round(d, 100, FAST, FAST2); /* 100 / max(250, 200) = 0.4 */
	tp_round(b, 250, FAST2, FAST);
	tp_round(i, 200, FAST, FAST);
	tp_round(d, 100, FAST, FAST); /* inband slow: not counted */
	tp_round(b, 250, FAST, FAST);
	tp_round(i, 30, SLOW, SLOW);
	tp_round(d, 20, SLOW, SLOW2); /* 20 / 40 = 0.5 */
	tp_round(b, 40, SLOW2, SLOW);
	tp_round(i, 30, SLOW, SLOW);
	struct config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.sizes[0] = 32;
	cfg.nsizes = 1;
	struct results res;
	memset(&res, 0, sizeof(res));
	res.tp = cells;
	res.ntp = 3;
	struct target t[8];
	int nt = targets(&cfg, &res, t, 8);
	CHECK(nt >= 1);
	CHECK(strstr(t[0].what, "crs-defaults / faster of") != NULL);
	CHECK(t[0].rounds == 2);
	CHECK(near(t[0].value, 0.45));
}

int main(void)
{
	test_probes_same_state();
	test_tp_pairs();
	test_tp_blocking();
	test_lat_pairs();
	test_target_triple();
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	return failures ? 1 : 0;
}
