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

/* The (device, inode) of every file the compilation reads: the input, the
 * model and its external data.  A directory holding one of them is never
 * replaced (it would be deleted with the old output). */
static struct {
	int n;
	dev_t *dev;
	ino_t *ino;
} inputs;                               /* for find_input, which nftw calls */

static int
find_input(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path;
	(void)flag;
	(void)ftw;
	for (int i = 0; i < inputs.n; i++)
		if (st->st_dev == inputs.dev[i] && st->st_ino == inputs.ino[i])
			return 1;
	return 0;
}

/* A previous tapc output (it has plan.json) holding none of our inputs, or
 * an empty directory.  *why says what is wrong otherwise. */
static bool
is_replaceable(Graph *g, const EmitOptions *o, const char *dir, const char **why)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/plan.json", dir);
	*why = "exists and is not a tapc output directory (no plan.json); not replacing it";
	if (access(path, F_OK) != 0)
		return rmdir(dir) == 0; /* empty: removing it is the same as keeping it */
	struct stat st;
	inputs.n = 0;
	inputs.dev = malloc(sizeof *inputs.dev * (g->nfiles + 2));
	inputs.ino = malloc(sizeof *inputs.ino * (g->nfiles + 2));
	if (!inputs.dev || !inputs.ino)
		die("out of memory");
	for (int i = -2; i < g->nfiles; i++) {
		if (i >= 0)
			snprintf(path, sizeof path, "%s/%s", g->dir, g->files[i]);
		const char *p = i == -2 ? g->ir_data : i == -1 ? o->input : path;
		if (p && stat(p, &st) == 0) {
			inputs.dev[inputs.n] = st.st_dev;
			inputs.ino[inputs.n++] = st.st_ino;
		}
	}
	*why = "holds the model or a file it reads; not replacing it (choose another -o)";
	bool ok = nftw(dir, find_input, 16, FTW_PHYS) == 0;
	free(inputs.dev);
	free(inputs.ino);
	return ok;
}

/* The program maps the model's files and copies each weight's bytes: check
 * now, by the loader's rules, that every file opens inside the model's
 * directory and holds every byte range the program will read (an IR file's
 * weights were not checked when it was read). */
bool
emit_check_files(Graph *g)
{
	int64_t *size = malloc(sizeof *size * (g->nfiles + 1));
	if (!size)
		die("out of memory");
	bool ok = true;
	for (int i = 0; ok && i < g->nfiles; i++) {
		char why[PATH_MAX + 128];
		int fd = ir_file_open(g->dir, g->files[i], "weight file", "the model's directory",
		    &size[i], why, sizeof why);
		if (fd < 0) {
			diag_file(g->model, "%s", why);
			ok = false;
		} else {
			close(fd);
		}
	}
	for (TensorId t = 0; ok && t < g->ntensors; t++) {
		Tensor *x = &g->tensors[t];
		if (x->data != DATA_FILE)
			continue;
		if (x->file < 0 || x->file >= g->nfiles || x->offset < 0 || x->length < 0 ||
		    x->offset > size[x->file] || x->length > size[x->file] - x->offset) {
			diag_file(g->model, "weight '%s': offset %lld + length %lld is beyond the end of '%s' (%lld bytes)",
			    x->name, (long long)x->offset, (long long)x->length,
			    x->file >= 0 && x->file < g->nfiles ? g->files[x->file] : "?",
			    x->file >= 0 && x->file < g->nfiles ? (long long)size[x->file] : 0LL);
			ok = false;
		}
	}
	free(size);
	return ok;
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

	if (!emit_check_stages(g) || !emit_check_files(g))
		return false;
	struct stat st;
	const char *why;
	if (stat(out, &st) == 0 && (!S_ISDIR(st.st_mode) || !is_replaceable(g, o, out, &why))) {
		diag_error("-o %s: %s", o->outdir, S_ISDIR(st.st_mode) ? why :
		    "exists and is not a directory; not replacing it");
		return false;
	}
	char *deptmp = NULL, target[PATH_MAX + 16];
	snprintf(target, sizeof target, "%s/plan.json", out);
	if (o->depfile && !emit_depfile(g, o->input, target, o->depfile, &deptmp))
		return false;
	snprintf(tmp, sizeof tmp, "%s.tmpXXXXXX", out);
	if (!mkdtemp(tmp)) {
		diag_error("-o %s: cannot create a directory beside it: %s", o->outdir, strerror(errno));
		if (deptmp) {
			unlink(deptmp);
			free(deptmp);
		}
		return false;
	}
	chmod(tmp, 0755);
	MemPlan *mps = emit_memplans(g);
	bool ok = true;
	for (int s = 0; ok && s < emit_nstages(g); s++)
		if (mps[s].arena_bytes > EMIT_MAX_REGION || mps[s].weight_bytes > EMIT_MAX_REGION) {
			diag_file(g->model, "stage %d: a rank's %s need more than 2^56 bytes", s,
			    mps[s].arena_bytes > EMIT_MAX_REGION ? "activations" : "weights");
			ok = false;
		}
	for (int s = 0; ok && s < emit_nstages(g); s++)
		ok = emit_stage_c(g, s, &mps[s], tmp);
	EmitSave save = {0};
	bool train = g->loss != IR_NONE;
	int64_t blob_bytes = 0;
	free(emit_blob_layout(g, &blob_bytes));
	ok = ok && (!train || emit_save(g, tmp, &save));
	ok = ok && emit_blob(g, mps[0].blob, blob_bytes, tmp) &&
	    emit_main_c(g, o, tmp, rel, train ? &save : NULL) &&
	    emit_makefile(g, o, tmp, blob_bytes > 0) && emit_plan_json(g, o, mps, tmp);
	free(save.saved);
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
		if (deptmp) {
			unlink(deptmp);
			free(deptmp);
		}
		return false;
	}
	if (deptmp && !emit_depfile_commit(deptmp, o->depfile)) {
		rm_tree(out); /* all or nothing: the program without its depfile is a failed run */
		return false;
	}
	return true;
}
