/*
 * backend.c - the table of communication backends taprt_main chooses from
 * by name (--backend=threads|mpi|nccl).
 *
 * Needs the backends this runtime was built with: threads always, mpi when
 * configure found MPI (TAPRT_HAVE_MPI).  A backend that exists but is not
 * built here is still named in the table, so the program can say so
 * instead of calling the name unknown.
 */
#include <string.h>

#include "runtime/internal.h"

static const struct {
	const char *name;
	const taprt_backend *be;        /* NULL: not built into this runtime */
	const char *missing;            /* why not */
} backends[] = {
	{"threads", &taprt_threads_backend, NULL},
#ifdef TAPRT_HAVE_MPI
	{"mpi", &taprt_mpi_backend, NULL},
#else
	{"mpi", NULL, "it was configured without MPI: install libopenmpi-dev and configure again"},
#endif
	{"nccl", NULL, "the NCCL backend is not written yet"},
};
enum { NBACKENDS = sizeof backends / sizeof backends[0] };

const taprt_backend *
taprt_backend_find(const char *name, char *why, size_t whylen)
{
	for (int i = 0; i < NBACKENDS; i++) {
		if (strcmp(name, backends[i].name) != 0)
			continue;
		if (!backends[i].be)
			snprintf(why, whylen, "backend '%s' is not built into this runtime (%s; built: %s)",
			    name, backends[i].missing, taprt_backends_built());
		return backends[i].be;
	}
	snprintf(why, whylen, "unknown backend '%s' (threads, mpi or nccl)", name);
	return NULL;
}

const char *
taprt_backends_built(void)
{
#ifdef TAPRT_HAVE_MPI
	return "threads, mpi";
#else
	return "threads";
#endif
}
