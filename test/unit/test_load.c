/*
 * test_load.c - the ONNX loader (frontend/onnx_load.c, frontend/wirescan.c)
 * against facts it cannot have made up itself:
 *
 *  - the e2e fixtures load; inputs and outputs are what test/e2e/README.md
 *    documents; every initializer has the dtype and dims protobuf-c's own
 *    unpack gives, and every file-backed weight's bytes at (offset, length)
 *    in model.onnx equal that unpack's bytes (this checks the wire scan);
 *  - onnx_wirescan on wire bytes built here by hand: the ONNX_MAX_DEPTH
 *    boundary, a 50,000-deep nested-subgraph chain of about 1 MB, framing
 *    errors, and every sub-message field that protobuf-c's descriptors
 *    list (so the scan's table cannot fall behind onnx.proto);
 *  - onnx_load_buffer without a directory refuses external data, and
 *    -batch re-specializes dim 0 of the inputs and of the inferred outputs;
 *  - a FIFO named as external data (or as the model) is refused, not
 *    opened for a read that blocks forever (git cannot store a FIFO, so
 *    this is here and not in test/diag/);
 *  - every 7th prefix of the mlp fixture and 2,000 seeded single-byte
 *    mutations load or fail cleanly (build with
 *    CFLAGS="-fsanitize=address,undefined -g -O1" to make that a check).
 *
 * Needs: UNIT_SRCDIR (the test/e2e/NAME/model.onnx fixtures and
 * test/diag/ok_external), the protobuf-c code generated from onnx.proto,
 * a little-endian host, fork() and mkfifo() for the FIFO test.
 */
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frontend/onnx.h"
#include "onnx/onnx.pb-c.h"
#include "test/unit/util.h"

/* ------------------------------------------------------------- helpers */

static uint8_t *
read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc((size_t)n + 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		fclose(f);
		return NULL;
	}
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static bool
has_diag(const char *needle)
{
	return strstr(diag_last, needle) != NULL;
}

/* Wire bytes built back to front: wrapping what is there so far into a
 * field of its parent is a prepend. */
typedef struct {
	uint8_t *buf;
	size_t cap, start;              /* bytes are buf[start..cap) */
} Wire;

static void
w_init(Wire *w, size_t cap)
{
	w->buf = malloc(cap);
	w->cap = cap;
	w->start = cap;
	CU_ASSERT_FATAL(w->buf != NULL);
}

static size_t
w_len(const Wire *w)
{
	return w->cap - w->start;
}

static const uint8_t *
w_data(const Wire *w)
{
	return w->buf + w->start;
}

static void
w_prepend(Wire *w, const void *p, size_t n)
{
	if (n > w->start) {
		size_t len = w_len(w), cap = w->cap * 2 + n;
		uint8_t *b = malloc(cap);
		CU_ASSERT_FATAL(b != NULL);
		memcpy(b + cap - len, w->buf + w->start, len);
		free(w->buf);
		w->buf = b;
		w->cap = cap;
		w->start = cap - len;
	}
	w->start -= n;
	memcpy(w->buf + w->start, p, n);
}

static size_t
enc_varint(uint8_t *out, uint64_t v)
{
	size_t n = 0;
	do {
		out[n] = v & 0x7f;
		v >>= 7;
		if (v)
			out[n] |= 0x80;
		n++;
	} while (v);
	return n;
}

static void
w_varint(Wire *w, uint64_t v)
{
	uint8_t b[10];
	w_prepend(w, b, enc_varint(b, v));
}

/* Wrap everything so far as length-delimited field `field`. */
static void
w_wrap(Wire *w, int field)
{
	w_varint(w, w_len(w));
	w_varint(w, (uint64_t)field << 3 | 2);
}

static void
w_string(Wire *w, int field, const char *s)
{
	w_prepend(w, s, strlen(s));
	w_varint(w, strlen(s));
	w_varint(w, (uint64_t)field << 3 | 2);
}

static void
w_int(Wire *w, int field, uint64_t v)
{
	w_varint(w, v);
	w_varint(w, (uint64_t)field << 3);
}

