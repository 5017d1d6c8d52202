/*
 * emit_search.c - the plan for a person: -emit=search prints mesh-map's
 * table (the chosen plan, the ten best, Megatron's rule), and
 * -emit=schedule draws the placement (the cluster's devices, coloured by
 * pipeline stage, shaded by replica) above the simulated pipeline.
 *
 * Needs: mesh-map's record (Graph.search, device); stage-assign's for the
 * pipeline chart.  Names from the cluster file reach the SVG through the
 * XML escaper.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "backend/emit.h"
#include "passes/pipeline.h"

static void
row(FILE *f, const char *what, const PlanChoice *p, double base)
{
	char place[32];
	snprintf(place, sizeof place, "%s %s", ir_place_order(p->place),
	    p->place % 2 ? "by-slot" : "by-node");
	fprintf(f, "%-9s %4d %4d %4d %6lld %6d  %-17s %11.5g %11.5g %11.5g %10.4g %7.3f\n", what,
	    p->dp, p->tp, p->pp, (long long)p->mbs, p->micro, place, p->seconds, p->pipeline,
	    p->dpsync, p->memory / 1e9, base > 0 ? base / p->seconds : 0);
}

void
emit_search(FILE *f, Graph *g)
{
	const PlanSearch *s = &g->search;
	const Cluster *c = &g->cluster;
	if (!s->method) {
		fputs("mesh-map did not run: no search to show\n", f);
		return;
	}
	fprintf(f, "mesh-map: %s search, %lld candidates, %lld evaluated, %.3f s", s->method,
	    (long long)s->total, (long long)s->evaluated, s->seconds);
	if (strcmp(s->method, "simulated annealing") == 0)
		fprintf(f, " (seed %u)", s->seed);
	fprintf(f, "\ncluster: %d device%s:", c->ndevices, c->ndevices == 1 ? "" : "s");
	for (int k = 0; k < c->nkinds; k++) {
		const NodeKind *nk = &c->kinds[k];
		fprintf(f, "%s %d x ", k ? "," : "", nk->count);
		for (const char *p = nk->name; *p; p++) /* the file's name, printable */
			fputc((unsigned char)*p >= 0x20 && *p != 0x7f ? *p : '?', f);
		fprintf(f, " (%d x %.3g FLOP/s, %.3g B)", nk->devices, nk->flops, nk->memory);
	}
	fprintf(f, "\nobjective: one %s; seconds predicted by AMP's eq. 2; speedup over "
	    "Megatron's rule\n\n", g->cost.train ? "training step" : "forward pass of the batch");
	fprintf(f, "%-9s %4s %4s %4s %6s %6s  %-17s %11s %11s %11s %10s %7s\n", "", "dp", "tp", "pp",
	    "mbs", "micro", "placement", "predicted", "pipeline", "dp sync", "memory GB", "speedup");
	double base = s->megatron.dp ? s->megatron.seconds : 0;
	for (int i = 0; i < s->ntop; i++) {
		char what[16];
		snprintf(what, sizeof what, "#%d", i + 1);
		row(f, what, &s->top[i], base);
	}
	if (s->megatron.dp)
		row(f, "Megatron", &s->megatron, base);
	else
		fputs("Megatron  (no plan of Megatron's rule fits)\n", f);
	fputs("\nchosen: ", f);
	ir_esc_ir(f, g->degree_rule ? g->degree_rule : "", false);
	fputc('\n', f);
}

/* ------------------------------------------------------------ SVG */

#define CELL_W 64
#define CELL_H 40

