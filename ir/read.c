/*
 * read.c - parse tapc's textual IR back into a Graph (docs/ir.md).
 *
 * The printer (ir/print.c) defines the format and this is its inverse, so
 * print -> read -> print is byte-identical and a single pass can be tested
 * from a dumped file.  A line scanner in the chibicc manner: a cursor over
 * the current line with skip_space/consume/expect helpers, and one function
 * per line form (header, tensor source, node, output).  No recursion.
 *
 * The text is untrusted (and fuzzed): every read is bounded by the line's
 * end, numbers are range-checked before use, and element counts cannot
 * overflow.  The first error is reported with diag_file() and unwinds with
 * longjmp, as Lua's parser does, so the line functions need not pass error
 * codes up; everything the reader allocates hangs off the Reader and is
 * freed in ir_read.
 *
 * Values may also come from the data file the header names (data=, big
 * values printed by ir_print_data): read with pread into the arena, each
 * range checked against the file's size first.
 *
 * Needs: ir.c to build the graph, diag.c to report, file.c to open the data
 * file.  Nothing beyond libc.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir/ir.h"

#define MAX_GROUPS (1 << 20)    /* bounds the GraphNode table a file can ask for */

/* What the reader knows about a tensor beyond the Graph. */
typedef struct {
	int num;                        /* its %N in the text */
	int defline;                    /* line that defines it; 0 while only used */
	int useline;                    /* first line that mentions it */
	bool named;                     /* name came from the text, not made up */
} TInfo;

/* A growable array of plain bytes (ids, values, decoded strings). */
typedef struct {
	char *p;
	size_t n, cap;
} Buf;

typedef struct {
	const char *path;
	const char *p, *end;            /* cursor and end of the current line */
	int line;
	Graph *g;
	jmp_buf fail;
	int *keys;                      /* %N -> TensorId, open addressing, -1 empty */
	TensorId *vals;
	int cap, used;
	TInfo *ti;                      /* per TensorId */
	int capti;
	Buf str, vals_buf, outs, ins;   /* scratch, reused line after line */
	unsigned char *in_template;     /* bit per GraphNode id: in a template line read */
	int data_fd;                    /* the header's data= file, or -1 */
	int64_t data_size;
	char found[48];
} Reader;