/*
 * A ModelProto whose messages nest `levels` deep counting the model:
 * ModelProto.graph -> GraphProto.node -> NodeProto.attribute ->
 * AttributeProto.g -> GraphProto.node -> ...  *key_at receives the byte
 * offset of the key of the message at depth `mark` (model = depth 0).
 * `pad` bytes of doc_string go into each node.
 */
static Wire
nested_model(int levels, int mark, size_t *key_at, size_t pad)
{
	Wire w;
	w_init(&w, 1 << 16);
	char *doc = calloc(pad + 1, 1);
	memset(doc, 'd', pad);
	size_t from_end = 0;
	/* depth d >= 1 holds a graph when (d - 1) % 3 == 0, a node when 1,
	 * an attribute when 2; wrap it into its parent at depth d - 1 */
	for (int d = levels - 1; d >= 1; d--) {
		int parent = d == 1 ? -1 : (d - 2) % 3;
		/* Model.graph, Graph.node, Node.attribute, Attribute.g */
		static const int field[] = {7, 1, 5, 6};
		w_wrap(&w, field[parent + 1]);
		if (d == mark)          /* its key is first now; siblings go before */
			from_end = w_len(&w);
		if (parent == 1) {
			w_string(&w, 4, "If");
			if (pad)
				w_string(&w, 6, doc);
		} else if (parent == 2) {
			w_int(&w, 20, 5);
			w_string(&w, 1, "then_branch");
		}
	}
	w_int(&w, 1, 8);                                /* ir_version */
	free(doc);
	if (key_at)
		*key_at = w_len(&w) - from_end;
	return w;
}

/* ------------------------------------------------------------ fixtures */

typedef struct {
	const char *name;
	DType dtype;
	int rank;
	int64_t dims[4];                /* dim 0 is the symbolic batch, 1 here */
} Io;

static const struct {
	const char *model;
	int opset;
	int nin, nout;
	Io in[3], out[2];
} fixtures[] = {
	{"gpt", 14, 1, 1, {{"idx", DT_I64, 2, {1, 16}}},
		{{"logits", DT_F32, 3, {1, 16, 128}}}},
	{"bert", 13, 3, 2, {{"input_ids", DT_I64, 2, {1, 12}},
		{"attention_mask", DT_I64, 2, {1, 12}},
		{"token_type_ids", DT_I64, 2, {1, 12}}},
		{{"last_hidden_state", DT_F32, 3, {1, 12, 64}},
		{"pooler_output", DT_F32, 2, {1, 64}}}},
	{"mlp", 13, 1, 1, {{"x", DT_F32, 2, {1, 32}}}, {{"y", DT_F32, 2, {1, 10}}}},
	{"cnn", 13, 1, 1, {{"x", DT_F32, 4, {1, 3, 16, 16}}}, {{"y", DT_F32, 2, {1, 10}}}},
	{"ln17", 17, 1, 1, {{"x", DT_F32, 3, {1, 8, 32}}}, {{"y", DT_F32, 3, {1, 8, 32}}}},
};

static void
check_io(Graph *g, TensorId id, const Io *io, bool input)
{
	Tensor *t = ir_tensor(g, id);
	CU_ASSERT_STRING_EQUAL(t->name, io->name);
	CU_ASSERT_EQUAL(t->dtype, io->dtype);
	CU_ASSERT_EQUAL_FATAL(t->rank, io->rank);
	for (int d = 0; d < io->rank; d++)
		CU_ASSERT_EQUAL(t->dims[d], io->dims[d]);
	if (input) {
		CU_ASSERT_EQUAL(t->kind, TK_INPUT);
		CU_ASSERT_TRUE(t->sym0 && strcmp(t->sym0, "batch") == 0);
	}
}

static Tensor *
find_tensor(Graph *g, const char *name)
{
	for (int i = 0; i < g->ntensors; i++)
		if (g->tensors[i].name && strcmp(g->tensors[i].name, name) == 0)
			return &g->tensors[i];
	return NULL;
}

/*
 * Every initializer of the model at path, as protobuf-c unpacks it, against
 * the loaded graph g: dtype, dims, and the bytes, read from the model file
 * at the (offset, length) the loader recorded for a file-backed weight.
 * Returns how many file-backed weights were compared.
 */
