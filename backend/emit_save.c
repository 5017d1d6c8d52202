/*
 * emit_save.c - what a training program's --save writes, prepared at
 * compile time: OUT/save.onnx, the input model with every trained weight
 * turned into an external tensor of one data file (model.onnx.data, each
 * tensor 64-byte aligned), and the table that tells the runtime where each
 * weight goes in that file (runtime/save.c writes it after training).
 *
 * The model is read again from its file (through ir_file_read: confined
 * like every input) and changed with protobuf-c: a trained initializer
 * loses its inline data and gets data_location EXTERNAL with location,
 * offset and length; an untrained one that was external in the input
 * model is made inline, so the saved directory stands alone.  Trained
 * weights are the ones with a gradient (Graph.grads), matched to
 * initializers by name; a weight split between tensor-parallel ranks keeps
 * its name, so the runtime's table is keyed by the weight's bytes in the
 * input files (file, offset), as its weight loader's.
 *
 * Needs: autodiff's Graph.grads; libtapc's ONNX protobuf-c code.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/emit.h"
#include "onnx/onnx.pb-c.h"

#define SAVE_MAX_MODEL ((int64_t)2 << 30)

static int64_t
tensor_bytes(const Onnx__TensorProto *t)
{
	int64_t n = 1;
	for (size_t i = 0; i < t->n_dims; i++)
		n *= t->dims[i];
	return n * (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ? 8 : 4);
}

/* The trained weight named name, or IR_NONE. */
static TensorId
trained(const Graph *g, const char *name)
{
	for (int i = 0; i < g->ngrads; i++)
		if (strcmp(g->tensors[g->grads[i].weight].name, name) == 0)
			return g->grads[i].weight;
	return IR_NONE;
}

/* An untrained external initializer's bytes, read now (from the model's
 * directory, confined like the loader's reads); NULL after a diag. */
