/*
 * emit.c - write the output directory atomically.
 *
 * Everything goes into a temporary sibling of -o DIR; only when every file
 * is written is it renamed into place.  An existing DIR is replaced only if
 * it is a previous tapc output (it has plan.json) or empty, never a
 * directory of the user's.  The program finds the model again through a
 * path relative to its own directory, recorded in main.c.
 */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/emit.h"

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void
rm_tree(const char *dir)
{
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Split an absolute path into its components (in place). */
static int
components(char *path, char **comp, int max)
{
	int n = 0;
	for (char *tok = strtok(path, "/"); tok && n < max; tok = strtok(NULL, "/"))
		comp[n++] = tok;
	return n;
}

/* The path from directory `from` to directory `to`, both absolute. */
static void
relative(const char *from, const char *to, char *out, size_t size)
{
	char a[PATH_MAX + 256], b[PATH_MAX];
	char *fc[512], *tc[512];
	snprintf(a, sizeof a, "%s", from);
	snprintf(b, sizeof b, "%s", to);
	int nf = components(a, fc, 512), nt = components(b, tc, 512), c = 0;
	while (c < nf && c < nt && strcmp(fc[c], tc[c]) == 0)
		c++;
	out[0] = 0;
	for (int i = c; i < nf; i++)
		strncat(out, i > c ? "/.." : "..", size - strlen(out) - 1);
	for (int i = c; i < nt; i++) {
		if (out[0])
			strncat(out, "/", size - strlen(out) - 1);
		strncat(out, tc[i], size - strlen(out) - 1);
	}
	if (!out[0])
		snprintf(out, size, ".");
}

static bool
is_replaceable(const char *dir)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/plan.json", dir);
	if (access(path, F_OK) == 0)
		return true;
	return rmdir(dir) == 0; /* empty: removing it is the same as keeping it */
}

bool
emit_program(Graph *g, const EmitOptions *o)
{
	char out[PATH_MAX], tmp[PATH_MAX + 16], parent[PATH_MAX], absparent[PATH_MAX];
	char absmodel[PATH_MAX], absout[PATH_MAX + 256], rel[PATH_MAX];
	snprintf(out, sizeof out, "%s", o->outdir);
	for (size_t n = strlen(out); n > 1 && out[n - 1] == '/'; n--)
		out[n - 1] = 0;
	snprintf(parent, sizeof parent, "%s", out);
	char *slash = strrchr(parent, '/');
	const char *base = slash ? slash + 1 : out;
	if (slash)
		slash == parent ? (void)(parent[1] = 0) : (void)(*slash = 0);
	else
		strcpy(parent, ".");
	if (!realpath(parent, absparent)) {
		diag_error("-o %s: directory '%s': %s", o->outdir, parent, strerror(errno));
		return false;
	}
	if (!realpath(g->dir, absmodel)) {
		diag_error("%s: cannot resolve its directory: %s", g->model, strerror(errno));
		return false;
	}
	snprintf(absout, sizeof absout, "%s/%s", strcmp(absparent, "/") ? absparent : "", base);
	relative(absout, absmodel, rel, sizeof rel);

	if (!emit_check_stages(g))
		return false;
	struct stat st;
	if (stat(out, &st) == 0 && (!S_ISDIR(st.st_mode) || !is_replaceable(out))) {
		diag_error("-o %s: exists and is not a tapc output directory (no plan.json); not replacing it",
		    o->outdir);
		return false;
	}
	snprintf(tmp, sizeof tmp, "%s.tmpXXXXXX", out);
	if (!mkdtemp(tmp)) {
		diag_error("-o %s: cannot create a directory beside it: %s", o->outdir, strerror(errno));
		return false;
	}
	chmod(tmp, 0755);
	MemPlan *mps = emit_memplans(g);
	bool ok = true;
	for (int s = 0; ok && s < emit_nstages(g); s++)
		ok = emit_stage_c(g, s, &mps[s], tmp);
	ok = ok && emit_main_c(g, o, tmp, rel) && emit_makefile(g, o, tmp) &&
	    emit_plan_json(g, o, mps, tmp);
	emit_memplans_free(g, mps);
	bool written = ok; /* the writers said what failed; a rename has not */
	if (ok && stat(out, &st) == 0) {
		char old[PATH_MAX + 32];
		snprintf(old, sizeof old, "%s.old%ld", out, (long)getpid());
		ok = rename(out, old) == 0 && rename(tmp, out) == 0;
		if (ok)
			rm_tree(old);
	} else if (ok) {
		ok = rename(tmp, out) == 0;
	}
	if (!ok) {
		if (written)
			diag_error("-o %s: %s", o->outdir, strerror(errno));
		rm_tree(tmp);
		return false;
	}
	if (o->depfile) {
		char target[PATH_MAX + 16];
		snprintf(target, sizeof target, "%s/plan.json", out);
		return emit_depfile(g, target, o->depfile);
	}
	return true;
}
