/*
 * fuzz_load.c - libFuzzer target for the ONNX loader (make fuzz).
 *
 * Feeds arbitrary bytes to onnx_load_buffer with external data forbidden
 * and prints any graph it accepts, so the wire scan, protobuf-c, the
 * checker rules, shape inference and the printer all see hostile input.
 */
#include <stdio.h>

#include "frontend/onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *null;
	if (!null)
		null = fopen("/dev/null", "w");
	diag_stream = null;
	OnnxOptions o = {0};
	Graph *g = onnx_load_buffer(data, size, "fuzz.onnx", NULL, &o);
	if (g) {
		ir_print(null, g);
		ir_free(g);
	}
	return 0;
}
