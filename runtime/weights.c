/*
 * weights.c - map the model's files once per process and fill each rank's
 * weights, or the slice of them it owns, from the recorded offsets.
 *
 * The files were validated by tapc, but may have changed since: they are
 * opened again without following symbolic links below the model directory,
 * must be regular files, and every byte range is checked against the
 * mapped size before it is read.  Ranks share the mappings; each copies
 * only its own (sliced) weights into aligned memory, so the processes hold
 * one copy of the model in total, never one per rank.  The mapped pages a
 * rank has copied from are dropped from the process as it goes (a window
 * at a time): a column slice reads a few bytes of every row, so otherwise
 * every page of the full tensor would count in the process's resident
 * memory, and with a process per rank each would hold the whole model.
 *
 * A sliced weight (tensor parallelism, see taprt_weight in taprt.h) is
 * the part [:, q, :] of its axis viewed as [blocks, parts, chunk], where q
 * is the rank's cx->tp_rank: all ranks of a TP group share one rank program
 * and differ only in q.  A weight whose file holds halves and whose tensor
 * is f32 (file_dtype) is converted as it is copied, exactly (every half is
 * a float), with half.h's conversions, Cast's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/half.h"
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
			size_t dl = strlen(model_dir); /* --model's directory keeps its slash */
			snprintf(err, errlen, "%s%s%s: %s", model_dir,
			    dl && model_dir[dl - 1] == '/' ? "" : "/", p->files[i],
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

/* Copy from the mapping at most this much before dropping what was read. */
#define WINDOW ((int64_t)4 << 20)

/*
 * Drop the mapped pages of file f's bytes [lo, hi) from this process (the
 * page cache keeps them; a later read faults them in again, unchanged:
 * the mapping is private and never written).
 */
static void
drop(int f, int64_t lo, int64_t hi)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)(maps[f].base + lo) & ~(pg - 1);
	uintptr_t b = ((uintptr_t)(maps[f].base + hi) + pg - 1) & ~(pg - 1);
	if (hi > lo)
		madvise((void *)a, b - a, MADV_DONTNEED);
}

/*
 * Check w's slice against its tensor and this rank's TP coordinate; set
 * the geometry: elements before the axis (outer), the chunk length, and
 * bytes per index of the axis (inner).
 */
static int
check_slice(taprt_ctx *cx, int i, const taprt_weight *w, int64_t es, int64_t *outer,
    int64_t *chunk, int64_t *inner)
{
	const taprt_tensor *t = w->t;
	int ax = w->slice_axis, q = cx->tp_rank;
	if (ax >= w->full_rank)
		return taprt_fail(cx, "weight %d: slice axis %d out of range for rank %d", i, ax,
		    w->full_rank);
	if (w->slice_parts < 1 || w->slice_blocks < 1)
		return taprt_fail(cx, "weight %d: slice of %d parts, %d blocks (both must be >= 1)",
		    i, w->slice_parts, w->slice_blocks);
	if (q < 0 || q >= w->slice_parts ||
	    (cx->tp_group.size > 0 && cx->tp_group.size != w->slice_parts))
		return taprt_fail(cx, "weight %d: sliced %d ways, but this rank is %d of a TP group of %d",
		    i, w->slice_parts, q, cx->tp_group.size);
	int64_t d = w->full_dims[ax], k = (int64_t)w->slice_parts * w->slice_blocks;
	if (d % k != 0)
		return taprt_fail(cx, "weight %d: axis %d of length %lld does not split into %d blocks of %d parts",
		    i, ax, (long long)d, w->slice_blocks, w->slice_parts);
	*chunk = d / k;
	bool ok = t->rank == w->full_rank && t->dims[ax] == w->slice_blocks * *chunk;
	for (int a = 0; ok && a < w->full_rank; a++)
		ok = a == ax || t->dims[a] == w->full_dims[a];
	if (!ok)
		return taprt_fail(cx, "weight %d: tensor of rank %d with %lld along axis %d, expected the full rank %d with %lld (%d blocks of %lld)",
		    i, t->rank, (long long)(ax < t->rank ? t->dims[ax] : -1), ax, w->full_rank,
		    (long long)(w->slice_blocks * *chunk), w->slice_blocks, (long long)*chunk);
	*outer = 1;
	*inner = es;
	for (int a = 0; a < ax; a++)
		*outer *= w->full_dims[a];
	for (int a = ax + 1; a < w->full_rank; a++)
		*inner *= w->full_dims[a];
	return 0;
}

