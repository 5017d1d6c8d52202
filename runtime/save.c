/*
 * save.c - --save DIR: a training program's trained weights written back as
 * an ONNX model onnxruntime can load.
 *
 * tapc wrote a template beside the executable (backend/emit_save.c): the
 * input model with every trained weight an external tensor of one data
 * file, at offsets the program's save table lists.  Saving copies the
 * template to DIR/model.onnx and writes the data file, DIR/model.onnx.data
 * (both under temporary names, renamed when complete):
 * rank 0 writes every weight, whole, from the ranks of replica 0 (replicas
 * are equal after the gradient all-reduce): its own, and the others' sent
 * to it, each rank's tensor-parallel slice put back where the weight
 * loader took it from (the [blocks, parts, chunk] view of taprt_weight).
 * A weight no tensor-parallel rank splits is taken from TP coordinate 0.
 *
 * Needs: the backend's send/recv (any rank may be another process);
 * POSIX files.  Collective: every rank calls taprt_save.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/internal.h"

#define TAG_SAVE (-1000000)

/* The saved entry of weight w, or NULL: not trained. */
static const taprt_saved *
saved_of(const taprt_save_table *s, const taprt_weight *w)
{
	if (w->t->dtype != TAPRT_F32 && w->t->dtype != TAPRT_F64)
		return NULL;
	for (int i = 0; i < s->nsaved; i++)
		if (s->saved[i].file == w->file && s->saved[i].offset == w->offset)
			return &s->saved[i];
	return NULL;
}

/* Does this rank send (or, rank 0, write) weight w? */
static bool
contributes(const taprt_program *p, int rank, const taprt_weight *w)
{
	taprt_layout l;
	taprt_layout_of(p, &l);
	taprt_coords c = taprt_coords_of(&l, rank);
	return c.dp_rank == 0 && (w->slice_axis >= 0 || c.tp_rank == 0) &&
	    saved_of(p->save, w) != NULL;
}

static int
pwrite_all(int fd, const void *buf, int64_t n, int64_t at)
{
	const char *b = buf;
	while (n > 0) {
		ssize_t k = pwrite(fd, b, (size_t)n, at);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		b += k, n -= k, at += k;
	}
	return 0;
}

/* Put rank q's slice of weight w (data) into the data file at its place. */
static int
put_slice(int fd, const taprt_weight *w, int q, const taprt_saved *s, const void *data)
{
	int es = taprt_dtype_size(w->t->dtype);
	if (w->slice_axis < 0)
		return pwrite_all(fd, data, w->t->numel * es, s->out);
	int ax = w->slice_axis;
	int64_t outer = 1, inner = es, full = w->full_dims[ax];
	for (int a = 0; a < ax; a++)
		outer *= w->full_dims[a];
	for (int a = ax + 1; a < w->full_rank; a++)
		inner *= w->full_dims[a];
	int64_t chunk = full / ((int64_t)w->slice_blocks * w->slice_parts);
	const char *src = data;
	for (int64_t o = 0; o < outer; o++)
		for (int j = 0; j < w->slice_blocks; j++) {
			int64_t at = s->out + (o * full + ((int64_t)j * w->slice_parts + q) * chunk) * inner;
			if (pwrite_all(fd, src, chunk * inner, at) != 0)
				return -1;
			src += chunk * inner;
		}
	return 0;
}

static int
copy_file(const char *from, const char *to, char *err, size_t n)
{
	int in = open(from, O_RDONLY | O_CLOEXEC), out = -1;
	int rc = -1;
	if (in < 0) {
		snprintf(err, n, "--save: cannot read the template %.150s: %s", from, strerror(errno));
		return -1;
	}
	if ((out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
		snprintf(err, n, "--save: cannot write %.150s: %s", to, strerror(errno));
		goto done;
	}
	char buf[1 << 16];
	for (;;) {
		ssize_t k = read(in, buf, sizeof buf);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			snprintf(err, n, "--save: reading %.150s: %s", from, strerror(errno));
			goto done;
		}
		if (k == 0)
			break;
		for (const char *b = buf; k > 0;) {
			ssize_t wr = write(out, b, (size_t)k);
			if (wr < 0 && errno == EINTR)
				continue;
			if (wr <= 0) {
				snprintf(err, n, "--save: writing %.150s: %s", to, strerror(errno));
				goto done;
			}
			b += wr, k -= wr;
		}
	}
	rc = 0;
done:
	close(in);
	if (out >= 0 && close(out) != 0 && rc == 0) {
		snprintf(err, n, "--save: writing %.150s: %s", to, strerror(errno));
		rc = -1;
	}
	return rc;
}

