/*
 * share.c - a team's loop over units [0, n), shared out with stealing: each
 * thread starts on its own contiguous share (the one a static split gives
 * it) and takes runs of units from its front; a thread whose share is done
 * takes the back half of the largest share left, and goes on with that.
 *
 * Needs GCC's __atomic builtins.  conv_dw.c shares its rows so.
 *
 * Why: the two vCPUs of a cloud machine do not run at one speed.  Another
 * tenant on a core's sibling hyperthread, or in its caches, slows it by
 * 10-50% for a while -- a loop of arithmetic alone on each of a team of two
 * took 8.4 us on one vCPU and 12.5 on the other, the slower one following
 * the vCPU when the threads were pinned the other way round (2026-11-29)
 * -- and a static split then leaves the faster thread waiting at the join:
 * MobileNetV3's depthwise layers at two threads ended their two shares 6-10
 * us apart on average, of 40-70 us.  Stealing from the back keeps what a
 * static split is good for: a thread's units stay contiguous and are the
 * ones its core wrote in the layer before, but for the stolen tail.
 * (OpenMP's dynamic schedule hands every chunk out from one shared counter,
 * a cache line that would cross between the cores at each chunk.)
 *
 * A share is {lo, hi} packed into one 64-bit word (offsets from the first
 * unit), so the owner's take from the front and a thief's from the back are
 * each one compare-and-swap of the same word and never hand out a unit
 * twice; only the owner of an empty share writes it otherwise (its steal).
 */
#include <stdbool.h>
#include <stdint.h>

#include "runtime/internal.h"

#define SHARE_PACK(lo, hi) ((uint64_t)(hi) << 32 | (uint32_t)(lo))
#define SHARE_LO(v) ((int64_t)(uint32_t)(v))
#define SHARE_HI(v) ((int64_t)((v) >> 32))

bool
taprt_share_init(taprt_share *sh, int nt, const int64_t *bound)
{
	if (nt < 1 || nt > TAPRT_SHARE_MAX || bound[nt] - bound[0] > UINT32_MAX)
		return false;
	for (int i = 0; i < nt; i++)
		if (bound[i] > bound[i + 1])
			return false;
	sh->nt = nt;
	sh->base = bound[0];
	for (int i = 0; i < nt; i++)
		__atomic_store_n(&sh->slot[i].r,
		    SHARE_PACK(bound[i] - sh->base, bound[i + 1] - sh->base), __ATOMIC_RELAXED);
	return true;
}

int64_t
taprt_share_take(taprt_cursor *c, int64_t max, int64_t *u)
{
	if (max <= 0)
		return 0;
	if (!c->sh) {
		int64_t k = c->hi - c->lo < max ? c->hi - c->lo : max;
		k = k > 0 ? k : 0;
		*u = c->lo;
		c->lo += k;
		return k;
	}
	taprt_share *sh = c->sh;
	uint64_t *r = &sh->slot[c->id].r, v = __atomic_load_n(r, __ATOMIC_RELAXED), nv;
	int64_t lo, k;
	do {
		lo = SHARE_LO(v);
		k = SHARE_HI(v) - lo;
		if (k <= 0)
			return 0;
		k = k < max ? k : max;
		nv = SHARE_PACK(lo + k, SHARE_HI(v));
	} while (!__atomic_compare_exchange_n(r, &v, nv, true, __ATOMIC_ACQ_REL,
	    __ATOMIC_RELAXED));
	*u = sh->base + lo;
	return k;
}

bool
taprt_share_steal(taprt_cursor *c, int64_t min_left)
{
	taprt_share *sh = c->sh;
	if (!sh)
		return false;
	for (;;) {
		int best = -1;
		int64_t most = min_left > 1 ? min_left : 1;
		uint64_t bv = 0;
		for (int i = 0; i < sh->nt; i++) {
			uint64_t v = __atomic_load_n(&sh->slot[i].r, __ATOMIC_RELAXED);
			if (i != c->id && SHARE_HI(v) - SHARE_LO(v) > most) {
				most = SHARE_HI(v) - SHARE_LO(v);
				best = i;
				bv = v;
			}
		}
		if (best < 0)
			return false;
		/* the back half (the larger one: the thief has shown itself
		 * the faster) */
		int64_t lo = SHARE_LO(bv), hi = SHARE_HI(bv), cut = lo + (hi - lo) / 2;
		if (__atomic_compare_exchange_n(&sh->slot[best].r, &bv, SHARE_PACK(lo, cut), false,
		    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			__atomic_store_n(&sh->slot[c->id].r, SHARE_PACK(cut, hi), __ATOMIC_RELEASE);
			return true;
		}
	}
}
