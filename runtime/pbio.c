/*
 * pbio.c - read and write ONNX TensorProto files (input_N.pb, output_N.pb).
 *
 * A small hand-written reader of the protobuf wire format, so libtaprt
 * needs no protobuf library: dims, data_type, name and the value fields
 * (raw_data, or the typed float/int32/int64/double/uint64 fields).  The
 * file comes from the user: every length is checked against the buffer.
 * The writer emits dims, data_type, name and raw_data.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/internal.h"

static bool
varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;
	for (int shift = 0; shift < 70; shift += 7) {
		if (*p >= end)
			return false;
		uint8_t b = *(*p)++;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return true;
		}
	}
	return false;
}

/* The typed values seen so far: element `seen` is kept (as raw bits,
 * converted to the dtype's layout at the end, since data_type may come
 * later) when it is in [first, first + want); want < 0 keeps them all. */
typedef struct {
	uint64_t *vals;
	int64_t n, cap, seen;
	int64_t first, want;
} Vals;

static bool
push(Vals *v, uint64_t bits)
{
	int64_t i = v->seen++;
	if (i < v->first || (v->want >= 0 && i >= v->first + v->want))
		return true;
	uint64_t **vals = &v->vals;
	int64_t *n = &v->n, *cap = &v->cap;
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 64;
		uint64_t *grown = realloc(*vals, (size_t)*cap * sizeof *grown);
		if (!grown)
			return false;
		*vals = grown;
	}
	(*vals)[(*n)++] = bits;
	return true;
}

/*
 * Parse a TensorProto and keep elements [first, first + want) of it (want
 * < 0: all of them, from first 0): into dst when given, else into a
 * malloc'd t->data.  With shape, a file whose dtype or dims differ from
 * shape's is not copied from: 1, with t's header set.  0 or -1 with err.
 */
static int
parse(const uint8_t *buf, size_t len, taprt_pb *t, int64_t first, int64_t want, void *dst,
    const taprt_pb *shape, char *err, size_t errlen)
{
	const uint8_t *p = buf, *end = buf + len;
	Vals vals = {.first = first, .want = want};
	const uint8_t *raw = NULL;
	uint64_t rawlen = 0;
	memset(t, 0, sizeof *t);
	while (p < end) {
		uint64_t key, v;
		if (!varint(&p, end, &key))
			goto bad;
		int field = (int)(key >> 3), wt = (int)(key & 7);
		if (wt == 0) {
			if (!varint(&p, end, &v))
				goto bad;
			if (field == 1) {
				if (t->rank >= TAPRT_MAX_RANK)
					goto rank;
				t->dims[t->rank++] = (int64_t)v;
			} else if (field == 2) {
				t->dtype = (int)v;
			} else if (field == 5 || field == 7 || field == 11) {
				if (!push(&vals, v))
					goto bad;
			}
		} else if (wt == 5 || wt == 1) {
			int n = wt == 5 ? 4 : 8;
			if (end - p < n)
				goto bad;
			uint64_t bits = 0;
			memcpy(&bits, p, n);
			p += n;
			if ((field == 4 || field == 10) && !push(&vals, bits))
				goto bad;
		} else if (wt == 2) {
			if (!varint(&p, end, &v) || v > (uint64_t)(end - p))
				goto bad;
			const uint8_t *body = p, *bend = p + v;
			p = bend;
			if (field == 8) {
				size_t n = v < sizeof t->name - 1 ? v : sizeof t->name - 1;
				memcpy(t->name, body, n);
				t->name[n] = 0;
			} else if (field == 9) {
				raw = body;
				rawlen = v;
			} else if (field == 1 || field == 5 || field == 7 || field == 11) {
				/* packed varints */
				while (body < bend) {
					if (!varint(&body, bend, &v))
						goto bad;
					if (field == 1) {
						if (t->rank >= TAPRT_MAX_RANK)
							goto rank;
						t->dims[t->rank++] = (int64_t)v;
					} else if (!push(&vals, v)) {
						goto bad;
					}
				}
			} else if (field == 4 || field == 10) {
				int n = field == 4 ? 4 : 8;
				if ((bend - body) % n)
					goto bad;
				for (; body < bend; body += n) {
					uint64_t bits = 0;
					memcpy(&bits, body, n);
					if (!push(&vals, bits))
						goto bad;
				}
			} else if (field == 6) {
				snprintf(err, errlen, "string tensors are not supported");
				goto fail;
			}
		} else {
			goto bad;
		}
	}
	if (!taprt_dtype_size(t->dtype)) {
		snprintf(err, errlen, "data type %d is not supported", t->dtype);
		goto fail;
	}
	t->numel = 1;
	for (int i = 0; i < t->rank; i++) {
		if (t->dims[i] < 0 || (t->dims[i] && t->numel > INT64_MAX / 16 / t->dims[i])) {
			snprintf(err, errlen, "bad dimension %lld", (long long)t->dims[i]);
			goto fail;
		}
		t->numel *= t->dims[i];
	}
	if (shape) {
		bool same = t->dtype == shape->dtype && t->rank == shape->rank;
		for (int i = 0; same && i < t->rank; i++)
			same = t->dims[i] == shape->dims[i];
		if (!same) {
			free(vals.vals);
			return 1;
		}
	}
	int es = taprt_dtype_size(t->dtype);
	if (want < 0)
		want = t->numel - first;
	if (first < 0 || want < 0 || first + want > t->numel) {
		snprintf(err, errlen, "elements [%lld, %lld) asked of %lld", (long long)first,
		    (long long)(first + want), (long long)t->numel);
		goto fail;
	}
	if (raw && (int64_t)rawlen != t->numel * es) {
		snprintf(err, errlen, "raw_data is %llu bytes, expected %lld", (unsigned long long)rawlen,
		    (long long)(t->numel * es));
		goto fail;
	}
	if (!raw && vals.seen != t->numel) {
		snprintf(err, errlen, "%lld values, expected %lld", (long long)vals.seen,
		    (long long)t->numel);
		goto fail;
	}
	void *out = dst;
	if (!out && !(out = t->data = malloc((size_t)(want * es) + 1)))
		goto bad;
	if (raw)
		memcpy(out, raw + first * es, (size_t)(want * es));
	else
		for (int64_t i = 0; i < want; i++) /* little-endian truncation */
			memcpy((char *)out + i * es, &vals.vals[i], es);
	free(vals.vals);
	return 0;
rank:
	snprintf(err, errlen, "rank over %d", TAPRT_MAX_RANK);
	goto fail;
bad:
	snprintf(err, errlen, "not a TensorProto (malformed protobuf)");
fail:
	free(vals.vals);
	free(t->data);
	t->data = NULL;
	return -1;
}