static void *
external_bytes(Graph *g, const Onnx__TensorProto *t, size_t *len)
{
	const char *loc = NULL;
	int64_t off = 0, n = -1;
	for (size_t i = 0; i < t->n_external_data; i++) {
		const Onnx__StringStringEntryProto *e = t->external_data[i];
		if (!e->key || !e->value)
			continue;
		if (!strcmp(e->key, "location"))
			loc = e->value;
		else if (!strcmp(e->key, "offset"))
			off = strtoll(e->value, NULL, 10);
		else if (!strcmp(e->key, "length"))
			n = strtoll(e->value, NULL, 10);
	}
	if (n < 0)
		n = tensor_bytes(t);
	char why[512];
	int64_t size;
	int fd = loc ? ir_file_open(g->dir, loc, "external data file", "the model's directory", &size,
	    why, sizeof why) : -1;
	if (fd < 0 || off < 0 || n > size - off) {
		diag_file(g->model, "--save's model: initializer '%s': %s", t->name ? t->name : "",
		    fd < 0 ? (loc ? why : "no location") : "its bytes are not in its file");
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	char *buf = malloc((size_t)n + 1);
	if (!buf)
		die("out of memory");
	int64_t got = 0;
	while (got < n) {
		ssize_t r = pread(fd, buf + got, (size_t)(n - got), off + got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += r;
	}
	close(fd);
	if (got != n) {
		diag_file(g->model, "--save's model: initializer '%s': short read", t->name);
		free(buf);
		return NULL;
	}
	*len = (size_t)n;
	return buf;
}

static char *
fmt(int64_t v)
{
	char b[32];
	snprintf(b, sizeof b, "%lld", (long long)v);
	return strdup(b);
}

bool
emit_save(Graph *g, const char *dir, EmitSave *s)
{
	memset(s, 0, sizeof *s);
	char why[512];
	size_t len;
	char *bytes = ir_file_read(g->dir, g->files[0], "model", "its directory", SAVE_MAX_MODEL,
	    &len, why, sizeof why);
	if (!bytes) {
		diag_file(g->model, "--save's model: %s", why);
		return false;
	}
	Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, (const uint8_t *)bytes);
	free(bytes);
	if (!m || !m->graph) {
		diag_file(g->model, "--save's model: the model no longer parses");
		if (m)
			onnx__model_proto__free_unpacked(m, NULL);
		return false;
	}
	Onnx__GraphProto *gp = m->graph;
	size_t ni = gp->n_initializer;
	/* what each changed initializer had, to put back before freeing */
	Onnx__TensorProto *orig = calloc(ni + 1, sizeof *orig);
	void **extra = calloc(ni + 1, sizeof *extra);
	Onnx__StringStringEntryProto *ent = calloc(3 * ni + 1, sizeof *ent);
	Onnx__StringStringEntryProto **entp = calloc(3 * ni + 1, sizeof *entp);
	s->saved = calloc(ni + 1, sizeof *s->saved);
	if (!orig || !extra || !ent || !entp || !s->saved)
		die("out of memory");
	bool ok = true;
	int64_t at = 0;
	for (size_t i = 0; i < ni && ok; i++) {
		Onnx__TensorProto *t = gp->initializer[i];
		orig[i] = *t;
		TensorId w = t->name ? trained(g, t->name) : IR_NONE;
		if (w != IR_NONE) {
			int64_t n = tensor_bytes(t);
			Onnx__StringStringEntryProto *e = ent + 3 * i;
			static char loc_key[] = "location", off_key[] = "offset", len_key[] = "length";
			static char data_name[] = "model.onnx.data";
			onnx__string_string_entry_proto__init(&e[0]);
			onnx__string_string_entry_proto__init(&e[1]);
			onnx__string_string_entry_proto__init(&e[2]);
			e[0].key = loc_key, e[0].value = data_name;
			e[1].key = off_key, e[1].value = fmt(at);
			e[2].key = len_key, e[2].value = fmt(n);
			for (int k = 0; k < 3; k++)
				entp[3 * i + k] = &e[k];
			t->has_raw_data = false;
			t->raw_data = (ProtobufCBinaryData){0, NULL};
			t->n_float_data = t->n_double_data = 0;
			t->n_external_data = 3;
			t->external_data = entp + 3 * i;
			t->has_data_location = true;
			t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
			s->saved[s->nsaved++] = (EmitSaved){g->tensors[w].file, g->tensors[w].offset, at};
			at += (n + 63) & ~(int64_t)63;
		} else if (t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
			size_t n;
			void *b = external_bytes(g, t, &n);
			if (!b) {
				ok = false;
				break;
			}
			extra[i] = b;
			t->has_raw_data = true;
			t->raw_data = (ProtobufCBinaryData){n, b};
			t->n_external_data = 0;
			t->has_data_location = false;
			t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
		}
	}
	s->data_bytes = at;
	if (ok) {
		size_t n = onnx__model_proto__get_packed_size(m);
		uint8_t *out = malloc(n + 1);
		if (!out)
			die("out of memory");
		onnx__model_proto__pack(m, out);
		char path[4096];
		snprintf(path, sizeof path, "%s/save.onnx", dir);
		FILE *f = fopen(path, "wb");
		if (!f || fwrite(out, 1, n, f) != n || fclose(f) != 0) {
			diag_error("cannot write '%s': %s", path, strerror(errno));
			ok = false;
		}
		free(out);
	}
	for (size_t i = 0; i < ni; i++) { /* the unpacked message frees what it made */
		*gp->initializer[i] = orig[i];
		free(extra[i]);
		if (ent[3 * i + 1].value) {
			free(ent[3 * i + 1].value);
			free(ent[3 * i + 2].value);
		}
	}
	onnx__model_proto__free_unpacked(m, NULL);
	free(orig);
	free(extra);
	free(ent);
	free(entp);
	return ok;
}
