/*
 * fuzz_pb.c - libFuzzer target for the program's TensorProto reader (make
 * fuzz): the input_N.pb and output_N.pb files a generated program reads
 * come from its user.
 *
 * Any bytes go to taprt_pb_parse; what it accepts must be self-consistent:
 * a supported dtype, non-negative dims whose product is numel, and data
 * holding numel elements, every byte of which is read here so ASan sees an
 * allocation that is too short.
 */
#include <stdlib.h>

#include "runtime/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	taprt_pb t;
	char err[200];
	if (taprt_pb_parse(data, size, &t, err, sizeof err) != 0) {
		if (t.data)
			abort(); /* a failure leaves nothing allocated */
		return 0;
	}
	int es = taprt_dtype_size(t.dtype);
	int64_t n = 1;
	if (es <= 0 || t.rank < 0 || t.rank > TAPRT_MAX_RANK || !t.data)
		abort();
	for (int i = 0; i < t.rank; i++) {
		if (t.dims[i] < 0)
			abort();
		n *= t.dims[i];
	}
	if (n != t.numel)
		abort();
	volatile unsigned char sum = 0;
	for (int64_t i = 0; i < n * es; i++)
		sum += ((const unsigned char *)t.data)[i];
	free(t.data);
	return 0;
}