/* n bytes of the file's elements at src to dst: copied, or each half
 * converted to f32 (conv: the file's TAPRT_F16 or TAPRT_BF16). */
static void
put(void *dst, const uint8_t *src, int64_t n, int conv)
{
	if (!conv) {
		memcpy(dst, src, (size_t)n);
		return;
	}
	float *d = dst;
	for (int64_t k = 0; k < n / 2; k++) {
		uint16_t h;
		memcpy(&h, src + 2 * k, 2);
		d[k] = conv == TAPRT_BF16 ? taprt_bf16_to_float(h) : taprt_half_to_float(h);
	}
}

int
taprt_load_weights(taprt_ctx *cx, const taprt_rank_program *rp)
{
	for (int i = 0; i < rp->nweights; i++) {
		const taprt_weight *w = &rp->weights[i];
		taprt_tensor *t = w->t;
		/* es: bytes an element of the file; grow: the tensor's per file byte */
		const int conv = w->file_dtype && w->file_dtype != t->dtype ? w->file_dtype : 0;
		if (conv && !((conv == TAPRT_F16 || conv == TAPRT_BF16) && t->dtype == TAPRT_F32))
			return taprt_fail(cx, "weight %d: cannot convert file elements of type %d to %d",
			    i, conv, t->dtype);
		int64_t es = taprt_dtype_size(conv ? conv : t->dtype), full = es, local = es;
		const int64_t grow = conv ? 2 : 1;
		if (w->full_rank < 0 || w->full_rank > TAPRT_MAX_RANK || t->rank < 0 ||
		    t->rank > TAPRT_MAX_RANK)
			return taprt_fail(cx, "weight %d: rank %d (tensor rank %d) is out of range",
			    i, w->full_rank, t->rank);
		for (int d = 0; d < w->full_rank; d++)
			full *= w->full_dims[d];
		for (int d = 0; d < t->rank; d++)
			local *= t->dims[d];
		if (w->file < 0 || w->file >= nmaps || w->offset < 0 ||
		    (uint64_t)w->offset + (uint64_t)full > maps[w->file].size)
			return taprt_fail(cx, "weight %d lies outside file %d (was the model changed after compiling?)",
			    i, w->file);
		const uint8_t *src = maps[w->file].base + w->offset;
		if (w->slice_axis < 0) {
			if (local != full)
				return taprt_fail(cx, "weight %d: tensor of %lld bytes for a whole weight of %lld",
				    i, (long long)local, (long long)full);
			for (int64_t k = 0; k < full; k += WINDOW) {
				int64_t n = full - k < WINDOW ? full - k : WINDOW;
				put((uint8_t *)t->data + k * grow, src + k, n, conv);
				drop(w->file, w->offset + k, w->offset + k + n);
			}
			continue;
		}
		/* the full tensor is [outer, blocks, parts, chunk, inner]; we take
		 * [outer, blocks, q, chunk, inner], one run of chunk*inner bytes each */
		int64_t outer = 0, chunk = 0, inner = 0;
		if (check_slice(cx, i, w, es, &outer, &chunk, &inner) != 0)
			return -1;
		int64_t parts = w->slice_parts, blocks = w->slice_blocks, run = chunk * inner;
		uint8_t *dst = t->data;
		int64_t seen = 0;               /* bytes of the full tensor read through */
		for (int64_t o = 0; o < outer && run > 0; o++) {
			for (int64_t j = 0; j < blocks; j++)
				put(dst + (o * blocks + j) * run * grow,
				    src + ((o * blocks + j) * parts + cx->tp_rank) * run, run, conv);
			int64_t upto = (o + 1) * blocks * parts * run;
			if (upto - seen >= WINDOW || o == outer - 1) {
				drop(w->file, w->offset + seen, w->offset + upto);
				seen = upto;
			}
		}
	}
	return 0;
}

