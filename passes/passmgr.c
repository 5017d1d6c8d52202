/*
 * passmgr.c - the pass registry and the pipeline runner.
 *
 * The registry is passes.def; a pipeline is a comma-separated list of its
 * names.  The runner prints the IR around passes on request, times them,
 * dumps numbered IR files, verifies after each pass with -verify-each and
 * stops early with -stop-after.  Passes themselves never print.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "passes/passes.h"

const PassInfo pass_registry[] = {
#define PASS(name, fn, help) {name, fn, help},
#include "passes/passes.def"
#undef PASS
};
const int pass_count = sizeof pass_registry / sizeof pass_registry[0];

const PassInfo *
pass_lookup(const char *name)
{
	for (int i = 0; i < pass_count; i++)
		if (strcmp(pass_registry[i].name, name) == 0)
			return &pass_registry[i];
	return NULL;
}

/* Next comma-separated item of *s into buf; false at the end. */
static bool
next_name(const char **s, char *buf, size_t size)
{
	if (!**s)
		return false;
	const char *comma = strchr(*s, ',');
	size_t n = comma ? (size_t)(comma - *s) : strlen(*s);
	if (n >= size)
		n = size - 1;
	memcpy(buf, *s, n);
	buf[n] = 0;
	*s += comma ? n + 1 : n;
	return true;
}

static bool
in_list(const char *list, const char *name)
{
	char buf[128];
	while (next_name(&list, buf, sizeof buf))
		if (strcmp(buf, name) == 0)
			return true;
	return false;
}

bool
pass_check_pipeline(const char *pipeline, const char *what)
{
	char buf[128];
	bool ok = true;
	while (next_name(&pipeline, buf, sizeof buf)) {
		if (!pass_lookup(buf)) {
			diag_error("unknown pass '%s' in %s (tapc -list-passes shows them)", buf, what);
			ok = false;
		}
	}
	return ok;
}

static double
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static bool
dump_file(Graph *g, const char *dir, int index, const char *name)
{
	char path[4096];
	if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
		diag_error("cannot create -ir-dump-dir '%s': %s", dir, strerror(errno));
		return false;
	}
	snprintf(path, sizeof path, "%s/%02d-%s.ir", dir, index, name);
	char data[4096 + 16];
	snprintf(data, sizeof data, "%s.weights", path);
	FILE *f = fopen(path, "w"), *df = f ? fopen(data, "w") : NULL;
	int64_t bytes = 0;
	bool ok = f && df && ir_print_data(f, g, df, strrchr(data, '/') + 1, &bytes);
	if (df && fclose(df) != 0)
		ok = false;
	if (f && fclose(f) != 0)
		ok = false;
	if (df && bytes == 0)
		unlink(data); /* nothing big: every value is inline */
	if (!ok) {
		diag_error("cannot write '%s': %s", df || !f ? path : data, strerror(errno));
		return false;
	}
	return true;
}

bool
pass_run_pipeline(Graph *g, PassCtx *cx, const char *pipeline, const PassOptions *o)
{
	enum { MAXP = 256 };
	const PassInfo *run[MAXP];
	double ms[MAXP];
	int n = 0;
	char buf[128];
	const char *s = pipeline;
	FILE *out = o->print_stream ? o->print_stream : stderr;
	bool ok = true;

	if (!pass_check_pipeline(pipeline, "-passes"))
		return false;
	if (*o->stop_after && !in_list(pipeline, o->stop_after)) {
		diag_error("-stop-after=%s names a pass that is not in the pipeline", o->stop_after);
		return false;
	}
	if (*o->ir_dump_dir && !dump_file(g, o->ir_dump_dir, 0, "input"))
		return false;
	while (ok && next_name(&s, buf, sizeof buf)) {
		if (n == MAXP) {
			diag_error("the pipeline has more than %d passes", MAXP);
			return false;
		}
		const PassInfo *p = pass_lookup(buf);
		if (o->print_before_all || in_list(o->print_before, p->name)) {
			fprintf(out, "*** IR Dump Before %s ***\n", p->name);
			ir_print(out, g);
		}
		double t0 = now_ms();
		ok = p->fn(g, cx);
		run[n] = p;
		ms[n++] = now_ms() - t0;
		if (ok && o->verify_each && p->fn != pass_verify && !pass_verify(g, cx))
			diag_error("the IR is invalid after pass '%s' (a tapc bug)", p->name);
		ok = ok && diag_count == 0;
		if (!ok)
			break;
		if (o->print_after_all || in_list(o->print_after, p->name)) {
			fprintf(out, "*** IR Dump After %s ***\n", p->name);
			ir_print(out, g);
		}
		if (*o->ir_dump_dir && !dump_file(g, o->ir_dump_dir, n, p->name))
			ok = false;
		if (strcmp(o->stop_after, p->name) == 0)
			break;
	}
	if (o->time_passes) {
		double total = o->load_ms;
		for (int i = 0; i < n; i++)
			total += ms[i];
		fprintf(out, "===%s===\n", "-------------------------------------------------------------");
		fprintf(out, "                      tapc pass execution timing report\n");
		fprintf(out, "===%s===\n", "-------------------------------------------------------------");
		fprintf(out, "  %12s  %6s  %s\n", "Wall (ms)", "%", "Pass");
		fprintf(out, "  %12.3f  %5.1f%%  %s\n", o->load_ms,
		    total > 0 ? 100 * o->load_ms / total : 0.0, "(load, check, infer shapes)");
		for (int i = 0; i < n; i++)
			fprintf(out, "  %12.3f  %5.1f%%  %s\n", ms[i], total > 0 ? 100 * ms[i] / total : 0.0,
			    run[i]->name);
		fprintf(out, "  %12.3f  %5.1f%%  Total\n", total, 100.0);
	}
	return ok;
}