/* The placement picture: one row per node, one cell per device. */
static double
placement_svg(FILE *f, Graph *g, double *width)
{
	const Cluster *c = &g->cluster;
	int dp = g->mesh.dp > 0 ? g->mesh.dp : 1, tp = g->mesh.tp > 0 ? g->mesh.tp : 1;
	int pp = g->mesh.pp > 0 ? g->mesh.pp : 1, n = dp * tp * pp;
	int *rank = malloc(sizeof *rank * (c->ndevices + 1));
	if (!rank)
		die("out of memory");
	for (int d = 0; d < c->ndevices; d++)
		rank[d] = -1;
	for (int r = 0; r < n && g->device; r++)
		if (g->device[r] >= 0 && g->device[r] < c->ndevices)
			rank[g->device[r]] = r;
	int most = 0;
	for (int k = 0; k < c->nkinds; k++)
		most = c->kinds[k].devices > most ? c->kinds[k].devices : most;
	double left = 120, top = 44;
	*width = left + most * CELL_W + 16;
	double h = top + c->nnodes * CELL_H + 12;
	fprintf(f, "<svg width=\"%.0f\" height=\"%.0f\">\n", *width, h);
	fprintf(f, "<text x=\"8\" y=\"20\" font-size=\"14\">placement: %s %s (dp %d, tp %d, pp %d; "
	    "colour: stage, shade: replica)</text>\n", ir_place_order(g->place),
	    g->place % 2 ? "by-slot" : "by-node", dp, tp, pp);
	int dev = 0, node = 0;
	for (int k = 0; k < c->nkinds; k++) {
		const NodeKind *nk = &c->kinds[k];
		for (int i = 0; i < nk->count; i++, node++) {
			double y = top + node * CELL_H;
			fprintf(f, "<text x=\"8\" y=\"%.1f\">", y + CELL_H / 2 + 4);
			ir_esc_xml(f, nk->name);
			fprintf(f, " %d</text>\n", i);
			for (int s = 0; s < nk->devices; s++, dev++) {
				double x = left + s * CELL_W;
				int r = rank[dev];
				if (r < 0) {
					fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%d\" height=\"%d\" "
					    "fill=\"#eee\" stroke=\"#fff\"/>\n", x, y, CELL_W - 2, CELL_H - 2);
					continue;
				}
				int st = r / tp % pp, rep = r / (tp * pp), q = r % tp;
				int hue = 360 * st / pp, light = 45 + (dp > 1 ? 35 * rep / (dp - 1) : 0);
				fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%d\" height=\"%d\" "
				    "fill=\"hsl(%d,60%%,%d%%)\" stroke=\"#fff\"><title>device %d: rank %d, "
				    "replica %d, stage %d, tp %d</title></rect>\n", x, y, CELL_W - 2, CELL_H - 2,
				    hue, light, dev, r, rep, st, q);
				fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\" font-size=\"10\">"
				    "r%d</text><text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\" "
				    "font-size=\"10\">d%d s%d t%d</text>\n", x + CELL_W / 2 - 1, y + 15, r,
				    x + CELL_W / 2 - 1, y + 29, rep, st, q);
			}
		}
	}
	fputs("</svg>\n", f);
	free(rank);
	return h;
}

void
emit_schedule(FILE *f, Graph *g, const char *name)
{
	char *pic = NULL, *gantt = NULL;
	size_t npic = 0, ngantt = 0;
	double pw, ph = 0, gh = 0, gw = 0;
	FILE *m = open_memstream(&pic, &npic);
	ph = placement_svg(m, g, &pw);
	fclose(m);
	if (g->nstages >= 2) {
		int k = g->nstages;
		double *fw = calloc(k + 1, sizeof *fw), *bw = calloc(k + 1, sizeof *bw);
		for (int s = 0; s < k; s++) {
			fw[s] = g->stages[s].fwd;
			bw[s] = g->stages[s].bwd;
		}
		PipeSpec p = {.nstages = k, .micro = g->microbatches, .fwd = fw,
			.bwd = g->cost.train ? bw : NULL, .comm = g->pipe_comm};
		PipeSim sim;
		/* the schedule pass's lists when it ran, else the planner's 1F1B */
		if (sched_simulate(g, &sim) < 0 && !pipe_simulate(&p, &sim))
			die("no pipeline to draw");
		char title[640], rec[256] = "";
		for (int s = 0; g->sched && s < k; s++)
			if (g->sched[s].recompute) {
				const StageSched *ss = &g->sched[s];
				const PipeStage *ps = g->stages && s < g->nstages ? &g->stages[s] : NULL;
				int kept = !ps || ss->keep_from == INT_MAX ? 0 :
				    ps->first + ps->nsub - ss->keep_from;
				snprintf(rec + strlen(rec), sizeof rec - strlen(rec), "%s%d", rec[0] ? "," :
				    ", recomputing stages ", s);
				if (kept > 0)
					snprintf(rec + strlen(rec), sizeof rec - strlen(rec), " (%d of %d modules kept)",
					    kept, ps->nsub);
			}
		snprintf(title, sizeof title, "%s: %s, tp=%d, %s schedule%s%s", name, g->pipe_method,
		    g->mesh.tp, g->sched && g->loss != IR_NONE ? sched_name(g->sched_kind) :
		    g->cost.train ? "1f1b" : "forward", rec, g->subpipe ?
		    ", sub-pipelined TMP (each pair of halves interleaved)" : "");
		m = open_memstream(&gantt, &ngantt);
		pipe_svg(m, &sim, k, title);
		fclose(m);
		pipe_sim_free(&sim);
		free(fw);
		free(bw);
		gh = 44 + k * 30 + 30;
		gw = 84 + 880 + 16;
	}
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
	    "font-family=\"sans-serif\" font-size=\"12\">\n", pw > gw ? pw : gw, ph + gh);
	fputs(pic, f);
	if (gantt) {
		fprintf(f, "<g transform=\"translate(0,%.0f)\">\n", ph);
		fputs(gantt, f);
		fputs("</g>\n", f);
	}
	fputs("</svg>\n", f);
	free(pic);
	free(gantt);
}
