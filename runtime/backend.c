/*
 * backend.c - the table of communication backends taprt_main chooses from
 * by name (--backend=threads|mpi|nccl).
 *
 * Needs the backends this runtime was built with: threads always, mpi when
 * configure found MPI (TAPRT_HAVE_MPI).  A backend that exists but is not
 * built here is still named in the table, so the program can say so
 * instead of calling the name unknown.
 *
 * Also what the backends share: how long a wait spins before it sleeps.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/*
 * A rank that arrives first at a collective spins on the others' arrival
 * for a while, then sleeps.  Waking a sleeping thread is a futex wake-up
 * on bare metal, but on a virtual machine the sleeper's vCPU may have been
 * halted, and the host has to run it again first: a spin window of 2,000
 * pauses (27-33 us on the Intel Xeon VM of 2026-11-30) left GPT-2-small
 * width at tp=2 sleeping in its all-reduces, its speedup over one rank
 * 1.76x (median of eight interleaved rounds) against 1.81x with 4 ms, the
 * slow rounds 1.40x against 1.69x (docs/runtime.md, "Waiting").  4 ms is
 * about what libgomp's team spins by default (300,000 pauses) before its
 * threads sleep.  A window in time, not in polls, so that the CPU's pause
 * latency (10 to 140 cycles) and a backend's poll cost do not change it.
 * Only when every busy thread has a CPU: otherwise a spinning rank takes
 * the core from the rank it waits for (eight ranks on two cores in CI).
 */
int64_t
taprt_comm_spin_ns(int ranks, int threads)
{
	const char *env = getenv("TAPRT_COMM_SPIN");
	if (env)
		return atoll(env) > 0 ? atoll(env) * 1000 : 0;
	long busy = (long)ranks * (threads > 1 ? threads : 1);
	return sysconf(_SC_NPROCESSORS_ONLN) >= busy ? (int64_t)TAPRT_COMM_SPIN_US * 1000 : 0;
}

int64_t
taprt_now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}
