/*
 * fuzz_read.c - libFuzzer target for the IR reader (make fuzz).
 *
 * IR files are user input too (tapc dump.ir -passes=...).  Any text the
 * reader accepts must print, and the printed text must read back and print
 * to the same bytes: the round trip the golden tests rely on.
 */
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *
print_to_string(Graph *g, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	ir_print(f, g);
	fclose(f);
	return buf;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *null;
	if (!null)
		null = fopen("/dev/null", "w");
	diag_stream = null;
	Graph *g = ir_read((const char *)data, size, "fuzz.ir", NULL);
	if (!g)
		return 0;
	size_t n1, n2;
	char *a = print_to_string(g, &n1);
	ir_free(g);
	Graph *h = ir_read(a, n1, "fuzz.ir", NULL);
	if (!h)
		abort(); /* printed text that does not read back */
	char *b = print_to_string(h, &n2);
	if (n1 != n2 || memcmp(a, b, n1) != 0)
		abort(); /* print -> read -> print changed the text */
	ir_free(h);
	free(a);
	free(b);
	return 0;
}
