/*
 * xcore.c - what reading another core's fresh data costs, for threads.sh.
 *
 *   xcore [ROUNDS]   prints: xcore own_us OTHER_us ratio
 *
 * One thread writes 1 MiB of floats (it stays in the writer's L2) and
 * then sums it itself, or hands it to a second thread that sums it; the
 * mean microseconds of each read over ROUNDS (default 2000) rounds.  A
 * kernel split across the rank's threads reads, in the next kernel,
 * what the other thread wrote whenever the two kernels split their
 * tensors differently, so this is the price of each such hand-over; on a
 * virtual machine it depends on where the host placed the two vCPUs
 * (same core complex or not), and it changes while the machine runs.
 *
 * Needs pthreads and C11 atomics; compiled by bench/threads.sh.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define FLOATS (256 * 1024)

static float *buf;
static atomic_int turn;                 /* 0: the writer's, 1: the reader's */
static int rounds = 2000;
static double other_s;
static volatile float sink;

static double
now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static float
sum(void)
{
	float s[16] = {0};              /* 16 partial sums: a bandwidth-bound loop */
	for (int i = 0; i < FLOATS; i += 16)
		for (int k = 0; k < 16; k++)
			s[k] += buf[i + k];
	float t = 0;
	for (int k = 0; k < 16; k++)
		t += s[k];
	return t;
}

static void
fill(int round)
{
	for (int i = 0; i < FLOATS; i++)
		buf[i] = (float)(i + round);
}

static void *
reader(void *arg)
{
	(void)arg;
	for (int r = 0; r < rounds; r++) {
		while (atomic_load(&turn) != 1)
			;
		double t = now();
		sink = sum();
		other_s += now() - t;
		atomic_store(&turn, 0);
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	if (argc > 1 && (rounds = atoi(argv[1])) < 1) {
		fprintf(stderr, "usage: xcore [ROUNDS]\n");
		return 2;
	}
	if (!(buf = aligned_alloc(64, FLOATS * sizeof(float))))
		return 1;
	double own_s = 0;
	for (int r = 0; r < rounds; r++) {
		fill(r);
		double t = now();
		sink = sum();
		own_s += now() - t;
	}
	pthread_t th;
	if (pthread_create(&th, NULL, reader, NULL))
		return 1;
	for (int r = 0; r < rounds; r++) {
		while (atomic_load(&turn) != 0)
			;
		fill(r);
		atomic_store(&turn, 1);
	}
	pthread_join(th, NULL);
	printf("xcore %.1f %.1f %.2f\n", own_s / rounds * 1e6, other_s / rounds * 1e6, other_s / own_s);
	return 0;
}