int
taprt_pb_parse(const uint8_t *buf, size_t len, taprt_pb *t, char *err, size_t errlen)
{
	return parse(buf, len, t, 0, -1, NULL, NULL, err, errlen);
}

/* Open path for reading: a regular file of at most max_bytes, opened
 * without blocking (a FIFO or a device in the data directory is refused,
 * not waited on or read without end).  The fd, or -1 with err. */
static int
open_pb(const char *path, int64_t max_bytes, struct stat *st, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
		close(fd);
		snprintf(err, errlen, "%s: not a regular file", path);
		return -1;
	}
	if (st->st_size > max_bytes) {
		close(fd);
		snprintf(err, errlen, "%s: %lld bytes, more than a tensor of this input can take (%lld)",
		    path, (long long)st->st_size, (long long)max_bytes);
		return -1;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

int
taprt_pb_read_part(const char *path, int64_t max_bytes, const taprt_pb *shape, int64_t first,
    int64_t n, void *dst, taprt_pb *t, char *err, size_t errlen)
{
	struct stat st;
	int fd = open_pb(path, max_bytes, &st, err, errlen);
	if (fd < 0)
		return -1;
	/* mapped, not read: only the pages of the rows asked for (and the
	 * header) are touched, however large the whole batch's file is */
	void *m = st.st_size ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
	close(fd);
	if (m == MAP_FAILED) {
		snprintf(err, errlen, "%s: cannot map: %s", path, strerror(errno));
		return -1;
	}
	char why[200];
	memset(t, 0, sizeof *t);
	int rc = parse(m ? m : "", (size_t)st.st_size, t, first, n, dst, shape, why, sizeof why);
	if (m)
		munmap(m, (size_t)st.st_size);
	if (rc < 0)
		snprintf(err, errlen, "%s: %s", path, why);
	return rc;
}

int
taprt_pb_read(const char *path, int64_t max_bytes, taprt_pb *t, char *err, size_t errlen)
{
	struct stat st;
	int fd = open_pb(path, max_bytes, &st, err, errlen);
	if (fd < 0)
		return -1;
	size_t cap = (size_t)st.st_size + 1, len = 0;
	uint8_t *buf = malloc(cap);
	bool ioerr = !buf;
	while (buf && len < cap) {
		ssize_t r = read(fd, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			ioerr = r < 0;
			break;
		}
		len += (size_t)r;
	}
	close(fd);
	if (ioerr || len > (size_t)st.st_size) { /* it grew while we read it */
		free(buf);
		snprintf(err, errlen, "%s: cannot read", path);
		return -1;
	}
	char why[200];
	int rc = taprt_pb_parse(buf, len, t, why, sizeof why);
	free(buf);
	if (rc)
		snprintf(err, errlen, "%s: %s", path, why);
	return rc;
}

static void
put_varint(FILE *f, uint64_t v)
{
	while (v >= 0x80) {
		fputc((int)(v & 0x7f) | 0x80, f);
		v >>= 7;
	}
	fputc((int)v, f);
}

int
taprt_pb_write(const char *path, const char *name, int dtype, int rank, const int64_t *dims,
    const void *data)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	int64_t n = 1;
	for (int i = 0; i < rank; i++) {
		put_varint(f, 1 << 3);
		put_varint(f, (uint64_t)dims[i]);
		n *= dims[i];
	}
	put_varint(f, 2 << 3);
	put_varint(f, (uint64_t)dtype);
	size_t nl = strlen(name);
	put_varint(f, 8 << 3 | 2);
	put_varint(f, nl);
	fwrite(name, 1, nl, f);
	uint64_t bytes = (uint64_t)(n * taprt_dtype_size(dtype));
	put_varint(f, 9 << 3 | 2);
	put_varint(f, bytes);
	fwrite(data, 1, bytes, f);
	bool ok = !ferror(f);
	return fclose(f) == 0 && ok ? 0 : -1;
}
