/*
 * test_backend.c - the backend's memory plan and the runtime's TensorProto
 * reader.
 *
 * The memory plan is checked against its definition, by brute force over
 * every pair of tensors of every fixture: two tensors whose lifetimes
 * overlap never share arena bytes, a small tensor takes no bytes freed
 * less than EMIT_COOL_BYTES of tensors before it is made (an inference
 * program's cooling), and every block is aligned and inside the arena;
 * at a batch whose tensors pass EMIT_COOL_BYTES, bytes are reused.  The
 * reader is checked on hand-encoded protobuf bytes and on every
 * truncation of a real file.
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "backend/emit.h"
#include "frontend/onnx.h"
#include "passes/passes.h"
#include "passes/pipeline.h"
#include "runtime/internal.h"
#include "test/unit/util.h"

static const char *fixtures[] = {"gpt", "bert", "mlp", "cnn", "ln17"};

static Graph *
load_fixture(const char *name, int64_t batch)
{
	char rel[256];
	snprintf(rel, sizeof rel, "test/e2e/%s/model.onnx", name);
	OnnxOptions o = {.batch = batch};
	Graph *g = onnx_load(srcpath(rel), &o);
	PassCtx cx = {0};
	if (g)
		pass_fold_constants(g, &cx);
	return g;
}

/* Do the blocks of sources ra and rb, with all their views, live at once? */
static bool
life(const MemPlan *mp, const int *def, const int *end, TensorId ra, TensorId rb)
{
	(void)mp;
	return def[ra] <= end[rb] && def[rb] <= end[ra];
}

static void
memplan_no_overlap(void)
{
	for (size_t run = 0; run < 2 * sizeof fixtures / sizeof *fixtures; run++) {
		size_t f = run / 2;
		int64_t batch = run % 2 ? 1024 : 4; /* tiny tensors, then big ones */
		Graph *g = load_fixture(fixtures[f], batch);
		CU_ASSERT_PTR_NOT_NULL_FATAL(g);
		MemPlan mp;
		sched_build(g, SCHED_1F1B, NULL); /* inference, one micro-batch: one step */
		emit_memplan(g, 0, &mp);
		CU_ASSERT_EQUAL_FATAL(mp.nsteps, 1);
		const int64_t *offset = mp.off[0];
		/* lifetime of each arena tensor: [producer, last use] in node order */
		int nt = g->ntensors;
		int *def = malloc(sizeof *def * nt), *end = malloc(sizeof *end * nt);
		for (int t = 0; t < nt; t++)
			def[t] = end[t] = -1;
		for (NodeId n = 0; n < g->nnodes; n++) {
			for (int i = 0; i < g->nodes[n].nout; i++)
				if (g->nodes[n].out[i] != IR_NONE)
					def[g->nodes[n].out[i]] = end[g->nodes[n].out[i]] = n;
			for (int i = 0; i < g->nodes[n].nin; i++)
				if (g->nodes[n].in[i] != IR_NONE)
					end[g->nodes[n].in[i]] = n;
		}
		for (int t = 0; t < nt; t++)
			if (mp.view[t] != IR_NONE && end[t] > end[mp.view[t]])
				end[mp.view[t]] = end[t];
		/* made[n]: the arena bytes of the blocks nodes 0 .. n make */
		int64_t *made = calloc(g->nnodes + 1, sizeof *made);
		for (TensorId t = 0; t < nt; t++)
			if (offset[t] >= 0 && mp.view[t] == IR_NONE && def[t] >= 0)
				made[def[t]] += (ir_nbytes(&g->tensors[t]) + 63) & ~(int64_t)63;
		for (NodeId n = 1; n < g->nnodes; n++)
			made[n] += made[n - 1];
		int placed = 0;
		for (int a = 0; a < nt; a++) {
			if (offset[a] < 0)
				continue;
			placed += mp.view[a] == IR_NONE;
			int64_t sa = ir_nbytes(&g->tensors[a]);
			CU_ASSERT_EQUAL(offset[a] % 64, 0);
			CU_ASSERT_TRUE(offset[a] + sa <= mp.arena_bytes);
			CU_ASSERT_EQUAL(g->tensors[a].kind, TK_VALUE);
			for (int b = a + 1; b < nt; b++) {
				if (offset[b] < 0)
					continue;
				int64_t sb = ir_nbytes(&g->tensors[b]);
				/* a view and its source share bytes by design */
				TensorId ra = mp.view[a] != IR_NONE ? mp.view[a] : a;
				TensorId rb = mp.view[b] != IR_NONE ? mp.view[b] : b;
				if (ra == rb)
					continue;
				bool live = life(&mp, def, end, ra, rb);
				bool share = offset[a] < offset[b] + sb && offset[b] < offset[a] + sa;
				if (live && share && sa && sb) {
					fprintf(stderr, "%s: tensors %d and %d overlap\n", fixtures[f], a, b);
					CU_FAIL("two live tensors share arena bytes");
				}
				/* the later one (w) over the bytes of the one
				 * dead before it (d): only big, or once enough
				 * else was made in between */
				TensorId d = end[ra] < def[rb] ? ra : rb, w = d == ra ? rb : ra;
				if (!live && share && sa && sb && ra == a && rb == b && end[d] < def[w] &&
				    ((ir_nbytes(&g->tensors[w]) + 63) & ~(int64_t)63) < EMIT_COOL_BYTES &&
				    made[def[w] - 1] - made[end[d]] < EMIT_COOL_BYTES) {
					fprintf(stderr, "%s: tensor %d takes %d's bytes too soon\n",
					    fixtures[f], w, d);
					CU_FAIL("a small tensor reuses bytes freed just before");
				}
			}
		}
		CU_ASSERT_TRUE(placed > 0);
		/* graph outputs go straight to the program's buffers */
		for (int i = 0; i < g->noutputs; i++)
			CU_ASSERT_EQUAL(offset[g->outputs[i]], -1);
		/* reuse happens: the arena is smaller than all activations
		 * together, where they are big enough to skip the cooling */
		int64_t total = 0;
		for (int t = 0; t < nt; t++)
			if (offset[t] >= 0 && mp.view[t] == IR_NONE)
				total += ir_nbytes(&g->tensors[t]);
		if (placed > 4 && batch > 4)
			CU_ASSERT_TRUE(mp.arena_bytes < total);
		free(made);
		free(def);
		free(end);
		emit_memplan_free(&mp);
		ir_free(g);
	}
}