static int
check_weights(Graph *g, const char *path)
{
	size_t len;
	uint8_t *buf = read_all(path, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, buf);
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	int nfile = 0;
	for (size_t i = 0; i < m->graph->n_initializer; i++) {
		Onnx__TensorProto *tp = m->graph->initializer[i];
		Tensor *t = find_tensor(g, tp->name);
		CU_ASSERT_PTR_NOT_NULL_FATAL(t);
		CU_ASSERT_EQUAL(t->kind, TK_WEIGHT);
		CU_ASSERT_EQUAL((int)t->dtype, tp->data_type);
		CU_ASSERT_EQUAL_FATAL(t->rank, (int)tp->n_dims);
		for (size_t d = 0; d < tp->n_dims; d++)
			CU_ASSERT_EQUAL(t->dims[d], tp->dims[d]);
		const void *want;
		size_t wlen;
		if (tp->has_raw_data) {
			want = tp->raw_data.data;
			wlen = tp->raw_data.len;
		} else if (tp->n_float_data) {
			want = tp->float_data;
			wlen = tp->n_float_data * sizeof(float);
		} else if (tp->n_double_data) {
			want = tp->double_data;
			wlen = tp->n_double_data * sizeof(double);
		} else if (tp->n_int64_data) {
			want = tp->int64_data;
			wlen = tp->n_int64_data * sizeof(int64_t);
		} else {
			continue;
		}
		CU_ASSERT_EQUAL_FATAL(t->length, (int64_t)wlen);
		if (t->data == DATA_INLINE) {
			CU_ASSERT_TRUE(memcmp(t->bytes, want, wlen) == 0);
			continue;
		}
		CU_ASSERT_EQUAL_FATAL(t->data, DATA_FILE);
		CU_ASSERT_EQUAL(t->file, 0);
		CU_ASSERT_FATAL(t->offset >= 0 && t->offset + t->length <= (int64_t)len);
		CU_ASSERT_TRUE(memcmp(buf + t->offset, want, wlen) == 0);
		nfile++;
	}
	onnx__model_proto__free_unpacked(m, NULL);
	free(buf);
	return nfile;
}

static void
fixtures_load(void)
{
	for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
		char rel[64];
		snprintf(rel, sizeof rel, "test/e2e/%s/model.onnx", fixtures[f].model);
		const char *path = srcpath(rel);
		quiet_diags();
		OnnxOptions o = {0};
		Graph *g = onnx_load(path, &o);
		if (!g)
			fprintf(stderr, "\n%s: %s\n", rel, diag_last);
		CU_ASSERT_PTR_NOT_NULL_FATAL(g);
		CU_ASSERT_EQUAL(diag_count, 0);
		CU_ASSERT_EQUAL(g->opset, fixtures[f].opset);
		for (int i = 0; i < g->ntensors; i++)
			CU_ASSERT_TRUE(g->tensors[i].rank >= 0);
		CU_ASSERT_EQUAL_FATAL(g->ninputs, fixtures[f].nin);
		CU_ASSERT_EQUAL_FATAL(g->noutputs, fixtures[f].nout);
		for (int i = 0; i < g->ninputs; i++)
			check_io(g, g->inputs[i], &fixtures[f].in[i], true);
		for (int i = 0; i < g->noutputs; i++)
			check_io(g, g->outputs[i], &fixtures[f].out[i], false);

		CU_ASSERT_TRUE(check_weights(g, path) > 0);
		CU_ASSERT_STRING_EQUAL(g->files[0], "model.onnx");
		ir_free(g);
	}
}

/* test/diag/ok_typed_data.onnx: weights in packed float_data and
 * double_data (file-backed) and int64_data (varints, decoded inline) */
static void
typed_data_weights(void)
{
	const char *path = srcpath("test/diag/ok_typed_data.onnx");
	quiet_diags();
	OnnxOptions o = {0};
	Graph *g = onnx_load(path, &o);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_EQUAL(check_weights(g, path), 2);
	Tensor *k = find_tensor(g, "k");
	CU_ASSERT_PTR_NOT_NULL_FATAL(k);
	CU_ASSERT_EQUAL(k->data, DATA_INLINE);
	ir_free(g);
}

