/*
 * weights.c - map the model's files once per process and fill each rank's
 * weights, or the slice of them it owns, from the recorded offsets.
 *
 * The files were validated by tapc, but may have changed since: they are
 * opened again without following symbolic links below the model directory,
 * must be regular files, and every byte range is checked against the
 * mapped size before it is read.  Ranks share the mappings; each copies
 * only its own (sliced) weights into aligned memory, so the processes hold
 * one copy of the model in total, never one per rank.
 */
#include <cblas.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/internal.h"

typedef struct {
	const uint8_t *base;
	size_t size;
} Map;

static Map *maps;
static int nmaps;

/* Open rel below dirfd, refusing symlinks in any component. */
static int
open_beneath(int dirfd, const char *rel)
{
	char buf[4096];
	if (!*rel || rel[0] == '/' || strstr(rel, "..") || strlen(rel) >= sizeof buf) {
		errno = EINVAL;
		return -1;
	}
	strcpy(buf, rel);
	int fd = dup(dirfd);
	for (char *comp = buf; fd >= 0;) {
		char *slash = strchr(comp, '/');
		if (slash)
			*slash = 0;
		int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (slash ? O_DIRECTORY : O_NONBLOCK);
		int nfd = openat(fd, comp, flags);
		close(fd);
		if (!slash || nfd < 0)
			return nfd;
		fd = nfd;
		comp = slash + 1;
	}
	return -1;
}

int
taprt_map_files(const taprt_program *p, const char *model_dir, char *err, size_t errlen)
{
	int dfd = open(model_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		snprintf(err, errlen, "model directory '%s': %s (use --model FILE)", model_dir,
		    strerror(errno));
		return -1;
	}
	maps = calloc(p->nfiles + 1, sizeof *maps);
	nmaps = p->nfiles;
	for (int i = 0; i < p->nfiles; i++) {
		int fd = open_beneath(dfd, p->files[i]);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
			snprintf(err, errlen, "%s/%s: %s", model_dir, p->files[i],
			    fd < 0 ? strerror(errno) : "not a regular file");
			if (fd >= 0)
				close(fd);
			close(dfd);
			return -1;
		}
		maps[i].size = (size_t)st.st_size;
		if (st.st_size > 0) {
			void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
			if (m == MAP_FAILED) {
				snprintf(err, errlen, "%s: cannot map: %s", p->files[i], strerror(errno));
				close(fd);
				close(dfd);
				return -1;
			}
			maps[i].base = m;
		}
		close(fd);
	}
	close(dfd);
	return 0;
}

void
taprt_unmap_files(void)
{
	for (int i = 0; i < nmaps; i++)
		if (maps[i].base)
			munmap((void *)maps[i].base, maps[i].size);
	free(maps);
	maps = NULL;
	nmaps = 0;
}

int
taprt_load_weights(taprt_ctx *cx, const taprt_rank_program *rp)
{
	for (int i = 0; i < rp->nweights; i++) {
		const taprt_weight *w = &rp->weights[i];
		taprt_tensor *t = w->t;
		int64_t es = taprt_dtype_size(t->dtype), full = es;
		for (int d = 0; d < w->full_rank; d++)
			full *= w->full_dims[d];
		if (w->file < 0 || w->file >= nmaps || w->offset < 0 ||
		    (uint64_t)w->offset + (uint64_t)full > maps[w->file].size)
			return taprt_fail(cx, "weight %d lies outside file %d (was the model changed after compiling?)",
			    i, w->file);
		const uint8_t *src = maps[w->file].base + w->offset;
		if (w->slice_axis < 0) {
			memcpy(t->data, src, (size_t)full);
			continue;
		}
		/* rows of the sliced axis: outer blocks, each a run of inner bytes */
		int ax = w->slice_axis;
		int64_t outer = 1, inner = es;
		for (int d = 0; d < ax; d++)
			outer *= w->full_dims[d];
		for (int d = ax + 1; d < w->full_rank; d++)
			inner *= w->full_dims[d];
		int64_t len = t->dims[ax];
		for (int64_t o = 0; o < outer; o++)
			memcpy((uint8_t *)t->data + o * len * inner,
			    src + (o * w->full_dims[ax] + w->slice_start) * inner, (size_t)(len * inner));
	}
	return 0;
}

void
taprt_blas_threads(int n)
{
	openblas_set_num_threads(n > 0 ? n : 1);
}
