/*
 * diag.c - one-line error reports for bad input, and die() for compiler bugs.
 *
 * Every report reads "tapc: error: FILE: node 'NAME' (OP): message" (the
 * node part only where a node is to blame), so a user can grep for it and a
 * test can compare the first line.  Names in reports come from models:
 * control bytes are written as \xHH, so a report is one line.  Reports are counted; the driver turns a
 * non-zero count into exit status 1.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

FILE *diag_stream;
int diag_count;
char diag_last[1536];

/* A report stays one line, and a name from a model cannot send escape
 * sequences to the user's terminal: control bytes and DEL print as \xHH. */
static void
emit(const char *prefix, const char *fmt, va_list ap)
{
	char msg[768], raw[1536];
	vsnprintf(msg, sizeof msg, fmt, ap);
	snprintf(raw, sizeof raw, "tapc: error: %s%s", prefix, msg);
	size_t k = 0;
	for (const unsigned char *p = (const unsigned char *)raw; *p && k + 5 < sizeof diag_last; p++)
		if (*p < 0x20 || *p == 0x7f)
			k += (size_t)snprintf(diag_last + k, 5, "\\x%02x", *p);
		else
			diag_last[k++] = (char)*p;
	diag_last[k] = 0;
	diag_count++;
	fprintf(diag_stream ? diag_stream : stderr, "%s\n", diag_last);
}

void
diag_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	emit("", fmt, ap);
	va_end(ap);
}

void
diag_file(const char *file, const char *fmt, ...)
{
	char prefix[600];
	snprintf(prefix, sizeof prefix, "%s: ", file);
	va_list ap;
	va_start(ap, fmt);
	emit(prefix, fmt, ap);
	va_end(ap);
}

void
diag_node(const Graph *g, NodeId n, const char *fmt, ...)
{
	char prefix[600];
	const Node *nd = &g->nodes[n];
	if (nd->name[0])
		snprintf(prefix, sizeof prefix, "%s: node '%s' (%s): ", g->model, nd->name,
		    ir_op_name(nd->op));
	else
		snprintf(prefix, sizeof prefix, "%s: node '#%d' (%s): ", g->model, n,
		    ir_op_name(nd->op));
	va_list ap;
	va_start(ap, fmt);
	emit(prefix, fmt, ap);
	va_end(ap);
}

void
diag_reset(void)
{
	diag_count = 0;
	diag_last[0] = 0;
}

_Noreturn void
die_at(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "tapc: internal error at %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}