/* dims [2,3], data_type f32, raw_data: the bytes a TensorProto writer emits */
static void
pb_parse_raw_and_typed(void)
{
	float v[6] = {1, 2, 3, 4, 5, 6};
	uint8_t buf[128];
	size_t n = 0;
	buf[n++] = 0x08; buf[n++] = 2;      /* dims: 2 */
	buf[n++] = 0x08; buf[n++] = 3;      /* dims: 3 */
	buf[n++] = 0x10; buf[n++] = 1;      /* data_type: FLOAT */
	buf[n++] = 0x42; buf[n++] = 1; buf[n++] = 'x'; /* name */
	buf[n++] = 0x4a; buf[n++] = 24;     /* raw_data, 24 bytes */
	memcpy(buf + n, v, 24);
	n += 24;
	taprt_pb t;
	char err[200];
	CU_ASSERT_EQUAL_FATAL(taprt_pb_parse(buf, n, &t, err, sizeof err), 0);
	CU_ASSERT_EQUAL(t.rank, 2);
	CU_ASSERT_EQUAL(t.dims[1], 3);
	CU_ASSERT_EQUAL(t.numel, 6);
	CU_ASSERT_STRING_EQUAL(t.name, "x");
	CU_ASSERT_EQUAL(memcmp(t.data, v, 24), 0);
	free(t.data);

	/* int64_data packed, data_type after the values: [7, -1] as i64 */
	uint8_t b2[] = {0x08, 2, 0x3a, 11, 7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
		0x10, 7};
	CU_ASSERT_EQUAL_FATAL(taprt_pb_parse(b2, sizeof b2, &t, err, sizeof err), 0);
	CU_ASSERT_EQUAL(((int64_t *)t.data)[0], 7);
	CU_ASSERT_EQUAL(((int64_t *)t.data)[1], -1);
	free(t.data);

	/* raw_data of the wrong length */
	buf[10] = 20;
	CU_ASSERT_NOT_EQUAL(taprt_pb_parse(buf, n - 4, &t, err, sizeof err), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "raw_data is 20 bytes, expected 24"));
}

