/* comm_threads.c - placeholder until the threads backend lands. */
#include "runtime/taprt.h"

const taprt_backend taprt_threads_backend = {.name = "threads"};
