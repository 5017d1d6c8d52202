/*
 * test_escape.c - every writer of ir/escape.c against an independent reader
 * of its context, over every byte value 1-255 (a C string cannot hold 0)
 * and the attack sequences of issue 11:
 *
 *   C string   the C compiler (-std=c11, so trigraphs are on) compiles the
 *              literal and the program prints its bytes back
 *   C comment  the compiler must see only the comment: payloads that close
 *              it ("*" "/", a backslash-CR splice, "?" "?/", a trigraph) would redefine main
 *   make       GNU make reads the prerequisites back through $^
 *   JSON       jansson decodes the string back
 *   IR         ir_parse reads the printed graph back
 *   XML        python3's expat parser reads the text back
 *
 * Needs cc, make and /usr/bin/python3 on PATH (make check has them) and
 * jansson.  Scratch files go to a fresh directory under TMPDIR.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test/unit/util.h"

/* The hostile sequences: comment closers, a splice with a lone CR, a
 * trigraph backslash, quotes, make's specials, invalid UTF-8. */
static const char *const attacks[] = {
	"*/", "x */ int main(void) { return 7; } /*", "*\\\r/", "*\\\n/", "?\?/", "*?\?/\n/",
	"\"", "\\", "\\\"", "a\"); system(\"echo INJECTED\"); (\"", "$(shell echo INJECTED)",
	"# comment", "a b", "a:b", "\n\trm -rf /", "\r\n", "\xff\xfe", "\xc0\xaf", "\xed\xa0\x80",
	"\xe2\x80\xa8", "\xf0\x9f\x98\x80", "\xf4\x90\x80\x80", "</text><script>", "&amp;",
};
#define NATTACKS ((int)(sizeof attacks / sizeof *attacks))

static char scratch[64];

static void
make_scratch(void)
{
	if (!scratch[0]) {
		snprintf(scratch, sizeof scratch, "%s/tapc-esc-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
		if (!mkdtemp(scratch))
			scratch[0] = 0;
	}
}

static char *
path_in(const char *name)
{
	static char buf[4][160];
	static int k;
	char *b = buf[k++ % 4];
	snprintf(b, sizeof buf[0], "%s/%s", scratch, name);
	return b;
}

/* The strings every test checks: each byte 1-255 alone and between letters,
 * then the attack sequences. */
static int
corpus(char out[][64])
{
	int n = 0;
	for (int b = 1; b < 256; b++) {
		snprintf(out[n++], 64, "%c", b);
		snprintf(out[n++], 64, "a%cb", b);
	}
	for (int i = 0; i < NATTACKS; i++)
		snprintf(out[n++], 64, "%s", attacks[i]);
	return n;
}
#define NCORPUS (2 * 255 + NATTACKS)

static char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t cap = 0, n = 0, r;
	do {
		if (n == cap && !(buf = realloc(buf, cap = cap ? 2 * cap : 4096)))
			abort();
		n += (r = fread(buf + n, 1, cap - n, f));
	} while (r > 0);
	fclose(f);
	*len = n;
	return buf;
}