/* taprt_pb_read_part: a range of elements, raw or typed, and the shape check */
static void
pb_read_part(void)
{
	char path[] = "/tmp/tapc-pbpart-XXXXXX";
	int fd = mkstemp(path);
	CU_ASSERT_FATAL(fd >= 0);
	/* dims [3,2], int64_data packed (data_type after it): 0 1 2 3 4 5 */
	uint8_t typed[] = {0x08, 3, 0x08, 2, 0x3a, 6, 0, 1, 2, 3, 4, 5, 0x10, 7};
	CU_ASSERT_EQUAL_FATAL(write(fd, typed, sizeof typed), (ssize_t)sizeof typed);
	close(fd);
	taprt_pb shape = {.dtype = TAPRT_I64, .rank = 2, .dims = {3, 2}}, got;
	int64_t rows[2] = {-1, -1};
	char err[300];
	/* the second row, as a replica of three would take it */
	CU_ASSERT_EQUAL(taprt_pb_read_part(path, 1 << 20, &shape, 2, 2, rows, &got, err, sizeof err), 0);
	CU_ASSERT(rows[0] == 2 && rows[1] == 3);
	CU_ASSERT(got.numel == 6 && got.data == NULL);
	/* another shape: 1, nothing copied, the file's header for the message */
	taprt_pb other = {.dtype = TAPRT_I64, .rank = 2, .dims = {2, 3}};
	rows[0] = -1;
	CU_ASSERT_EQUAL(taprt_pb_read_part(path, 1 << 20, &other, 0, 2, rows, &got, err, sizeof err), 1);
	CU_ASSERT(rows[0] == -1 && got.dims[0] == 3 && got.dims[1] == 2);
	/* past the end: refused */
	CU_ASSERT_EQUAL(taprt_pb_read_part(path, 1 << 20, &shape, 5, 2, rows, &got, err, sizeof err), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "elements [5, 7) asked of 6"));

	/* raw_data f32 [4]: elements 1 and 2 */
	float v[4] = {1.5f, 2.5f, 3.5f, 4.5f}, two[2] = {0};
	uint8_t raw[64] = {0x08, 4, 0x10, 1, 0x4a, 16};
	memcpy(raw + 6, v, 16);
	fd = open(path, O_WRONLY | O_TRUNC);
	CU_ASSERT_EQUAL_FATAL(write(fd, raw, 22), 22);
	close(fd);
	taprt_pb f4 = {.dtype = TAPRT_F32, .rank = 1, .dims = {4}};
	CU_ASSERT_EQUAL(taprt_pb_read_part(path, 1 << 20, &f4, 1, 2, two, &got, err, sizeof err), 0);
	CU_ASSERT(two[0] == 2.5f && two[1] == 3.5f);
	/* a file larger than the cap, and one that is not there */
	CU_ASSERT_EQUAL(taprt_pb_read_part(path, 8, &f4, 0, 1, two, &got, err, sizeof err), -1);
	unlink(path);
	CU_ASSERT_EQUAL(taprt_pb_read_part(path, 1 << 20, &f4, 0, 1, two, &got, err, sizeof err), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "No such file"));
}

/* every prefix of a real input file: parsed or refused, never a crash */
static void
pb_truncations(void)
{
	FILE *f = fopen(srcpath("test/e2e/bert/test_data_set_1/input_1.pb"), "rb");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	uint8_t buf[4096];
	size_t len = fread(buf, 1, sizeof buf, f);
	fclose(f);
	int ok = 0;
	for (size_t k = 0; k <= len; k++) {
		uint8_t *copy = malloc(k + 1); /* exact size: ASan sees over-reads */
		memcpy(copy, buf, k);
		taprt_pb t;
		char err[200];
		if (taprt_pb_parse(copy, k, &t, err, sizeof err) == 0) {
			ok++;
			free(t.data);
		}
		free(copy);
	}
	CU_ASSERT_TRUE(ok >= 1); /* the whole file at least */
}

void
suite_backend(CU_pSuite s)
{
	ADD(s, memplan_no_overlap);
	ADD(s, pb_parse_raw_and_typed);
	ADD(s, pb_read_part);
	ADD(s, pb_truncations);
}