static void
batch_option(void)
{
	const char *path = srcpath("test/e2e/gpt/model.onnx");
	const int64_t batches[] = {0, 1, 3, 64};
	for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
		quiet_diags();
		OnnxOptions o = {.batch = batches[i]};
		Graph *g = onnx_load(path, &o);
		CU_ASSERT_PTR_NOT_NULL_FATAL(g);
		int64_t b = batches[i] ? batches[i] : 1;
		Tensor *in = ir_tensor(g, g->inputs[0]), *out = ir_tensor(g, g->outputs[0]);
		CU_ASSERT_STRING_EQUAL(in->name, "idx");
		CU_ASSERT_EQUAL(in->rank, 2);
		CU_ASSERT_EQUAL(in->dims[0], b);
		CU_ASSERT_EQUAL(in->dims[1], 16);
		CU_ASSERT_STRING_EQUAL(out->name, "logits");
		CU_ASSERT_EQUAL_FATAL(out->rank, 3);
		CU_ASSERT_EQUAL(out->dims[0], b);
		CU_ASSERT_EQUAL(out->dims[1], 16);
		CU_ASSERT_EQUAL(out->dims[2], 128);
		ir_free(g);
	}
}

/* ---------------------------------------------------------- wire scan */

static bool
scan(const void *bytes, size_t len)
{
	WireInfo wi;
	/* a copy of exactly len bytes, so ASan sees any read past the end */
	uint8_t *b = malloc(len ? len : 1);
	memcpy(b, bytes, len);
	bool ok = onnx_wirescan(b, len, "t.onnx", &wi);
	if (ok)
		free(wi.init);
	else
		CU_ASSERT_TRUE(wi.init == NULL && wi.ninit == 0);
	free(b);
	return ok;
}

static void
wirescan_depth_boundary(void)
{
	/* ONNX_MAX_DEPTH messages nested counting the model are accepted;
	 * the one at depth ONNX_MAX_DEPTH (model = depth 0) is refused */
	for (int levels = 1; levels <= ONNX_MAX_DEPTH + 5; levels++) {
		size_t at = 0;
		Wire w = nested_model(levels, ONNX_MAX_DEPTH, &at, 0);
		quiet_diags();
		bool ok = scan(w_data(&w), w_len(&w));
		CU_ASSERT_EQUAL(ok, levels <= ONNX_MAX_DEPTH);
		if (levels > ONNX_MAX_DEPTH) {
			char want[128];
			snprintf(want, sizeof want, "t.onnx: protobuf messages nested deeper than %d at byte offset %zu",
			    ONNX_MAX_DEPTH, at);
			if (!has_diag(want))
				fprintf(stderr, "\nwant '%s'\ngot  '%s'\n", want, diag_last);
			CU_ASSERT_TRUE(has_diag(want));
		}
		/* protobuf-c agrees the accepted bytes are well-formed */
		if (ok) {
			Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, w_len(&w), w_data(&w));
			CU_ASSERT_PTR_NOT_NULL(m);
			if (m)
				onnx__model_proto__free_unpacked(m, NULL);
		}
		free(w.buf);
	}
}

static void
wirescan_deep_chain(void)
{
	/* 50,000 levels with 40 bytes of doc_string per node: about 1 MB */
	Wire w = nested_model(50000, ONNX_MAX_DEPTH, NULL, 40);
	CU_ASSERT(w_len(&w) > 900000 && w_len(&w) < 2000000);
	quiet_diags();
	CU_ASSERT_FALSE(scan(w_data(&w), w_len(&w)));
	CU_ASSERT_TRUE(has_diag("nested deeper than"));
	quiet_diags();
	OnnxOptions o = {0};
	CU_ASSERT_PTR_NULL(onnx_load_buffer(w_data(&w), w_len(&w), "deep.onnx", NULL, &o));
	CU_ASSERT_TRUE(has_diag("deep.onnx: protobuf messages nested deeper than"));
	CU_ASSERT_EQUAL(diag_count, 1);
	free(w.buf);
}