static int
run(const char *cmd)
{
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ------------------------------------------------------------- C strings */

static void
test_c_string(void)
{
	make_scratch();
	CU_ASSERT_FATAL(scratch[0] != 0);
	static char s[NCORPUS][64];
	int n = corpus(s);
	FILE *f = fopen(path_in("s.c"), "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("#include <stdio.h>\n#include <string.h>\nstatic const char *const s[] = {\n", f);
	for (int i = 0; i < n; i++) {
		ir_esc_c_string(f, s[i]);
		fputs(",\n", f);
	}
	/* each string's bytes in hex, one per line, so NUL cannot hide */
	fputs("};\nint main(void) {\n\tfor (size_t i = 0; i < sizeof s / sizeof *s; i++) {\n"
	    "\t\tfor (const unsigned char *p = (const unsigned char *)s[i]; *p; p++)\n"
	    "\t\t\tprintf(\"%02x\", *p);\n\t\tputchar('\\n');\n\t}\n\treturn 0;\n}\n", f);
	fclose(f);
	char cmd[512];
	snprintf(cmd, sizeof cmd, "cc -std=c11 -Wall -Werror -o %s %s && %s > %s", path_in("s"),
	    path_in("s.c"), path_in("s"), path_in("s.out"));
	CU_ASSERT_EQUAL_FATAL(run(cmd), 0);
	size_t len = 0;
	char *out = slurp(path_in("s.out"), &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(out);
	char *line = out;
	int bad = 0;
	for (int i = 0; i < n; i++) {
		char want[200] = "";
		for (const unsigned char *p = (const unsigned char *)s[i]; *p; p++)
			snprintf(want + strlen(want), 4, "%02x", *p);
		char *nl = memchr(line, '\n', out + len - line);
		CU_ASSERT_PTR_NOT_NULL_FATAL(nl);
		*nl = 0;
		if (strcmp(line, want) != 0 && bad++ < 5)
			fprintf(stderr, "\nC string %d: compiled to %s, want %s\n", i, line, want);
		line = nl + 1;
	}
	CU_ASSERT_EQUAL(bad, 0);
	free(out);
}

/* ------------------------------------------------------------ C comments */

static void
test_c_comment(void)
{
	make_scratch();
	static char s[NCORPUS][64];
	int n = corpus(s);
	/* every string inside a comment of its own, and all of them in one;
	 * the only code is main returning 0: a comment that ends early lets a
	 * payload redefine main or break the build */
	FILE *f = fopen(path_in("c.c"), "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("/* ", f);
	for (int i = 0; i < n; i++)
		ir_esc_c_comment(f, s[i]);
	fputs(" */\n", f);
	for (int i = 0; i < n; i++) {
		fputs("/* ", f);
		ir_esc_c_comment(f, s[i]);
		fputs(" */\n// ", f); /* a line comment too: no splice may extend it */
		ir_esc_c_comment(f, s[i]);
		fputs("\n", f);
	}
	fputs("int main(void) { return 0; }\n", f);
	fclose(f);
	char cmd[512];
	snprintf(cmd, sizeof cmd, "cc -std=c11 -Wall -Werror -Wcomment -Wtrigraphs -o %s %s && %s",
	    path_in("c"), path_in("c.c"), path_in("c"));
	CU_ASSERT_EQUAL(run(cmd), 0);
	/* and the properties that make it so, on the text itself */
	size_t len = 0;
	char *text = slurp(path_in("c.c"), &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	int stars = 0, ctrl = 0, bs_nl = 0, qq = 0;
	for (size_t i = 0; i + 1 < len; i++) {
		stars += text[i] == '*' && text[i + 1] == '/' && !(i + 2 < len && text[i + 2] == '\n');
		bs_nl += text[i] == '\\' && (text[i + 1] == '\n' || text[i + 1] == '\r');
		qq += text[i] == '?' && text[i + 1] == '?';
		ctrl += text[i] == '\r' || (unsigned char)text[i] >= 0x7f;
	}
	CU_ASSERT_EQUAL(stars, 0);       /* only the closers we wrote, at line ends */
	CU_ASSERT_EQUAL(bs_nl, 0);
	CU_ASSERT_EQUAL(qq, 0);
	CU_ASSERT_EQUAL(ctrl, 0);
	free(text);
}

/* ------------------------------------------------------------------- make */

static bool
is_refused(int b, bool first, bool last)
{
	return b < 0x20 || b == 0x7f || strchr("%;=|&\\*?[", b) || (b == '~' && first) ||
	    (b == ' ' && (first || last));
}

static void
test_make(void)
{
	make_scratch();
	/* the documented refusals, byte by byte, alone and inside a name */
	for (int b = 1; b < 256; b++) {
		char one[2] = {(char)b, 0}, mid[4] = {'a', (char)b, 'b', 0};
		int bad;
		CU_ASSERT_EQUAL(!ir_make_path_ok(one, &bad), is_refused(b, true, true));
		CU_ASSERT_EQUAL(!ir_make_path_ok(mid, &bad), is_refused(b, false, false));
		if (!ir_make_path_ok(mid, &bad))
			CU_ASSERT_EQUAL(bad, b);
		char arch[8] = {'a', '(', (char)b, ')', 0}; /* "lib(member)": refused whatever b is */
		CU_ASSERT_FALSE(ir_make_path_ok(arch, &bad));
	}
	int bad;
	CU_ASSERT_FALSE(ir_make_path_ok("", &bad));
	CU_ASSERT_FALSE(ir_make_path_ok("~/x", &bad));
	CU_ASSERT_TRUE(ir_make_path_ok("a~b", &bad));
	CU_ASSERT_FALSE(ir_make_path_ok("ab ", &bad));
	CU_ASSERT_FALSE(ir_make_path_ok(" ab", &bad));
	CU_ASSERT_TRUE(ir_make_path_ok("a b", &bad));
	CU_ASSERT_FALSE(ir_make_path_ok("lib(member)", &bad)); /* an archive member */
	CU_ASSERT_TRUE(ir_make_path_ok("w (1).bin", &bad));
	CU_ASSERT_TRUE(ir_make_path_ok("(x)", &bad));

	/* every accepted name, at the start, middle and end of a word, read
	 * back by GNU make: target tK's $^ is the name, written with $(file) */
	static char names[3 * 256 + NATTACKS][64];
	int n = 0;
	for (int b = 1; b < 256; b++) {
		if (b == '/')
			continue;
		snprintf(names[n++], 64, "%cx", b);
		snprintf(names[n++], 64, "x%cy", b);
		snprintf(names[n++], 64, "x%c", b);
	}
	for (int i = 0; i < NATTACKS; i++)
		snprintf(names[n++], 64, "%s", attacks[i]);
	/* one make run per name would be slow: each target writes its own file */
	FILE *f = fopen(path_in("deps.mk"), "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	int kept = 0;
	for (int i = 0; i < n; i++) {
		if (!ir_make_path_ok(names[i], &bad))
			continue;
		kept++;
		fprintf(f, "t%d: ", i);
		ir_esc_make(f, names[i]);
		fprintf(f, "\n\t$(file >%s/o%d,$^)\n\t@:\n", scratch, i);
		ir_esc_make(f, names[i]);
		fputs(":\n", f);
	}
	fputs("all:", f);
	for (int i = 0; i < n; i++)
		if (ir_make_path_ok(names[i], &bad))
			fprintf(f, " t%d", i);
	fputs("\n.DEFAULT_GOAL := all\n", f);
	fclose(f);
	char cmd[512];
	snprintf(cmd, sizeof cmd, "cd %s && make -s -f deps.mk all >/dev/null", scratch);
	CU_ASSERT_EQUAL_FATAL(run(cmd), 0);
	int wrong = 0;
	for (int i = 0; i < n; i++) {
		if (!ir_make_path_ok(names[i], &bad))
			continue;
		char o[32];
		snprintf(o, sizeof o, "o%d", i);
		size_t len = 0;
		char *got = slurp(path_in(o), &len);
		/* $(file >) ends with a newline; make drops a leading "./" */
		const char *want = names[i];
		bool same = got && len == strlen(want) + 1 && memcmp(got, want, len - 1) == 0;
		if (!same && wrong++ < 5)
			fprintf(stderr, "\nmake read name %d (%s) back as '%.*s'\n", i, want,
			    got ? (int)len : 0, got ? got : "");
		free(got);
	}
	CU_ASSERT_EQUAL(wrong, 0);
	CU_ASSERT(kept > 3 * 200);
}

/* ------------------------------------------------------------------- JSON */

/* Latin-1 for what is not well-formed UTF-8: the documented mapping. */
static bool
utf8_ok(const unsigned char *s)
{
	json_error_t e;
	(void)e;
	/* jansson's own validator, through a decode of the raw bytes */
	char buf[200];
	snprintf(buf, sizeof buf, "\"%s\"", (const char *)s);
	for (const unsigned char *p = s; *p; p++)
		if (*p < 0x20 || *p == '"' || *p == '\\')
			return true; /* control and quote bytes are escaped: not a UTF-8 question */
	json_t *j = json_loads(buf, JSON_DECODE_ANY, &e);
	bool ok = j != NULL;
	json_decref(j);
	return ok;
}

static void
test_json(void)
{
	static char s[NCORPUS][64];
	int n = corpus(s);
	int wrong = 0;
	for (int i = 0; i < n; i++) {
		char *text = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&text, &len);
		ir_esc_json(f, s[i]);
		fclose(f);
		json_error_t e;
		json_t *j = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
		CU_ASSERT_PTR_NOT_NULL(j);
		if (!j) {
			fprintf(stderr, "\nJSON %d: jansson: %s: %s\n", i, e.text, text);
			free(text);
			continue;
		}
		CU_ASSERT_TRUE(json_is_string(j));
		/* well-formed UTF-8 comes back as it was; other bytes as U+0080-U+00FF */
		char want[200] = "";
		size_t w = 0;
		if (utf8_ok((const unsigned char *)s[i])) {
			w = strlen(s[i]);
			memcpy(want, s[i], w);
		} else {
			for (const unsigned char *p = (const unsigned char *)s[i]; *p; p++) {
				if (*p < 0x80) {
					want[w++] = (char)*p;
				} else {
					want[w++] = (char)(0xc0 | *p >> 6);
					want[w++] = (char)(0x80 | (*p & 0x3f));
				}
			}
		}
		bool same = json_string_length(j) == w && memcmp(json_string_value(j), want, w) == 0;
		if (!same && wrong++ < 5)
			fprintf(stderr, "\nJSON %d: %s decodes to '%s'\n", i, text, json_string_value(j));
		json_decref(j);
		free(text);
	}
	CU_ASSERT_EQUAL(wrong, 0);
}

/* --------------------------------------------------------------------- IR */

static void
test_ir(void)
{
	static char s[NCORPUS][64];
	int n = corpus(s);
	/* one graph holding every string as the graph name, tensor names, a
	 * node's name (the "# comment") and string attributes */
	int wrong = 0;
	for (int i = 0; i < n; i++) {
		Graph *g = ir_new(s[i]);
		g->opset = 13;
		TensorId x = ir_add_tensor(g, s[i], TK_INPUT, DT_F32);
		ir_set_shape(ir_tensor(g, x), 1, (int64_t[]){2});
		ir_add_input(g, x);
		TensorId y = ir_add_tensor(g, "y", TK_VALUE, DT_F32);
		NodeId nd = ir_add_node(g, OP_Relu, s[i], 1, &x, 1, &y);
		(void)nd;
		ir_set_shape(ir_tensor(g, y), 1, (int64_t[]){2});
		ir_add_output(g, y);
		ir_tensor(g, y)->name = s[i];
		ir_reindex(g);
		char *text = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&text, &len);
		ir_print(f, g);
		fclose(f);
		quiet_diags();
		Graph *h = ir_parse(text, len, "esc.ir");
		bool same = h && strcmp(h->name, s[i]) == 0 && strcmp(h->tensors[h->inputs[0]].name, s[i]) == 0 &&
		    strcmp(h->nodes[0].name, s[i]) == 0 && strcmp(h->tensors[h->outputs[0]].name, s[i]) == 0;
		/* and every line of the dump is one line: a name cannot add one */
		int lines = 0;
		for (size_t k = 0; k < len; k++)
			lines += text[k] == '\n';
		if ((!same || lines != 4) && wrong++ < 5)
			fprintf(stderr, "\nIR %d: %s", i, h ? text : diag_last);
		ir_free(h);
		ir_free(g);
		free(text);
	}
	CU_ASSERT_EQUAL(wrong, 0);
}

/* -------------------------------------------------------------------- XML */

static void
test_xml(void)
{
	make_scratch();
	static char s[NCORPUS][64];
	int n = corpus(s);
	FILE *f = fopen(path_in("x.svg"), "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("<svg xmlns=\"http://www.w3.org/2000/svg\">\n", f);
	for (int i = 0; i < n; i++) {
		fputs("<text a=\"", f);
		ir_esc_xml(f, s[i]);
		fputs("\">", f);
		ir_esc_xml(f, s[i]);
		fputs("</text>\n", f);
	}
	fputs("</svg>\n", f);
	fclose(f);
	/* python's expat: the file parses, has exactly n elements, and each one's
	 * text and attribute equal the string with U+FFFD for what XML cannot hold */
	f = fopen(path_in("x.py"), "w");
	fputs("import sys, xml.etree.ElementTree as ET\n"
	    "r = ET.parse(sys.argv[1]).getroot()\n"
	    "for e in r:\n"
	    "    assert e.text == e.get('a') or (e.text is None and e.get('a') == ''), (e.text, e.get('a'))\n"
	    "    sys.stdout.buffer.write((e.get('a') or '').encode('utf-8', 'surrogatepass').hex().encode() + b'\\n')\n", f);
	fclose(f);
	char cmd[512];
	snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s > %s", path_in("x.py"), path_in("x.svg"),
	    path_in("x.out"));
	CU_ASSERT_EQUAL_FATAL(run(cmd), 0);
	size_t len = 0;
	char *out = slurp(path_in("x.out"), &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(out);
	char *line = out;
	int wrong = 0;
	for (int i = 0; i < n; i++) {
		char *nl = memchr(line, '\n', out + len - line);
		CU_ASSERT_PTR_NOT_NULL_FATAL(nl);
		*nl = 0;
		/* the expected text: well-formed UTF-8 and tab, LF, CR kept, every
		 * other byte U+FFFD (jansson judges what is well-formed) */
		char want[400] = "";
		const unsigned char *p = (const unsigned char *)s[i];
		while (*p) {
			int k = *p >= 0x20 || *p == '\t' || *p == '\n' || *p == '\r' ? 1 : 0;
			if (*p >= 0x80) {
				char one[8] = {0};
				for (k = 2; k <= 4 && p[k - 1]; k++) {
					memcpy(one, p, k);
					if (utf8_ok((const unsigned char *)one))
						break;
				}
				if (k > 4 || !p[k - 1])
					k = 0;
			}
			if (!k) {
				strcat(want, "efbfbd");
				p++;
				continue;
			}
			for (int j = 0; j < k; j++)
				snprintf(want + strlen(want), 3, "%02x", p[j]);
			p += k;
		}
		if (strcmp(line, want) != 0 && wrong++ < 5)
			fprintf(stderr, "\nXML %d: read back %s, want %s\n", i, line, want);
		line = nl + 1;
	}
	CU_ASSERT_EQUAL(wrong, 0);
	free(out);
	char rm[200];
	snprintf(rm, sizeof rm, "rm -rf '%s'", scratch);
	CU_ASSERT_EQUAL(run(rm), 0);
	scratch[0] = 0;
}

void
suite_escape(CU_pSuite s)
{
	ADD(s, test_c_string);
	ADD(s, test_c_comment);
	ADD(s, test_make);
	ADD(s, test_json);
	ADD(s, test_ir);
	ADD(s, test_xml);
}
