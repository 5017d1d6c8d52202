/*
 * wirescan.c - walk an ONNX model's protobuf wire format before unpacking it.
 *
 * protobuf-c recurses without a depth limit, so a small file of deeply
 * nested subgraph attributes overflows its stack.  This walker knows which
 * fields of each ONNX message are sub-messages (the table below mirrors
 * onnx.proto), follows them iteratively with an explicit stack, and rejects
 * nesting deeper than ONNX_MAX_DEPTH or malformed framing.  On the way it
 * records where each main-graph initializer's raw bytes sit in the file, so
 * the IR can reference weights by offset instead of loading them.
 *
 * Needs: onnx.h.  Never reads outside [buf, buf+len).
 */
#include <stdlib.h>
#include <string.h>

#include "frontend/onnx.h"

typedef enum {
	M_NONE, M_MODEL, M_GRAPH, M_NODE, M_ATTR, M_TENSOR, M_SPARSE, M_VALUEINFO,
	M_TYPE, M_TYPE_TENSOR, M_TYPE_SEQ, M_TYPE_MAP, M_TYPE_OPT, M_SHAPE, M_DIM,
	M_OPSET, M_ENTRY, M_TRAINING, M_FUNCTION, M_ANNOT, M_SEGMENT,
} Msg;

/* (message, field number) -> sub-message type, from onnx.proto */
static const struct {
	Msg parent;
	int field;
	Msg child;
} children[] = {
	{M_MODEL, 7, M_GRAPH}, {M_MODEL, 8, M_OPSET}, {M_MODEL, 14, M_ENTRY},
	{M_MODEL, 20, M_TRAINING}, {M_MODEL, 25, M_FUNCTION},
	{M_GRAPH, 1, M_NODE}, {M_GRAPH, 5, M_TENSOR}, {M_GRAPH, 15, M_SPARSE},
	{M_GRAPH, 11, M_VALUEINFO}, {M_GRAPH, 12, M_VALUEINFO},
	{M_GRAPH, 13, M_VALUEINFO}, {M_GRAPH, 14, M_ANNOT},
	{M_NODE, 5, M_ATTR},
	{M_ATTR, 5, M_TENSOR}, {M_ATTR, 6, M_GRAPH}, {M_ATTR, 22, M_SPARSE},
	{M_ATTR, 14, M_TYPE}, {M_ATTR, 10, M_TENSOR}, {M_ATTR, 11, M_GRAPH},
	{M_ATTR, 23, M_SPARSE}, {M_ATTR, 15, M_TYPE},
	{M_VALUEINFO, 2, M_TYPE},
	{M_TRAINING, 1, M_GRAPH}, {M_TRAINING, 2, M_GRAPH},
	{M_TRAINING, 3, M_ENTRY}, {M_TRAINING, 4, M_ENTRY},
	{M_TYPE, 1, M_TYPE_TENSOR}, {M_TYPE, 4, M_TYPE_SEQ}, {M_TYPE, 5, M_TYPE_MAP},
	{M_TYPE, 9, M_TYPE_OPT}, {M_TYPE, 8, M_TYPE_TENSOR},
	{M_TYPE_TENSOR, 2, M_SHAPE}, {M_TYPE_SEQ, 1, M_TYPE},
	{M_TYPE_MAP, 2, M_TYPE}, {M_TYPE_OPT, 1, M_TYPE},
	{M_SHAPE, 1, M_DIM},
	{M_TENSOR, 3, M_SEGMENT}, {M_TENSOR, 13, M_ENTRY},
	{M_SPARSE, 1, M_TENSOR}, {M_SPARSE, 2, M_TENSOR},
	{M_FUNCTION, 7, M_NODE}, {M_FUNCTION, 9, M_OPSET},
	{M_ANNOT, 2, M_ENTRY},
};

static Msg
child_of(Msg parent, int field)
{
	for (size_t i = 0; i < sizeof children / sizeof children[0]; i++)
		if (children[i].parent == parent && children[i].field == field)
			return children[i].child;
	return M_NONE;
}

/* Read a varint at *p; false if it runs past end or over 10 bytes. */
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

typedef struct {
	const uint8_t *end;             /* end of this message */
	Msg type;
	bool main_graph;                /* the model's own graph (not a subgraph) */
	int init;                       /* initializer index for a main-graph tensor, else -1 */
} Frame;

bool
onnx_wirescan(const uint8_t *buf, size_t len, const char *path, WireInfo *wi)
{
	Frame stack[ONNX_MAX_DEPTH + 1];
	int depth = 0, cap = 0, ngraph = 0;
	const uint8_t *p = buf;
	size_t at = 0;                  /* where the field being read starts */

	memset(wi, 0, sizeof *wi);
	stack[0] = (Frame){buf + len, M_MODEL, false, -1};
	for (;;) {
		Frame *fr = &stack[depth];
		if (p == fr->end) {
			if (depth == 0)
				return true;
			depth--;
			continue;
		}
		uint64_t key, v;
		at = (size_t)(p - buf);
		if (!varint(&p, fr->end, &key) || (key >> 3) == 0 || (key >> 3) > 536870911)
			goto bad;
		int field = (int)(key >> 3);
		switch (key & 7) {
		case 0:
			if (!varint(&p, fr->end, &v))
				goto bad;
			continue;
		case 1:
			if (fr->end - p < 8)
				goto bad;
			p += 8;
			continue;
		case 5:
			if (fr->end - p < 4)
				goto bad;
			p += 4;
			continue;
		case 2:
			break;
		default:
			goto bad;
		}
		if (!varint(&p, fr->end, &v) || v > (uint64_t)(fr->end - p))
			goto bad;
		const uint8_t *body = p;
		p += v;

		if (fr->type == M_TENSOR && fr->init >= 0) {
			WireTensor *wt = &wi->init[fr->init];
			if (field == 9) {
				wt->raw_off = body - buf;
				wt->raw_len = (int64_t)v;
			} else if (field == 4 || field == 10) {
				wt->packed_off = body - buf;
				wt->packed_len = (int64_t)v;
				wt->npacked++;
			}
		}
		Msg sub = child_of(fr->type, field);
		if (sub == M_NONE)
			continue;
		if (depth + 1 >= ONNX_MAX_DEPTH) {
			diag_file(path, "protobuf messages nested deeper than %d at byte offset %zu",
			    ONNX_MAX_DEPTH, at);
			goto fail;
		}
		Frame nf = {body + v, sub, false, -1};
		if (fr->type == M_MODEL && field == 7) {
			if (ngraph++) {
				diag_file(path, "the model holds more than one graph field (byte offset %zu)", at);
				goto fail;
			}
			nf.main_graph = true;
		}
		if (fr->main_graph && field == 5) {
			if (wi->ninit == cap) {
				cap = cap ? cap * 2 : 64;
				WireTensor *n = realloc(wi->init, sizeof *n * cap);
				if (!n)
					die("out of memory");
				wi->init = n;
			}
			nf.init = wi->ninit++;
			wi->init[nf.init] = (WireTensor){-1, -1, -1, -1, 0};
		}
		stack[++depth] = nf;
		p = body;
	}
bad:
	diag_file(path, "not an ONNX model: malformed protobuf at byte offset %zu", at);
fail:
	free(wi->init);
	memset(wi, 0, sizeof *wi);
	return false;
}
