/*
 * xcore.c - what reading another core's fresh data, and writing over
 * data another core has read, cost, for threads.sh.
 *
 *   xcore [ROUNDS]   prints: xcore own_us OTHER_us ratio WOWN_us WSHARED_us wratio
 *
 * Reading: one thread writes 1 MiB of floats (it stays in the writer's
 * L2) and then sums it itself, or hands it to a second thread that sums
 * it; the mean microseconds of each read over ROUNDS (default 2000)
 * rounds.  A kernel split across the rank's threads reads, in the next
 * kernel, what the other thread wrote whenever the two kernels split
 * their tensors differently, so this is the price of each such
 * hand-over.
 *
 * Writing: the first thread writes the 1 MiB again, after summing it
 * itself (its lines in no other cache) or after the second thread summed
 * it (a copy of every line in the other core, which each store must take
 * back first).  A kernel's output goes to arena bytes the memory plan
 * reuses, which the other thread has often read (a 1x1 convolution split
 * by filters reads every channel of its input), so this is what writing
 * a dead tensor's bytes costs on two threads and never on one.  On a
 * virtual machine both depend on where the host placed the two vCPUs
 * (same core complex or not), and change while the machine runs.
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
static int reads;                       /* the reader's rounds: two per round */
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
	for (int r = 0; r < reads; r++) {
		while (atomic_load(&turn) != 1)
			;
		double t = now();
		sink = sum();
		other_s += now() - t;
		atomic_store(&turn, 0);
	}
	return NULL;
}

/* Hand buf to the reader and wait until it has summed it. */
static void
hand_over(void)
{
	atomic_store(&turn, 1);
	while (atomic_load(&turn) != 0)
		;
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
	double own_s = 0, wown_s = 0, wshared_s = 0, t;
	for (int r = 0; r < rounds; r++) {
		fill(r);
		t = now();
		sink = sum();
		own_s += now() - t;
		t = now();
		fill(r + 1);            /* over lines only this core holds */
		wown_s += now() - t;
	}
	pthread_t th;
	reads = 2 * rounds;
	if (pthread_create(&th, NULL, reader, NULL))
		return 1;
	for (int r = 0; r < rounds; r++) {
		fill(r);
		hand_over();            /* timed by the reader */
		t = now();
		fill(r + 1);            /* over lines the other core read */
		wshared_s += now() - t;
		hand_over();
	}
	pthread_join(th, NULL);
	double read_s = other_s / 2;    /* the reader's mean over its two reads a round */
	printf("xcore %.1f %.1f %.2f %.1f %.1f %.2f\n", own_s / rounds * 1e6, read_s / rounds * 1e6,
	    read_s / own_s, wown_s / rounds * 1e6, wshared_s / rounds * 1e6, wshared_s / wown_s);
	return 0;
}