int
taprt_save(taprt_ctx *cx, const taprt_program *p, const taprt_rank_program *rp,
    const char *exe_dir, const char *dir)
{
	if (!p->save)
		return taprt_fail(cx, "--save: the program keeps no save table (compile with tapc -train)");
	/* every rank but 0: send what it contributes, in weight order */
	if (cx->rank != 0) {
		for (int i = 0; i < rp->nweights; i++) {
			const taprt_weight *w = &rp->weights[i];
			if (contributes(p, cx->rank, w) && taprt_send(cx, w->t, 0, TAG_SAVE - i) != 0)
				return -1;
		}
		return 0;
	}
	/* rank 0: the template, the data file, every contribution; written
	 * under temporary names and renamed at the end (data file first), so
	 * a failure leaves DIR as it was */
	char path[4096], data[4096], tmpl[4096], tpath[4200], tdata[4200];
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return taprt_fail(cx, "--save: cannot make %s: %s", dir, strerror(errno));
	snprintf(tmpl, sizeof tmpl, "%s/%s", exe_dir, p->save->template_file);
	snprintf(path, sizeof path, "%s/model.onnx", dir);
	snprintf(data, sizeof data, "%s/%s", dir, p->save->data_file);
	snprintf(tpath, sizeof tpath, "%s.tmp%ld", path, (long)getpid());
	snprintf(tdata, sizeof tdata, "%s.tmp%ld", data, (long)getpid());
	if (copy_file(tmpl, tpath, cx->error, sizeof cx->error) != 0) {
		unlink(tpath);
		return -1;
	}
	int fd = open(tdata, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || ftruncate(fd, p->save->data_bytes) != 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		unlink(tpath);
		unlink(tdata);
		return taprt_fail(cx, "--save: cannot write %s: %s", data, strerror(e));
	}
	taprt_layout l;
	taprt_layout_of(p, &l);
	int rc = 0;
	for (int r = 0; r < p->nranks && rc == 0; r++) {
		const taprt_rank_program *rr = p->ranks[r];
		int q = taprt_coords_of(&l, r).tp_rank;
		for (int i = 0; i < rr->nweights && rc == 0; i++) {
			const taprt_weight *w = &rr->weights[i];
			if (!contributes(p, r, w))
				continue;
			const void *bytes = w->t->data;
			taprt_tensor got = *w->t;
			if (r != 0) { /* the other rank's copy of this tensor, received */
				got.data = malloc((size_t)got.numel * taprt_dtype_size(got.dtype) + 1);
				if (!got.data) {
					rc = taprt_fail(cx, "--save: out of memory");
					break;
				}
				if (taprt_recv(cx, &got, r, TAG_SAVE - i) != 0)
					rc = -1;
				bytes = got.data;
			}
			if (rc == 0 && put_slice(fd, w, q, saved_of(p->save, w), bytes) != 0)
				rc = taprt_fail(cx, "--save: writing %s: %s", data, strerror(errno));
			if (r != 0)
				free(got.data);
		}
	}
	if (close(fd) != 0 && rc == 0)
		rc = taprt_fail(cx, "--save: writing %s: %s", data, strerror(errno));
	if (rc == 0 && (rename(tdata, data) != 0 || rename(tpath, path) != 0))
		rc = taprt_fail(cx, "--save: cannot rename into %s: %s", dir, strerror(errno));
	if (rc != 0) {
		unlink(tpath);
		unlink(tdata);
	}
	return rc;
}
