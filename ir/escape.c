/*
 * escape.c - names from a model, written safely into every file tapc makes.
 *
 * A model's names (graph, nodes, tensors, external data files, the model's
 * own path) come from strangers and end up in generated C, Makefiles,
 * dependency files, plan.json, the IR text and SVG.  Each of those contexts
 * has exactly one writer here, and every byte of a name goes through it:
 *
 *   ir_esc_c_string   a C string literal: "..." with octal escapes
 *   ir_esc_c_comment  text inside a C block comment
 *   ir_esc_make       a make target or prerequisite (ir_make_path_ok first)
 *   ir_esc_json       a JSON string
 *   ir_esc_ir         a string of tapc's IR text (read back by ir/read.c)
 *   ir_esc_xml        XML/SVG character data or attribute text
 *
 * Each is tested over every byte value 0-255 against an independent reader
 * of its context: the C compiler, GNU make, jansson, tapc's IR reader, and
 * an XML parser (test/unit/test_escape.c).  docs/design.md says why each
 * rule is what it is.
 *
 * Needs: nothing beyond libc.
 */
#include <string.h>

#include "ir/ir.h"

/*
 * A C string literal.  Printable ASCII stays; '"' and '\' get a backslash;
 * everything else (control bytes, DEL, bytes >= 0x80) and '?' (so no "??/"
 * trigraph can form under -std=c11) is a three-digit octal escape, which
 * cannot run into a following digit the way \x can.
 */
void
ir_esc_c_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f || *p == '?')
			fprintf(f, "\\%03o", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/*
 * Text inside a C comment.  A comment ends at "*" "/", and translation
 * phase 2 splices a backslash-newline before comments are even seen (GCC
 * also takes a lone CR as a newline), and trigraphs can make a backslash
 * out of "??/".  So '*', '\' and '?' never appear raw, nor does any byte
 * outside printable ASCII: each becomes the four characters \xHH, which no
 * phase of translation reads as anything but text.  The caller writes the
 * comment's own delimiters.
 */
void
ir_esc_c_comment(FILE *f, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p < 0x20 || *p >= 0x7f || *p == '*' || *p == '\\' || *p == '?')
			fprintf(f, "\\x%02x", *p);
		else
			fputc(*p, f);
	}
}

/*
 * A make target or prerequisite, as GNU make reads it in a rule line (the
 * rules were found by asking make itself about every byte value; see
 * test_escape.c).  Space, '#' and ':' take a backslash and '$' doubles.
 * Some bytes cannot be written so that make reads them back: line breaks
 * and other control bytes, '%' (a pattern), ';' (a recipe), '=' (a
 * variable), '|' (order-only), '&' ("&:" groups targets), '\' (a line
 * continuation at the end), the wildcards '*', '?', '[', a leading '~'
 * (a home directory), a leading or trailing space (make's implicit
 * rule search drops it), and a final ')' after a '(' ("lib(member)" is an
 * archive member to make).  ir_make_path_ok refuses those
 * and tells which; ir_esc_make may only be called on an accepted path.  A
 * name that starts with '.' is written as "./NAME", which make takes for
 * the same file, so that it cannot name a special target or a suffix rule.
 */
bool
ir_make_path_ok(const char *s, int *bad)
{
	size_t n = strlen(s);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == 0x7f || strchr("%;=|&\\*?[", c) || (c == '~' && i == 0) ||
		    (c == ' ' && (i == 0 || i == n - 1))) {
			*bad = c;
			return false;
		}
	}
	if (!n) {
		*bad = 0;
		return false;
	}
	/* "lib(member)": make reads a word ending in ')' after a '(' as an
	 * archive member, and no escape stops it */
	const char *open = strchr(s, '(');
	if (s[n - 1] == ')' && open && open > s) {
		*bad = ')';
		return false;
	}
	return true;
}

void
ir_esc_make(FILE *f, const char *s)
{
	if (s[0] == '.')
		fputs("./", f);
	for (const char *p = s; *p; p++) {
		if (*p == ' ' || *p == '#' || *p == ':')
			fputc('\\', f);
		else if (*p == '$')
			fputc('$', f);
		fputc(*p, f);
	}
}

/* Length of the well-formed UTF-8 sequence at p (RFC 3629: no overlongs,
 * no surrogates, nothing past U+10FFFF), or 0. */
static int
utf8_len(const unsigned char *p)
{
	unsigned char c = p[0];
	int n;
	unsigned char lo = 0x80, hi = 0xbf;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		lo = c == 0xe0 ? 0xa0 : 0x80;
		hi = c == 0xed ? 0x9f : 0xbf;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		lo = c == 0xf0 ? 0x90 : 0x80;
		hi = c == 0xf4 ? 0x8f : 0xbf;
	} else
		return 0;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (int i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

/*
 * A JSON string (RFC 8259).  '"' and '\' get a backslash; control bytes and
 * DEL are \u00XX.  Well-formed UTF-8 passes through.  A JSON text must be
 * Unicode, so a byte that is not part of well-formed UTF-8 is written as
 * the code point of the same value (\u0080-\u00ff, as Latin-1 reads it):
 * the file stays valid JSON and the byte stays visible.
 */
void
ir_esc_json(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		int n;
		if (*p == '"' || *p == '\\') {
			fprintf(f, "\\%c", *p++);
		} else if (*p < 0x20 || *p == 0x7f) {
			fprintf(f, "\\u%04x", *p++);
		} else if (*p < 0x80) {
			fputc(*p++, f);
		} else if ((n = utf8_len(p)) > 0) {
			fwrite(p, 1, n, f);
			p += n;
		} else {
			fprintf(f, "\\u%04x", *p++);
		}
	}
	fputc('"', f);
}

/*
 * A string of tapc's IR (docs/ir.md): '\' and (when quoted) '"' get a
 * backslash, newline is \n, other control bytes and DEL are \xHH, so a
 * dump stays one line per node; bytes >= 0x80 stay as they are (UTF-8
 * names read as written).  quoted = false is for the "# node name"
 * comment at the end of a line, which ir/read.c reads to the line's end.
 */
void
ir_esc_ir(FILE *f, const char *s, bool quoted)
{
	if (quoted)
		fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((quoted && *p == '"') || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\x%02x", *p);
		else
			fputc(*p, f);
	}
	if (quoted)
		fputc('"', f);
}

/*
 * XML character data or attribute text (SVG): the five predefined entities
 * for < > & " ', a character reference for the three control characters
 * XML 1.0 allows (tab, newline, CR: written as references, a parser keeps
 * them), U+FFFD for the control bytes it forbids and for bytes that are
 * not well-formed UTF-8; well-formed UTF-8 passes through.
 */
void
ir_esc_xml(FILE *f, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		int n;
		switch (*p) {
		case '<': fputs("&lt;", f); p++; continue;
		case '>': fputs("&gt;", f); p++; continue;
		case '&': fputs("&amp;", f); p++; continue;
		case '"': fputs("&quot;", f); p++; continue;
		case '\'': fputs("&apos;", f); p++; continue;
		case '\t': case '\n': case '\r': fprintf(f, "&#%d;", *p++); continue;
		}
		if (*p < 0x20) {
			fputs("\xef\xbf\xbd", f);
			p++;
		} else if (*p < 0x80) {
			fputc(*p++, f);
		} else if ((n = utf8_len(p)) > 0) {
			fwrite(p, 1, n, f);
			p += n;
		} else {
			fputs("\xef\xbf\xbd", f);
			p++;
		}
	}
}
