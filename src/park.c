/*
 * park.c - the eventcount protocol of park.h: announce, fence, re-check,
 * sleep (or nap), withdraw.
 */
#include "park.h"

#include "ipc/clock.h"

int park_begin(const struct park_hooks *h, void *ctx, struct ipc_waitset *ws,
	       int64_t *nap)
{
	int how = h->announce(ctx, ws);
	/* Step 2: orders the announcements just stored before the loads
	 * of the re-check; pairs with the waker's fence (park_waker_fence
	 * in sub_publish, the asked-for one in pubring_wake_from). */
	shm_fence_full();
	*nap = how & PARK_NAP ? PARK_FIRST_NAP_NS : 0;
	return h->has_work(ctx);
}

void park_end(const struct park_hooks *h, void *ctx)
{
	h->withdraw(ctx);
}

int park_wait(const struct park_hooks *h, void *ctx, struct ipc_waitset *ws,
	      int64_t deadline, uint64_t *fired, int max)
{
	int64_t step = 0; /* the current nap, 0 while none is needed */
	for (;;) {
		int64_t nap;
		if (park_begin(h, ctx, ws, &nap)) {
			park_end(h, ctx);
			return 0;
		}
		int64_t until = deadline;
		if (nap) {
			step = !step			    ? nap
			       : step < PARK_MAX_NAP_NS / 2 ? step * 2
							    : PARK_MAX_NAP_NS;
			int64_t t = ipc_now_ns() + step;
			until = t < deadline ? t : deadline;
		}
		int n = ipc_waitset_wait(ws, until, fired, max);
		park_end(h, ctx);
		if (n != 0 || until == deadline)
			return n;
		/* A nap ended with nothing fired: the whole protocol again,
		 * so that a wait that failed to arm is retried. */
	}
}
