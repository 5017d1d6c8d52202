/*
 * cluster.c - the devices a plan runs on: where each device is, how fast
 * the link between two devices is, and where each rank goes (placement).
 *
 * Devices are numbered node by node in the order of the cluster's kinds
 * (ir.h, Cluster).  A placement lays the rank grid (tp x pp x dp, rank =
 * (replica * pp + stage) * tp + q) over that numbering: one axis order
 * says which coordinate runs fastest along the devices, and the device
 * order is node by node ("by-node": a TP group of 4 on 4-device nodes
 * fills one node) or slot by slot ("by-slot": slot 0 of every node, then
 * slot 1, ...: the same group spans 4 nodes).  Those are AMP's domino
 * tilings (§4.4) of the nodes x devices mesh, horizontal and vertical,
 * generalized to nodes of different sizes.  Needs nothing but libc.
 */
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

void
ir_cluster_device(const Cluster *c, int device, int *node, int *kind, int *slot)
{
	int first = 0, nodes = 0;
	for (int k = 0; k < c->nkinds; k++) {
		const NodeKind *nk = &c->kinds[k];
		int n = nk->count * nk->devices;
		if (device < first + n) {
			int i = device - first;
			if (node)
				*node = nodes + i / nk->devices;
			if (kind)
				*kind = k;
			if (slot)
				*slot = i % nk->devices;
			return;
		}
		first += n;
		nodes += nk->count;
	}
	die("device %d of a cluster of %d", device, c->ndevices);
}

double
ir_cluster_link(const Cluster *c, int a, int b)
{
	int na, nb, ka, kb;
	ir_cluster_device(c, a, &na, &ka, NULL);
	ir_cluster_device(c, b, &nb, &kb, NULL);
	if (na == nb)
		return c->kinds[ka].intra_bw;
	double x = c->kinds[ka].inter_bw, y = c->kinds[kb].inter_bw;
	return x < y ? x : y;
}

void
ir_cluster_mesh(Cluster *c, int rows, int cols, const CostModel *m)
{
	memset(c, 0, sizeof *c);
	c->nkinds = 1;
	NodeKind *k = &c->kinds[0];
	strcpy(k->name, "node");
	k->count = rows;
	k->devices = cols;
	k->flops = m->flops;
	k->memory = m->memory;
	k->intra_bw = m->bw_intra;
	k->inter_bw = m->bw_inter;
	k->mem_bw = m->mem_bw;
	c->nnodes = rows;
	c->ndevices = rows * cols;
	c->latency = m->latency;
	c->op_latency = m->op_latency;
	c->alpha = c->beta = 1;
}

void
ir_cluster_shape(const Cluster *c, int *rows, int *cols)
{
	bool same = true;
	for (int k = 1; k < c->nkinds; k++)
		same &= c->kinds[k].devices == c->kinds[0].devices;
	*rows = same && c->nkinds ? c->nnodes : 1;
	*cols = same && c->nkinds ? c->kinds[0].devices : c->ndevices;
}

/* innermost axis first; 0 = tp, 1 = dp, 2 = pp */
static const int orders[PLACE_ORDERS][3] = {
	{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0},
};

const char *
ir_place_order(int place)
{
	static const char *names[PLACE_ORDERS] = {
		"tp,dp,pp", "tp,pp,dp", "dp,tp,pp", "dp,pp,tp", "pp,tp,dp", "pp,dp,tp",
	};
	return names[(place / 2) % PLACE_ORDERS];
}

void
ir_place(const Cluster *c, int dp, int tp, int pp, int place, int *dev)
{
	int n = dp * tp * pp;
	if (n > c->ndevices)
		die("ir_place: %d ranks on %d devices", n, c->ndevices);
	/* the device order */
	int *seq = malloc(sizeof *seq * (c->ndevices + 1));
	if (!seq)
		die("out of memory");
	if (place % 2 == 0) {
		for (int i = 0; i < c->ndevices; i++)
			seq[i] = i;
	} else {
		int most = 0, k = 0;
		for (int j = 0; j < c->nkinds; j++)
			most = c->kinds[j].devices > most ? c->kinds[j].devices : most;
		for (int slot = 0; slot < most; slot++) {
			int first = 0;
			for (int j = 0; j < c->nkinds; j++) {
				const NodeKind *nk = &c->kinds[j];
				for (int i = 0; i < nk->count; i++)
					if (slot < nk->devices)
						seq[k++] = first + i * nk->devices + slot;
				first += nk->count * nk->devices;
			}
		}
	}
	const int *o = orders[(place / 2) % PLACE_ORDERS];
	int size[3] = {tp, dp, pp};
	for (int r = 0; r < n; r++) {
		int coord[3] = {r % tp, r / (tp * pp), r / tp % pp};
		int L = coord[o[0]] + size[o[0]] * (coord[o[1]] + size[o[1]] * coord[o[2]]);
		dev[r] = seq[L];
	}
	free(seq);
}