static void
wirescan_framing(void)
{
	static const struct {
		const char *bytes;
		size_t len;
		bool ok;
	} cases[] = {
		{"", 0, true},
		{"\x08\x08", 2, true},                  /* ir_version 8 */
		{"\x12\x03" "abc", 5, true},            /* producer_name */
		{"\x08\x80", 2, false},                 /* truncated varint */
		{"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12, false}, /* 11-byte varint */
		{"\x88", 1, false},                     /* truncated key */
		{"\x12\x05" "ab", 4, false},            /* length past end */
		{"\x12\xff\xff\xff\xff\x0f", 6, false}, /* huge length */
		{"\x0b", 1, false},                     /* wire type 3: start group */
		{"\x0c", 1, false},                     /* wire type 4: end group */
		{"\x0e", 1, false},                     /* wire type 6 */
		{"\x0f", 1, false},                     /* wire type 7 */
		{"\x00\x00", 2, false},                 /* field number 0 */
		{"\x02\x00", 2, false},                 /* field 0, length-delimited */
		{"\x09" "1234567", 8, false},           /* fixed64 cut short */
		{"\x0d" "123", 4, false},               /* fixed32 cut short */
		{"\x3a\x02\x08\x80", 4, false},         /* graph holding a truncated varint */
		{"\x3a\x03\x12\x05" "a", 5, false},     /* graph field shorter than its child */
		{"\x3a\x00\x3a\x00", 4, false},         /* two graph fields */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		quiet_diags();
		bool ok = scan(cases[i].bytes, cases[i].len);
		if (ok != cases[i].ok)
			fprintf(stderr, "\nwire case %zu: scan says %d\n", i, ok);
		CU_ASSERT_EQUAL(ok, cases[i].ok);
		if (!cases[i].ok) {
			CU_ASSERT_EQUAL(diag_count, 1);
			CU_ASSERT_TRUE(has_diag("tapc: error: t.onnx: "));
		}
	}
}

/*
 * Every message-typed field protobuf-c knows, reached from ModelProto by
 * a path of message fields, must be one the scan descends into: put a
 * malformed payload (a field-number-0 key) there and the scan must see it.
 */
#define MAXMSG 64

static void
wirescan_knows_every_submessage(void)
{
	const ProtobufCMessageDescriptor *msg[MAXMSG];
	int parent[MAXMSG], pfield[MAXMSG], n = 0;
	msg[n] = &onnx__model_proto__descriptor;
	parent[n] = -1;
	pfield[n++] = 0;
	for (int i = 0; i < n; i++)
		for (unsigned f = 0; f < msg[i]->n_fields; f++) {
			const ProtobufCFieldDescriptor *fd = &msg[i]->fields[f];
			if (fd->type != PROTOBUF_C_TYPE_MESSAGE)
				continue;
			int k = 0;
			while (k < n && msg[k] != fd->descriptor)
				k++;
			if (k == n && n < MAXMSG) {
				msg[n] = fd->descriptor;
				parent[n] = i;
				pfield[n++] = (int)fd->id;
			}
		}
	CU_ASSERT_TRUE(n >= 15 && n < MAXMSG);
	int checked = 0;
	for (int i = 0; i < n; i++)
		for (unsigned f = 0; f < msg[i]->n_fields; f++) {
			const ProtobufCFieldDescriptor *fd = &msg[i]->fields[f];
			if (fd->type != PROTOBUF_C_TYPE_MESSAGE)
				continue;
			Wire w;
			w_init(&w, 256);
			w_prepend(&w, "\x00\x00", 2);
			w_wrap(&w, (int)fd->id);
			for (int k = i; parent[k] >= 0; k = parent[k])
				w_wrap(&w, pfield[k]);
			quiet_diags();
			bool ok = scan(w_data(&w), w_len(&w));
			if (ok)
				fprintf(stderr, "\nwire scan does not descend into %s.%s (field %u)\n",
				    msg[i]->name, fd->name, fd->id);
			CU_ASSERT_FALSE(ok);
			checked++;
			free(w.buf);
		}
	CU_ASSERT_TRUE(checked >= 30);
}

/* ------------------------------------------------------ load_buffer */

static void
buffer_refuses_external(void)
{
	size_t len;
	uint8_t *buf = read_all(srcpath("test/diag/ok_external/model.onnx"), &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	OnnxOptions o = {0};
	quiet_diags();
	CU_ASSERT_PTR_NULL(onnx_load_buffer(buf, len, "m.onnx", NULL, &o));
	CU_ASSERT_TRUE(has_diag("m.onnx: initializer 'w': external data is not allowed here"));
	/* the same bytes with the directory: accepted, the weight in w.bin */
	quiet_diags();
	Graph *g = onnx_load_buffer(buf, len, "m.onnx", srcpath("test/diag/ok_external"), &o);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	Tensor *w = find_tensor(g, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(w);
	CU_ASSERT_EQUAL(w->data, DATA_FILE);
	CU_ASSERT_TRUE(w->file > 0 && w->file < g->nfiles);
	CU_ASSERT_STRING_EQUAL(g->files[w->file], "w.bin");
	CU_ASSERT_EQUAL(w->offset, 0);
	CU_ASSERT_EQUAL(w->length, 16);
	ir_free(g);
	free(buf);
}

/*
 * Run onnx_load(dir/model) in a child with a 5 s alarm: a blocking open of
 * a FIFO shows as a killed child.  Returns the child's status.
 */
static int
load_in_child(const char *path, const char *needle)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		alarm(5);
		quiet_diags();
		OnnxOptions o = {0};
		Graph *g = onnx_load(path, &o);
		_exit(g == NULL && strstr(diag_last, needle) ? 0 : 1);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return st;
}

static void
fifo_refused(void)
{
	char dir[] = "/tmp/tapc-load-XXXXXX", model[64], fifo[64], cmd[160];
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	size_t len;
	uint8_t *buf = read_all(srcpath("test/diag/ok_external/model.onnx"), &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	snprintf(model, sizeof model, "%s/model.onnx", dir);
	FILE *f = fopen(model, "wb");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fwrite(buf, 1, len, f);
	fclose(f);
	free(buf);
	snprintf(fifo, sizeof fifo, "%s/w.bin", dir);
	CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
	int st = load_in_child(model, "external data location 'w.bin' is not a regular file");
	if (st != 0)
		fprintf(stderr, "\nFIFO as external data: %s\n",
		    WIFSIGNALED(st) ? "blocked (killed by the alarm)" : "not refused as expected");
	CU_ASSERT_EQUAL(st, 0);
	st = load_in_child(fifo, "not a regular file");
	if (st != 0)
		fprintf(stderr, "\nFIFO as the model: %s\n",
		    WIFSIGNALED(st) ? "blocked (killed by the alarm)" : "not refused as expected");
	CU_ASSERT_EQUAL(st, 0);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	CU_ASSERT_EQUAL(system(cmd), 0);
}

/* ---------------------------------------------------------------- fuzz */

static uint64_t
xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static void
load_bytes(const uint8_t *src, size_t len)
{
	uint8_t *b = malloc(len ? len : 1);
	memcpy(b, src, len);
	OnnxOptions o = {0};
	quiet_diags();
	Graph *g = onnx_load_buffer(b, len, "fuzz.onnx", NULL, &o);
	/* a graph and no diagnostics, or NULL and at least one */
	CU_ASSERT_EQUAL(g == NULL, diag_count > 0);
	if (g)
		ir_free(g);
	free(b);
}

static void
fuzz_prefixes_and_mutations(void)
{
	size_t len;
	uint8_t *buf = read_all(srcpath("test/e2e/mlp/model.onnx"), &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	for (size_t n = 0; n <= len; n += 7)
		load_bytes(buf, n);
	load_bytes(buf, len);
	uint64_t seed = 0x7a9c2024u;
	uint8_t *m = malloc(len);
	for (int i = 0; i < 2000; i++) {
		memcpy(m, buf, len);
		size_t at = xorshift(&seed) % len;
		m[at] = (uint8_t)xorshift(&seed);
		load_bytes(m, len);
	}
	free(m);
	free(buf);
}

void
suite_load(CU_pSuite s)
{
	ADD(s, fixtures_load);
	ADD(s, typed_data_weights);
	ADD(s, batch_option);
	ADD(s, wirescan_depth_boundary);
	ADD(s, wirescan_deep_chain);
	ADD(s, wirescan_framing);
	ADD(s, wirescan_knows_every_submessage);
	ADD(s, buffer_refuses_external);
	ADD(s, fifo_refused);
	ADD(s, fuzz_prefixes_and_mutations);
}