static _Noreturn void error(Reader *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
error(Reader *r, const char *fmt, ...)
{
	char msg[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	diag_file(r->path, "line %d: %s", r->line, msg);
	longjmp(r->fail, 1);
}

static void
buf_add(Buf *b, const void *p, size_t n)
{
	if (b->cap - b->n < n) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap - b->n < n)
			cap *= 2;
		char *q = realloc(b->p, cap);
		if (!q)
			die("out of memory");
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

/* ------------------------------------------------------------- cursor */

static bool
is_word(int c)
{
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') ||
	    c == '_';
}

static int
hexval(int c)
{
	return '0' <= c && c <= '9' ? c - '0' : 'a' <= c && c <= 'f' ? c - 'a' + 10 :
	    'A' <= c && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Characters a number can be made of, so "12abc" reads as one bad token. */
static bool
is_numch(int c)
{
	return is_word(c) || c == '.' || c == '+' || c == '-';
}

static void
skip_space(Reader *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t'))
		r->p++;
}

static bool
at_end(Reader *r)
{
	skip_space(r);
	return r->p >= r->end;
}

static bool
peek(Reader *r, char c)
{
	skip_space(r);
	return r->p < r->end && *r->p == c;
}

/* Describe what is at the cursor for "expected X, found Y". */
static const char *
found(Reader *r)
{
	skip_space(r);
	if (r->p >= r->end)
		return "end of line";
	unsigned char c = *r->p;
	int n = 0;
	while (r->p + n < r->end && n < 24 && (is_numch(r->p[n]) || r->p[n] == '%'))
		n++;
	if (n > 1)
		snprintf(r->found, sizeof r->found, "'%.*s'", n, r->p);
	else if (c >= 0x20 && c < 0x7f)
		snprintf(r->found, sizeof r->found, "'%c'", c);
	else
		snprintf(r->found, sizeof r->found, "byte 0x%02x", c);
	return r->found;
}

static bool
consume(Reader *r, const char *s)
{
	size_t n = strlen(s);
	skip_space(r);
	if ((size_t)(r->end - r->p) < n || memcmp(r->p, s, n) != 0)
		return false;
	r->p += n;
	return true;
}

/* A keyword: s followed by something that cannot continue a word. */
static bool
consume_word(Reader *r, const char *s)
{
	const char *save = r->p;
	if (!consume(r, s))
		return false;
	if (r->p < r->end && is_word(*r->p)) {
		r->p = save;
		return false;
	}
	return true;
}

static void
expect(Reader *r, const char *s)
{
	if (!consume(r, s))
		error(r, "expected '%s', found %s", s, found(r));
}

static void
expect_end(Reader *r)
{
	if (!at_end(r))
		error(r, "expected end of line, found %s", found(r));
}

/* ------------------------------------------------------------ numbers */

/* The next number-like token into tok; what names it in the message if absent. */
static void
number_token(Reader *r, char *tok, size_t size, const char *what)
{
	skip_space(r);
	size_t n = 0;
	while (r->p + n < r->end && is_numch(r->p[n]))
		n++;
	if (n == 0)
		error(r, "expected %s, found %s", what, found(r));
	if (n >= size)
		error(r, "malformed %s '%.20s...'", what, r->p);
	memcpy(tok, r->p, n);
	tok[n] = 0;
	r->p += n;
}

/* Decimal digits only; false on anything else or overflow. */
static bool
to_u64(const char *s, uint64_t *v)
{
	*v = 0;
	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		unsigned d = *s - '0';
		if (*v > (UINT64_MAX - d) / 10)
			return false;
		*v = *v * 10 + d;
	}
	return true;
}

static bool
to_i64(const char *s, int64_t *v)
{
	uint64_t u;
	bool neg = *s == '-';
	if (!to_u64(s + neg, &u))
		return false;
	if (neg ? u > (uint64_t)INT64_MAX + 1 : u > (uint64_t)INT64_MAX)
		return false;
	*v = neg ? (int64_t)(0 - u) : (int64_t)u;
	return true;
}

/* An integer in [lo, hi]; what names it in messages. */
static int64_t
parse_int(Reader *r, const char *what, int64_t lo, int64_t hi)
{
	char tok[64];
	int64_t v;
	number_token(r, tok, sizeof tok, what);
	if (!to_i64(tok, &v)) {
		const char *d = tok + (tok[0] == '-');
		if (*d && strspn(d, "0123456789") == strlen(d))
			error(r, "%s %s out of range", what, tok);
		error(r, "expected %s, found '%s'", what, tok);
	}
	if (v < lo || v > hi)
		error(r, "%s %s out of range [%" PRId64 ", %" PRId64 "]", what, tok, lo, hi);
	return v;
}

/* A float as ir_put_float writes it; single rounds straight to float. */
static bool
to_float(const char *s, bool single, double *v)
{
	bool neg = *s == '-';
	const char *m = s + neg;
	if (strcmp(m, "inf") == 0 || strcmp(m, "nan") == 0) {
		*v = m[0] == 'i' ? INFINITY : NAN;
		if (neg)
			*v = -*v;
		if (isnan(*v))
			*v = copysign(NAN, neg ? -1.0 : 1.0);
		return true;
	}
	/* strtod also takes hex, "infinity" and "nan(...)": allow only decimal */
	bool digit = false;
	for (const char *p = s; *p; p++) {
		if ('0' <= *p && *p <= '9')
			digit = true;
		else if (!strchr(".eE+-", *p))
			return false;
	}
	if (!digit)
		return false;
	char *end;
	*v = single ? strtof(s, &end) : strtod(s, &end);
	return *end == 0 && !isinf(*v);
}

static bool
floaty(const char *s)
{
	const char *m = s + (*s == '-');
	return strpbrk(s, ".eE") || strcmp(m, "inf") == 0 || strcmp(m, "nan") == 0;
}

static double
parse_float(Reader *r, bool single)
{
	char tok[64];
	double v;
	number_token(r, tok, sizeof tok, "float");
	if (!to_float(tok, single, &v))
		error(r, "expected float, found '%s'", tok);
	return v;
}

/* Digits right after the cursor (in "%12" or "2x8"), no sign. */
static int
small_int(Reader *r, const char *what)
{
	int64_t v = 0;
	const char *p = r->p;
	while (r->p < r->end && '0' <= *r->p && *r->p <= '9') {
		v = v * 10 + (*r->p++ - '0');
		if (v > INT_MAX)
			error(r, "%s too large", what);
	}
	if (r->p == p)
		error(r, "expected %s, found %s", what, found(r));
	return (int)v;
}

/* ------------------------------------------------------------ strings */

/* A "quoted" string with the printer's escapes, copied into the arena. */
/* The character after a backslash: \n, \\, \xHH, and \" where quoted. */
static char
unescape(Reader *r, const char *what, bool quoted)
{
	char c = r->p < r->end ? *r->p++ : 0;
	if (c == 'n')
		return '\n';
	if (c == '\\' || (quoted && c == '"'))
		return c;
	if (c != 'x')
		error(r, "unknown escape '\\%c' in %s", c >= 0x20 && c < 0x7f ? c : '?', what);
	int v = 0;
	for (int i = 0; i < 2; i++) {
		int d = r->p < r->end ? hexval(*r->p) : -1;
		if (d < 0)
			error(r, "expected two hex digits after \\x in %s", what);
		v = v * 16 + d;
		r->p++;
	}
	return (char)v;
}

static const char *
parse_string(Reader *r, const char *what)
{
	if (!peek(r, '"'))
		error(r, "expected %s, found %s", what, found(r));
	r->p++;
	r->str.n = 0;
	for (;;) {
		if (r->p >= r->end)
			error(r, "unterminated string");
		char c = *r->p++;
		if (c == '"')
			break;
		if (c == '\\') {
			if (r->p >= r->end)
				error(r, "unterminated string");
			c = unescape(r, "string", true);
		}
		if (c == 0)
			error(r, "string contains a NUL byte");
		buf_add(&r->str, &c, 1);
	}
	buf_add(&r->str, "", 1);
	return ir_strdup(&r->g->arena, r->str.p);
}

/* ------------------------------------------------------------ tensors */

static int
slot(Reader *r, int num)
{
	unsigned h = (unsigned)num * 2654435761u;
	for (unsigned i = h & (r->cap - 1);; i = (i + 1) & (r->cap - 1))
		if (r->keys[i] == num || r->keys[i] < 0)
			return (int)i;
}

static void
rehash(Reader *r)
{
	int *okeys = r->keys, ocap = r->cap;
	TensorId *ovals = r->vals;
	r->cap = ocap ? ocap * 2 : 1024;
	r->keys = malloc(sizeof *r->keys * r->cap);
	r->vals = malloc(sizeof *r->vals * r->cap);
	if (!r->keys || !r->vals)
		die("out of memory");
	memset(r->keys, -1, sizeof *r->keys * r->cap);
	for (int i = 0; i < ocap; i++)
		if (okeys[i] >= 0) {
			int j = slot(r, okeys[i]);
			r->keys[j] = okeys[i];
			r->vals[j] = ovals[i];
		}
	free(okeys);
	free(ovals);
}

/* The tensor numbered num, or IR_NONE if the text has not mentioned it. */
static TensorId
find(Reader *r, int num)
{
	int i = slot(r, num);
	return r->keys[i] < 0 ? IR_NONE : r->vals[i];
}

/* The tensor numbered num, made on first sight: a node may use a value that
 * a later line defines (the printer numbers by appearance, not definition). */
static TensorId
tensor(Reader *r, int num)
{
	if (2 * (r->used + 1) > r->cap)
		rehash(r);
	int i = slot(r, num);
	if (r->keys[i] >= 0)
		return r->vals[i];
	char name[16];
	snprintf(name, sizeof name, "%%%d", num);
	TensorId t = ir_add_tensor(r->g, name, TK_VALUE, DT_UNDEF);
	r->keys[i] = num;
	r->vals[i] = t;
	r->used++;
	if (t >= r->capti) {
		r->capti = r->capti ? r->capti * 2 : 1024;
		r->ti = realloc(r->ti, sizeof *r->ti * r->capti);
		if (!r->ti)
			die("out of memory");
	}
	r->ti[t] = (TInfo){.num = num, .useline = r->line};
	return t;
}

static int
parse_num(Reader *r)
{
	if (!peek(r, '%'))
		error(r, "expected a tensor %%N, found %s", found(r));
	r->p++;
	return small_int(r, "tensor number");
}

static TensorId
define(Reader *r, int num)
{
	TensorId t = tensor(r, num);
	if (r->ti[t].defline)
		error(r, "%%%d is already defined on line %d", num, r->ti[t].defline);
	r->ti[t].defline = r->line;
	return t;
}

/* "f32[1,16,64]", "f32[]" (a scalar) or "?[?]" (not inferred yet). */
static void
parse_type(Reader *r, TensorId id)
{
	char name[16];
	DType dt = DT_UNDEF;
	int rank = 0;
	int64_t dims[IR_MAX_RANK];
	skip_space(r);
	size_t n = 0;
	while (r->p + n < r->end && is_word(r->p[n]))
		n++;
	if (n == 0 && !(r->p < r->end && *r->p == '?'))
		error(r, "expected a type, found %s", found(r));
	if (n >= sizeof name || n == 0) {
		if (n)
			error(r, "unknown dtype %s", found(r));
		r->p++;         /* "?": dtype not known yet */
	} else {
		memcpy(name, r->p, n);
		name[n] = 0;
		if (!ir_dtype_lookup(name, &dt))
			error(r, "unknown dtype '%s'", name);
		r->p += n;
	}
	if (r->p >= r->end || *r->p != '[')
		error(r, "expected '[' after dtype, found %s", found(r));
	r->p++;
	if (consume(r, "?")) {
		rank = -1;
		expect(r, "]");
	} else if (!consume(r, "]")) {
		do {
			if (rank == IR_MAX_RANK)
				error(r, "rank exceeds %d", IR_MAX_RANK);
			dims[rank++] = parse_int(r, "dimension", 0, INT64_MAX);
		} while (consume(r, ","));
		expect(r, "]");
	}
	/* any product below INT64_MAX/16 leaves room for the widest dtype's bytes */
	int64_t numel = 1;
	for (int i = 0; i < rank; i++) {
		if (dims[i] && numel > INT64_MAX / 16 / dims[i])
			error(r, "element count overflows");
		numel *= dims[i];
	}
	Tensor *t = &r->g->tensors[id];
	t->dtype = dt;
	t->rank = rank;
	for (int i = 0; i < rank; i++)
		t->dims[i] = dims[i];
}

/* "+0x1a0": an offset. */
static int64_t
parse_offset(Reader *r)
{
	if (r->p >= r->end || *r->p != '+')
		error(r, "expected '+0x' offset after file name, found %s", found(r));
	r->p++;
	if (r->end - r->p < 2 || r->p[0] != '0' || r->p[1] != 'x')
		error(r, "expected '0x' offset, found %s", found(r));
	r->p += 2;
	uint64_t off = 0;
	int nd = 0;
	for (; r->p < r->end && is_word(*r->p); r->p++, nd++) {
		int d = hexval(*r->p);
		if (d < 0)
			error(r, "expected hex digit in offset, found %s", found(r));
		if (off > (uint64_t)INT64_MAX >> 4)
			error(r, "offset out of range");
		off = off << 4 | (unsigned)d;
	}
	if (nd == 0)
		error(r, "expected hex offset after '0x', found %s", found(r));
	return (int64_t)off;
}

/* "@+0x1a0": values in the header's data file, read now (they are the
 * values an "= [...]" list would give). */
static void
parse_data_values(Reader *r, TensorId id)
{
	Tensor *t = &r->g->tensors[id];
	int64_t off = parse_offset(r);
	if (r->data_fd < 0)
		error(r, "'@+0x%" PRIx64 "' without a data file (data= in the header)", (uint64_t)off);
	switch (t->dtype) {
	case DT_UNDEF: case DT_STRING:
		error(r, "%s tensors cannot have values in the data file", ir_dtype_name(t->dtype));
	default:
		break;
	}
	int64_t n = ir_numel(t) * ir_dtype_size(t->dtype); /* bounded by parse_type */
	if (off > r->data_size || n > r->data_size - off)
		error(r, "bytes 0x%" PRIx64 "+%" PRId64 " are past the data file's end (%" PRId64 " bytes)",
		    (uint64_t)off, n, r->data_size);
	char *bytes = ir_alloc(&r->g->arena, (size_t)n + 1);
	for (int64_t got = 0; got < n;) {
		ssize_t k = pread(r->data_fd, bytes + got, (size_t)(n - got), off + got);
		if (k <= 0)
			error(r, "cannot read the data file at 0x%" PRIx64 ": %s", (uint64_t)(off + got),
			    k < 0 ? strerror(errno) : "it ended early");
		got += k;
	}
	t->data = DATA_INLINE;
	t->length = n;
	t->bytes = bytes;
}

/* "@file+0x1a0": bytes in a file, never loaded here. */
static void
parse_location(Reader *r, TensorId id)
{
	const char *file;
	if (r->p < r->end && *r->p == '"') {
		file = parse_string(r, "file name");
	} else {
		const char *s = r->p;
		while (r->p < r->end && (is_word(*r->p) || (*r->p && strchr("./-", *r->p))))
			r->p++;
		if (r->p == s)
			error(r, "expected file name after '@', found %s", found(r));
		char *f = ir_alloc(&r->g->arena, r->p - s + 1);
		memcpy(f, s, r->p - s);
		file = f;
	}
	/* the same rule as the loader's: weights come from inside the model's
	 * directory, since ir_value() may read small ones */
	if (!ir_path_inside(file))
		error(r, "weight file must be a relative path inside the model's directory");
	int64_t off = parse_offset(r);
	Graph *g = r->g;
	Tensor *t = &g->tensors[id];
	t->data = DATA_FILE;
	t->file = ir_add_file(g, file);
	t->offset = off;
	t->length = ir_nbytes(t);
	if (consume_word(r, "slice")) { /* " slice=AXIS/PARTS [blocks=B]": a TP shard */
		expect(r, "=");
		t->slice_axis = (int)parse_int(r, "slice axis", 0, t->rank > 0 ? t->rank - 1 : 0);
		expect(r, "/");
		t->slice_parts = (int)parse_int(r, "slice parts", 1, 1 << 20);
		t->slice_blocks = 1;
		if (consume_word(r, "blocks")) {
			expect(r, "=");
			t->slice_blocks = (int)parse_int(r, "slice blocks", 1, 1 << 20);
		}
		if (t->rank < 1)
			error(r, "a scalar cannot be sliced");
		if (t->dims[t->slice_axis] % t->slice_blocks != 0)
			error(r, "slice axis %d of %" PRId64 " does not hold %d blocks", t->slice_axis,
			    t->dims[t->slice_axis], t->slice_blocks);
		t->length *= t->slice_parts;
	}
	if (consume_word(r, "from")) { /* " from=f16": converted to f32 as it loads */
		expect(r, "=");
		skip_space(r);
		char name[16];
		size_t n = 0;
		while (r->p + n < r->end && is_word(r->p[n]))
			n++;
		DType dt = DT_UNDEF;
		if (n && n < sizeof name) {
			memcpy(name, r->p, n);
			name[n] = 0;
			ir_dtype_lookup(name, &dt);
		}
		if (t->dtype != DT_F32 || (dt != DT_F16 && dt != DT_BF16))
			error(r, "from= converts f16 or bf16 file bytes to an f32 weight, found %s",
			    found(r));
		r->p += n;
		t->file_dtype = dt;
		t->length /= 2;
	}
}

/* One inline element of dtype dt, appended to r->vals_buf. */
static void
parse_elem(Reader *r, DType dt)
{
	union { float f; double d; int64_t i; uint64_t u; int32_t i32; int16_t i16;
	    int8_t i8; uint32_t u32; uint16_t u16; uint8_t u8; } v;
	char tok[64];
	switch (dt) {
	case DT_F32: v.f = (float)parse_float(r, true); break;
	case DT_F64: v.d = parse_float(r, false); break;
	case DT_I64: v.i = parse_int(r, "i64 value", INT64_MIN, INT64_MAX); break;
	case DT_I32: v.i32 = (int32_t)parse_int(r, "i32 value", INT32_MIN, INT32_MAX); break;
	case DT_I16: v.i16 = (int16_t)parse_int(r, "i16 value", INT16_MIN, INT16_MAX); break;
	case DT_I8: v.i8 = (int8_t)parse_int(r, "i8 value", INT8_MIN, INT8_MAX); break;
	case DT_U32: v.u32 = (uint32_t)parse_int(r, "u32 value", 0, UINT32_MAX); break;
	case DT_U16: v.u16 = (uint16_t)parse_int(r, "u16 value", 0, UINT16_MAX); break;
	case DT_U8: v.u8 = (uint8_t)parse_int(r, "u8 value", 0, UINT8_MAX); break;
	case DT_BOOL: v.u8 = (uint8_t)parse_int(r, "bool value", 0, 1); break;
	case DT_U64:
		number_token(r, tok, sizeof tok, "u64 value");
		if (!to_u64(tok, &v.u))
			error(r, "expected u64 value, found '%s'", tok);
		break;
	case DT_F16: case DT_BF16: {
		/* raw bits, so no rounding can change them */
		number_token(r, tok, sizeof tok, "0xHHHH value");
		size_t n = strlen(tok);
		bool ok = n > 2 && n <= 6 && tok[0] == '0' && tok[1] == 'x';
		v.u16 = 0;
		for (size_t i = 2; ok && i < n; i++) {
			ok = hexval(tok[i]) >= 0;
			v.u16 = (uint16_t)(v.u16 << 4 | (hexval(tok[i]) & 15));
		}
		if (!ok)
			error(r, "expected 0xHHHH value, found '%s'", tok);
		break;
	}
	default:
		unreachable();
	}
	buf_add(&r->vals_buf, &v, ir_dtype_size(dt));
}

/* "= [1,2,3]": exactly numel elements, bytes kept in the arena. */
static void
parse_values(Reader *r, TensorId id)
{
	DType dt = r->g->tensors[id].dtype;
	switch (dt) {
	case DT_UNDEF: case DT_STRING: case DT_C64: case DT_C128:
		error(r, "%s tensors cannot have inline values", ir_dtype_name(dt));
	default:
		break;
	}
	expect(r, "[");
	int64_t n = 0;
	r->vals_buf.n = 0;
	if (!consume(r, "]")) {
		do {
			parse_elem(r, dt);
			n++;
		} while (consume(r, ","));
		expect(r, "]");
	}
	Tensor *t = &r->g->tensors[id];
	char ty[IR_TYPESTR];
	if (n != ir_numel(t))
		error(r, "expected %" PRId64 " values for %s, found %" PRId64, ir_numel(t),
		    ir_typestr(t, ty), n);
	t->data = DATA_INLINE;
	t->length = (int64_t)r->vals_buf.n;
	t->bytes = ir_alloc(&r->g->arena, r->vals_buf.n + 1);
	memcpy(t->bytes, r->vals_buf.p, r->vals_buf.n);
}

/* "%1 = weight "w" f32[4] @model.onnx+0x10" and the input/const forms. */
static void
parse_source(Reader *r, int num, TensorKind kind)
{
	Graph *g = r->g;
	TensorId id = define(r, num);
	if (kind != TK_CONST) {
		const char *name = parse_string(r, "quoted tensor name");
		g->tensors[id].name = name;
		r->ti[id].named = true;
	}
	g->tensors[id].kind = kind;
	parse_type(r, id);
	if (kind == TK_INPUT)
		ir_add_input(g, id);
	if (kind == TK_STATE && (peek(r, '@') || peek(r, '=')))
		error(r, "a state tensor has no data: it is zero when training starts");
	if (consume(r, "@")) {
		if (r->p < r->end && *r->p == '+')
			parse_data_values(r, id);
		else
			parse_location(r, id);
	} else if (consume(r, "=")) {
		parse_values(r, id);
	}
	expect_end(r);
}

/* ------------------------------------------------------------- nodes */

static void
parse_attr(Reader *r, NodeId node)
{
	Graph *g = r->g;
	skip_space(r);
	const char *s = r->p;
	while (r->p < r->end && (is_word(*r->p) || (*r->p && strchr(".-", *r->p))))
		r->p++;
	if (r->p == s)
		error(r, "expected attribute name, found %s", found(r));
	char *name = ir_alloc(&g->arena, r->p - s + 1);
	memcpy(name, s, r->p - s);
	if (ir_attr(g, node, name))
		error(r, "duplicate attribute '%s'", name);
	if (r->p >= r->end || *r->p != '=')
		error(r, "expected '=' after attribute '%s', found %s", name, found(r));
	r->p++;

	Attr a = {.name = name};
	char tok[64];
	r->vals_buf.n = 0;
	if (peek(r, '"')) {
		a.type = ATTR_STRING;
		a.s = parse_string(r, "string");
	} else if (peek(r, '%')) {
		int num = parse_num(r);
		TensorId t = find(r, num);
		if (t == IR_NONE || !r->ti[t].defline || r->ti[t].defline == r->line ||
		    (g->tensors[t].kind != TK_CONST && g->tensors[t].kind != TK_WEIGHT))
			error(r, "attribute '%s' needs a const or weight defined on an earlier line, "
			    "found %%%d", name, num);
		a.type = ATTR_TENSOR;
		a.t = t;
	} else if (consume(r, "ints[]")) {
		a.type = ATTR_INTS;
	} else if (consume(r, "floats[]")) {
		a.type = ATTR_FLOATS;
	} else if (consume(r, "strings[]")) {
		a.type = ATTR_STRINGS;
	} else if (consume(r, "[")) {
		if (peek(r, ']'))
			error(r, "empty list needs a type: write ints[], floats[] or strings[]");
		if (peek(r, '"')) {
			a.type = ATTR_STRINGS;
			do {
				const char *e = parse_string(r, "string");
				buf_add(&r->vals_buf, &e, sizeof e);
				a.n++;
			} while (consume(r, ","));
		} else {
			/* the first element's form decides, as ir_put_float makes floats look */
			const char *save = r->p;
			number_token(r, tok, sizeof tok, "list element");
			r->p = save;
			a.type = floaty(tok) ? ATTR_FLOATS : ATTR_INTS;
			do {
				if (a.type == ATTR_FLOATS) {
					float f = (float)parse_float(r, true);
					buf_add(&r->vals_buf, &f, sizeof f);
				} else {
					int64_t i = parse_int(r, "integer", INT64_MIN, INT64_MAX);
					buf_add(&r->vals_buf, &i, sizeof i);
				}
				if (++a.n == INT_MAX)
					error(r, "list too long");
			} while (consume(r, ","));
		}
		expect(r, "]");
		void *p = ir_alloc(&g->arena, r->vals_buf.n + 1);
		memcpy(p, r->vals_buf.p, r->vals_buf.n);
		if (a.type == ATTR_STRINGS)
			a.ss = p;
		else if (a.type == ATTR_FLOATS)
			a.fs = p;
		else
			a.is = p;
	} else {
		const char *save = r->p;
		number_token(r, tok, sizeof tok, "attribute value");
		r->p = save;
		if (floaty(tok)) {
			a.type = ATTR_FLOAT;
			a.f = (float)parse_float(r, true);
		} else {
			a.type = ATTR_INT;
			a.i = parse_int(r, "integer", INT64_MIN, INT64_MAX);
		}
	}
	Attr *dst = ir_set_attr(g, node, name, a.type);
	*dst = a;
}

/* "  # name" to the end of the line, with the printer's escapes undone. */
static const char *
parse_comment(Reader *r)
{
	r->p++;
	if (r->p < r->end && *r->p == ' ')
		r->p++;
	r->str.n = 0;
	while (r->p < r->end) {
		char c = *r->p++;
		if (c == '\\')
			c = unescape(r, "node name", false);
		if (c == 0)
			error(r, "node name contains a NUL byte");
		buf_add(&r->str, &c, 1);
	}
	buf_add(&r->str, "", 1);
	return ir_strdup(&r->g->arena, r->str.p);
}

/* "%5, _ = Split %4 {axis=2} : f32[2], _ gn=1 sg=0 stage=0   # name";
 * the outputs are already in r->outs. */
static void
parse_node(Reader *r, const char *opname)
{
	Graph *g = r->g;
	Op op;
	if (!ir_op_lookup(opname, &op))
		error(r, "unknown op '%s'", opname);
	int nout = (int)(r->outs.n / sizeof(TensorId));
	TensorId *outs = (TensorId *)r->outs.p;
	for (int i = 0; i < nout; i++)
		if (outs[i] != IR_NONE)
			outs[i] = define(r, outs[i]);
	r->ins.n = 0;
	if (peek(r, '%') || peek(r, '_')) {
		do {
			TensorId t = IR_NONE;
			if (!consume_word(r, "_"))
				t = tensor(r, parse_num(r));
			buf_add(&r->ins, &t, sizeof t);
		} while (consume(r, ","));
	}
	outs = (TensorId *)r->outs.p;
	NodeId node = ir_add_node(g, op, "", (int)(r->ins.n / sizeof(TensorId)),
	    (TensorId *)r->ins.p, nout, outs);
	if (consume(r, "{")) {
		while (!consume(r, "}")) {
			if (at_end(r))
				error(r, "expected '}' after attributes, found end of line");
			parse_attr(r, node);
		}
	}
	if (!consume(r, ":"))
		error(r, "expected ':' and output types, found %s", found(r));
	for (int i = 0; i < nout; i++) {
		if (i && !consume(r, ","))
			error(r, "expected %d output types, found %d", nout, i);
		if (consume_word(r, "_")) {
			if (outs[i] != IR_NONE)
				error(r, "output %d is a tensor, so its type cannot be _", i);
		} else {
			if (outs[i] == IR_NONE)
				error(r, "output %d is _, so its type must be _ too", i);
			parse_type(r, outs[i]);
		}
	}
	if (peek(r, ','))
		error(r, "expected %d output types, found more", nout);
	Node *n = &g->nodes[node];
	if (consume_word(r, "gn")) {
		expect(r, "=");
		n->group = (int)parse_int(r, "GraphNode", 0, MAX_GROUPS - 1);
	}
	if (consume_word(r, "sg")) {
		expect(r, "=");
		n->subgraph = (int)parse_int(r, "subgraph", 0, INT_MAX);
	}
	if (consume_word(r, "stage")) {
		expect(r, "=");
		n->stage = (int)parse_int(r, "stage", 0, INT_MAX);
	}
	if (consume_word(r, "phase")) { /* forward nodes print none */
		expect(r, "=");
		if (consume_word(r, "bwd"))
			n->phase = PHASE_BWD;
		else if (consume_word(r, "opt"))
			n->phase = PHASE_OPT;
		else
			error(r, "expected phase=bwd or phase=opt, found %s", found(r));
	}
	if (consume_word(r, "tp")) { /* tp-plan's choice: tp=R, tp=S1, tp=S1/3 */
		expect(r, "=");
		if (consume_word(r, "R")) {
			n->tp_axis = TP_REPLICATE;
		} else {
			skip_space(r);
			if (r->p >= r->end || *r->p != 'S')
				error(r, "expected tp=R or tp=S<axis>[/<blocks>], found %s", found(r));
			r->p++;
			n->tp_axis = (int)parse_int(r, "split axis", 0, IR_MAX_RANK - 1);
			if (consume(r, "/"))
				n->tp_blocks = (int)parse_int(r, "split blocks", 1, 1 << 20);
		}
	}
	if (consume_word(r, "comm")) {
		expect(r, "=");
		skip_space(r);
		const char *s = r->p;
		while (r->p < r->end && (is_word(*r->p) || (*r->p && strchr(":,", *r->p))))
			r->p++;
		if (r->p == s)
			error(r, "expected collectives after comm=, found %s", found(r));
		char *c = ir_alloc(&g->arena, r->p - s + 1);
		memcpy(c, s, r->p - s);
		n->tp_comm = c;
	}
	if (consume_word(r, "region")) { /* an If: the region of its branches */
		expect(r, "=");
		n->owns = (int)parse_int(r, "region", 0, INT_MAX - 1);
		if (n->op != OP_If)
			error(r, "region= is for If nodes");
		if (n->owns >= g->nregions)
			g->nregions = n->owns + 1;
	}
	if (consume_word(r, "then") || (n->branch = consume_word(r, "else"))) {
		/* then=R, else=R: a node of region R's branch */
		expect(r, "=");
		n->region = (int)parse_int(r, "region", 0, INT_MAX - 1);
		if (n->region >= g->nregions)
			g->nregions = n->region + 1;
	}
	if (peek(r, '#'))
		n->name = parse_comment(r);
	expect_end(r);
}

/* A line that starts with outputs: a tensor source or a node. */
static void
parse_assign(Reader *r)
{
	r->outs.n = 0;
	if (!peek(r, '=')) {
		do {
			/* numbers for now; parse_node turns them into ids */
			TensorId t = consume_word(r, "_") ? IR_NONE : parse_num(r);
			buf_add(&r->outs, &t, sizeof t);
		} while (consume(r, ","));
	}
	expect(r, "=");
	skip_space(r);
	char word[40];
	size_t n = 0;
	while (r->p + n < r->end && is_word(r->p[n]))
		n++;
	if (n == 0)
		error(r, "expected op, input, weight or const, found %s", found(r));
	if (n >= sizeof word)
		error(r, "unknown op '%.*s...'", (int)sizeof word - 1, r->p);
	memcpy(word, r->p, n);
	word[n] = 0;
	r->p += n;
	static const char *kinds[] = {[TK_INPUT] = "input", [TK_WEIGHT] = "weight",
	    [TK_CONST] = "const", [TK_STATE] = "state"};
	for (int k = TK_INPUT; k <= TK_STATE; k++)
		if (strcmp(word, kinds[k]) == 0) {
			TensorId *o = (TensorId *)r->outs.p;
			if (r->outs.n != sizeof(TensorId) || o[0] == IR_NONE)
				error(r, "%s %s line defines exactly one %%N",
				    word[0] == 'i' ? "an" : "a", word);
			parse_source(r, o[0], (TensorKind)k);
			return;
		}
	parse_node(r, word);
}

/* 'template 0 "/h.#" graphnodes=3 instances=2 [3,4,5] [6,7,8]': a shared
 * subgraph; it follows the node lines.  A GraphNode no node line names is
 * one a fusion emptied (all its nodes became another's fused node), as the
 * printed graph had it; each is in one template at most. */
static void
parse_template(Reader *r)
{
	Graph *g = r->g;
	skip_space(r);
	int id = small_int(r, "template number");
	if (id != g->ntemplates)
		error(r, "template %d out of order (expected %d)", id, g->ntemplates);
	skip_space(r);
	const char *name = parse_string(r, "template name");
	skip_space(r);
	expect(r, "graphnodes=");
	int ng = (int)parse_int(r, "GraphNode count", 1, 1 << 20);
	skip_space(r);
	expect(r, "instances=");
	int ni = (int)parse_int(r, "instance count", 1, 1 << 20);
	if ((int64_t)ng * ni > (1 << 24))
		error(r, "template %d is too large", id);
	int *inst = ir_alloc(&g->arena, sizeof *inst * ng * ni);
	if (!r->in_template && !(r->in_template = calloc(MAX_GROUPS / 8, 1)))
		die("out of memory");
	unsigned char *used = r->in_template;
	for (int i = 0; i < ni; i++) {
		skip_space(r);
		expect(r, "[");
		for (int k = 0; k < ng; k++) {
			if (k)
				expect(r, ",");
			int gn = (int)parse_int(r, "GraphNode", 0, MAX_GROUPS - 1);
			if (used[gn / 8] & 1 << gn % 8)
				error(r, "GraphNode %d is in two templates", gn);
			used[gn / 8] |= (unsigned char)(1 << gn % 8);
			inst[i * ng + k] = gn;
		}
		expect(r, "]");
	}
	skip_space(r);
	if (!at_end(r))
		error(r, "expected end of line, found %s", found(r));
	Template *t = ir_alloc(&g->arena, sizeof *t * (g->ntemplates + 1));
	if (g->ntemplates)
		memcpy(t, g->templates, sizeof *t * g->ntemplates);
	t[g->ntemplates] = (Template){name, ng, ni, inst};
	g->templates = t;
	g->ntemplates++;
}

/* "output %41 "logits"": the name is the graph output's. */
static void
parse_output(Reader *r)
{
	int num = parse_num(r);
	TensorId t = tensor(r, num);
	const char *name = parse_string(r, "quoted output name");
	expect_end(r);
	if (r->ti[t].named && strcmp(r->g->tensors[t].name, name) != 0)
		error(r, "output %%%d is named differently on an earlier line", num);
	r->g->tensors[t].name = name;
	r->ti[t].named = true;
	ir_add_output(r->g, t);
}

/* "loss %12": a training graph's loss (once). */
static void
parse_loss(Reader *r)
{
	int num = parse_num(r);
	TensorId t = tensor(r, num);
	expect_end(r);
	if (r->g->loss != IR_NONE)
		error(r, "a second loss line");
	r->g->loss = t;
}

/* "grad %3 %57": weight %3's gradient is %57 (verify checks the types). */
static void
parse_grad(Reader *r)
{
	Graph *g = r->g;
	TensorId w = tensor(r, parse_num(r)), d = tensor(r, parse_num(r));
	expect_end(r);
	for (int i = 0; i < g->ngrads; i++)
		if (g->grads[i].weight == w)
			error(r, "a second gradient for one weight");
	if (g->ngrads == INT_MAX - 1)
		error(r, "too many gradients");
	struct GradPair *a = ir_alloc(&g->arena, sizeof *a * (g->ngrads + 1));
	if (g->ngrads)
		memcpy(a, g->grads, sizeof *a * g->ngrads);
	a[g->ngrads++] = (struct GradPair){w, d};
	g->grads = a;
}

/* dirname(path) in g's arena ("." for a bare name). */
static const char *
dir_of(Graph *g, const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return ".";
	char *dir = ir_alloc(&g->arena, slash - path + 2);
	memcpy(dir, path, slash == path ? 1 : slash - path);
	return dir;
}

/* data="gpt.ir.weights": the file beside the IR file that holds the values
 * its "@+0x..." lines point at (ir_print_data).  A name, not a path: the
 * file is in the IR file's own directory, opened by ir/file.c's rules. */
static void
open_data(Reader *r, const char *name)
{
	if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		error(r, "data file '%s' must be a file name in the IR file's directory, without '/'",
		    name);
	const char *dir = dir_of(r->g, r->path);
	char why[600];
	r->data_fd = ir_file_open(dir, name, "data file", "the IR file's directory", &r->data_size,
	    why, sizeof why);
	if (r->data_fd < 0)
		error(r, "%s", why);
	size_t n = strlen(dir) + strlen(name) + 2;
	char *path = ir_alloc(&r->g->arena, n);
	snprintf(path, n, "%s/%s", dir, name);
	r->g->ir_data = strcmp(dir, ".") ? path : name;
}

/* 'graph "gpt" model="gpt.onnx" opset=17 mesh=2x2 dp=1 tp=2 pp=2 microbatches=4'
 * (and slice=N after -slice, subpipeline=1 after -subpipeline, data="NAME"
 * when values are in a data file) */
static void
parse_header(Reader *r)
{
	Graph *g = r->g;
	if (!consume_word(r, "graph"))
		error(r, "expected 'graph' header, found %s", found(r));
	g->name = parse_string(r, "quoted graph name");
	bool seen[10] = {0};
	static const char *keys[] = {"model", "opset", "mesh", "dp", "tp", "pp", "microbatches",
		"slice", "subpipeline", "data"};
	while (!at_end(r)) {
		int k = 0;
		while (k < 10 && !consume_word(r, keys[k]))
			k++;
		if (k == 10)
			error(r, "expected model=, opset=, mesh=, dp=, tp=, pp=, microbatches=, slice=, "
			    "subpipeline= or data=, found %s", found(r));
		if (seen[k])
			error(r, "duplicate %s= in header", keys[k]);
		seen[k] = true;
		expect(r, "=");
		switch (k) {
		case 0: {
			g->model = parse_string(r, "quoted model path");
			/* weights are relative to the model's directory, as for the loader */
			g->dir = dir_of(g, g->model);
			break;
		}
		case 1: g->opset = parse_int(r, "opset", 0, INT64_MAX); break; /* ir_check bounds it */
		case 2:
			skip_space(r);
			g->mesh.rows = small_int(r, "mesh rows");
			if (r->p >= r->end || *r->p != 'x')
				error(r, "expected mesh=RxC, found %s", found(r));
			r->p++;
			g->mesh.cols = small_int(r, "mesh columns");
			if (!g->mesh.rows || !g->mesh.cols)
				error(r, "mesh rows and columns must be at least 1");
			break;
		case 3: g->mesh.dp = (int)parse_int(r, "dp", 1, INT_MAX); break;
		case 4: g->mesh.tp = (int)parse_int(r, "tp", 1, INT_MAX); break;
		case 5: g->mesh.pp = (int)parse_int(r, "pp", 1, INT_MAX); break;
		case 6: g->microbatches = (int)parse_int(r, "microbatches", 1, INT_MAX); break;
		case 7: g->slice = (int)parse_int(r, "slice", 1, INT_MAX); break; /* ir_check bounds it */
		case 8: g->subpipe = parse_int(r, "subpipeline", 0, 1) != 0; break;
		case 9: open_data(r, parse_string(r, "quoted data file name")); break;
		}
	}
	/* chosen degrees come as a set, as the printer writes them: a lone
	 * dp= would print back as mesh=0x0, which does not read */
	bool degrees = seen[3] || seen[4] || seen[5] || seen[6] || seen[7] || seen[8];
	if (degrees && !(seen[2] && seen[3] && seen[4] && seen[5]))
		error(r, "dp=, tp=, pp=, microbatches=, slice= and subpipeline= need mesh=, dp=, tp= "
		    "and pp= together");
}

/* GraphNodes from the nodes' gn= annotations and the templates (which may
 * name GraphNodes no node is in); the printer keeps only the membership, so
 * names are empty. */
static void
rebuild_groups(Graph *g)
{
	int ng = 0;
	for (NodeId n = 0; n < g->nnodes; n++)
		if (g->nodes[n].group >= ng)
			ng = g->nodes[n].group + 1;
	for (int t = 0; t < g->ntemplates; t++)
		for (int i = 0; i < g->templates[t].ngroups * g->templates[t].ninstances; i++)
			if (g->templates[t].inst[i] >= ng)
				ng = g->templates[t].inst[i] + 1;
	if (!ng)
		return;
	g->ngroups = ng;
	g->groups = ir_alloc(&g->arena, sizeof *g->groups * ng);
	for (NodeId n = 0; n < g->nnodes; n++)
		if (g->nodes[n].group >= 0)
			g->groups[g->nodes[n].group].nnodes++;
	for (int i = 0; i < ng; i++) {
		g->groups[i].name = "";
		g->groups[i].tmpl = IR_NONE;
		g->groups[i].nodes = ir_alloc(&g->arena, sizeof(NodeId) * (g->groups[i].nnodes + 1));
		g->groups[i].nnodes = 0;
	}
	for (NodeId n = 0; n < g->nnodes; n++) {
		GraphNode *gn = g->nodes[n].group >= 0 ? &g->groups[g->nodes[n].group] : NULL;
		if (gn && !gn->nnodes++)
			gn->name = g->nodes[n].name; /* as graph-nodes names it */
		if (gn)
			gn->nodes[gn->nnodes - 1] = n;
	}
	for (int t = 0; t < g->ntemplates; t++)
		for (int i = 0; i < g->templates[t].ngroups * g->templates[t].ninstances; i++)
			g->groups[g->templates[t].inst[i]].tmpl = t;
}

static void
parse(Reader *r, const char *text, size_t len)
{
	const char *s = text, *e = text + len;
	bool header = false;
	while (s < e) {
		const char *nl = memchr(s, '\n', e - s);
		r->p = s;
		r->end = nl ? nl : e;
		if (r->line == INT_MAX)
			error(r, "too many lines");
		r->line++;
		s = nl ? nl + 1 : e;
		/* blank lines and whole-line comments, for hand-written tests */
		if (at_end(r) || peek(r, '#'))
			continue;
		if (!header) {
			parse_header(r);
			header = true;
		} else if (consume_word(r, "output")) {
			parse_output(r);
		} else if (consume_word(r, "loss")) {
			parse_loss(r);
		} else if (consume_word(r, "grad")) {
			parse_grad(r);
		} else if (consume_word(r, "template")) {
			parse_template(r);
		} else {
			parse_assign(r);
		}
	}
	if (!header) {
		r->p = r->end = e;
		r->line = r->line ? r->line : 1;
		error(r, "expected 'graph' header, found end of file");
	}
	for (TensorId t = 0; t < r->g->ntensors; t++)
		if (!r->ti[t].defline) {
			r->line = r->ti[t].useline;
			error(r, "%%%d is used but never defined", r->ti[t].num);
		}
}

/*
 * The model an IR file names is untrusted like the rest of it: a relative
 * path inside the current directory, no symbolic link on the way (its
 * weights are then opened inside its directory by ir/file.c).  A model the
 * user names (tapc -model=FILE) replaces it and is taken as given.
 */
static bool
place_model(Graph *g, const char *path, const char *model)
{
	if (model) {
		g->model = ir_strdup(&g->arena, model);
		g->dir = dir_of(g, g->model);
		return true;
	}
	if (!*g->model)
		return true;
	char why[600];
	if (!ir_path_inside(g->model)) {
		diag_file(path, "model path '%s' must be relative and inside the current directory "
		    "(tapc -model=FILE names the model instead)", g->model);
		return false;
	}
	if (strcmp(g->dir, ".") != 0 &&
	    !ir_dir_inside(".", g->dir, "model directory", "the current directory", why, sizeof why)) {
		diag_file(path, "%s", why);
		return false;
	}
	return true;
}

Graph *
ir_parse(const char *text, size_t len, const char *path)
{
	Reader *r = calloc(1, sizeof *r);
	if (!r)
		die("out of memory");
	r->path = path ? path : "<ir>";
	r->data_fd = -1;
	r->g = ir_new("");
	rehash(r);
	if (setjmp(r->fail)) {
		ir_free(r->g);
		r->g = NULL;
	} else {
		parse(r, text ? text : "", text ? len : 0);
		rebuild_groups(r->g);
		ir_reindex(r->g);
		r->g->ops_loaded = r->g->nnodes;
	}
	Graph *g = r->g;
	free(r->keys);
	free(r->vals);
	free(r->ti);
	free(r->str.p);
	free(r->vals_buf.p);
	free(r->outs.p);
	free(r->ins.p);
	free(r->in_template);
	if (r->data_fd >= 0)
		close(r->data_fd);
	free(r);
	return g;
}

/* The text, then the checks a model gets: an IR file is no more trusted. */
Graph *
ir_read(const char *text, size_t len, const char *path, const char *model)
{
	path = path ? path : "<ir>";
	Graph *g = ir_parse(text, len, path);
	if (!g || !place_model(g, path, model))
		goto fail;
	/* problems found here are the IR file's: name it, not the model */
	const char *m = g->model;
	g->model = path;
	bool ok = ir_check(g) && ir_reinfer(g);
	g->model = m;
	if (ok)
		return g;
fail:
	ir_free(g);
	return NULL;
}
