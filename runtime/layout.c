/*
 * layout.c - where a rank sits in the dp x pp x tp layout, and its groups.
 *
 * Needs nothing.  The one place that knows r = (dp_rank * pp + stage) * tp
 * + tp_rank, and which device (MPI world rank) runs rank r: taprt_main, every backend and the tests ask here, so a
 * process that runs one rank (MPI) and a thread that runs one (threads)
 * cannot disagree about who is in which group.
 */
#include <stdlib.h>

#include "runtime/internal.h"

int
taprt_layout_of(const taprt_program *p, taprt_layout *l)
{
	if (p->tp < 0 || p->pp < 0 || p->dp < 0 || p->microbatches < 0 || p->nranks < 1)
		return -1;
	*l = (taprt_layout){.nranks = p->nranks, .tp = p->tp > 1 ? p->tp : 1,
		.pp = p->pp > 1 ? p->pp : 1, .dp = p->dp > 1 ? p->dp : 1,
		.microbatches = p->microbatches > 1 ? p->microbatches : 1, .devices = p->devices};
	if ((int64_t)l->tp * l->pp * l->dp != p->nranks)
		return -1;
	if (p->devices) { /* a permutation of 0 .. nranks-1 */
		bool *seen = calloc(p->nranks, 1);
		int ok = seen != NULL;
		for (int r = 0; ok && r < p->nranks; r++) {
			int d = p->devices[r];
			ok = d >= 0 && d < p->nranks && !seen[d];
			if (ok)
				seen[d] = true;
		}
		free(seen);
		if (!ok)
			return -1;
	}
	return 0;
}

int
taprt_rank_on(const taprt_layout *l, int device)
{
	if (!l->devices)
		return device;
	for (int r = 0; r < l->nranks; r++)
		if (l->devices[r] == device)
			return r;
	return -1;
}

taprt_coords
taprt_coords_of(const taprt_layout *l, int rank)
{
	return (taprt_coords){.tp_rank = rank % l->tp, .stage = rank / l->tp % l->pp,
		.dp_rank = rank / (l->tp * l->pp)};
}

int
taprt_rank_at(const taprt_layout *l, int dp_rank, int stage, int tp_rank)
{
	return (dp_rank * l->pp + stage) * l->tp + tp_rank;
}

int
taprt_group_of(const taprt_layout *l, int rank, int kind, int *out)
{
	taprt_coords c = taprt_coords_of(l, rank);
	int n = 0;
	switch (kind) {
	case TAPRT_GROUP_TP:
		for (int q = 0; q < l->tp; q++)
			out[n++] = taprt_rank_at(l, c.dp_rank, c.stage, q);
		break;
	case TAPRT_GROUP_DP:
		for (int d = 0; d < l->dp; d++)
			out[n++] = taprt_rank_at(l, d, c.stage, c.tp_rank);
		break;
	case TAPRT_GROUP_PIPE:
		for (int s = 0; s < l->pp; s++)
			out[n++] = taprt_rank_at(l, c.dp_rank, s, c.tp_rank);
		break;
	default:
		for (int r = 0; r < l->nranks; r++)
			out[n++] = r;
		break;
	}
	return n;
}
