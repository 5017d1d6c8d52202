/*
 * scratch.c - a kernel's temporary buffer: one per thread (ranks run as
 * threads), grown on demand, reused across kernels (they never nest) and
 * freed when the thread exits.
 *
 * Needs pthreads.  Used by Conv's im2col and by the collectives' layout
 * permutations.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "runtime/internal.h"

/* One buffer per thread (ranks are threads), freed when the thread exits. */
typedef struct {
	void *p;
	size_t cap;
} Scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static bool scratch_ok;

static void
scratch_free(void *v)
{
	Scratch *s = v;
	free(s->p);
	free(s);
}

static void
scratch_init(void)
{
	scratch_ok = pthread_key_create(&scratch_key, scratch_free) == 0;
}

void *
taprt_scratch(int64_t bytes)
{
	pthread_once(&scratch_once, scratch_init);
	if (!scratch_ok)
		return NULL;
	Scratch *s = pthread_getspecific(scratch_key);
	if (!s) {
		if (!(s = calloc(1, sizeof *s)))
			return NULL;
		if (pthread_setspecific(scratch_key, s) != 0) {
			free(s);
			return NULL;
		}
	}
	size_t n = ((size_t)bytes + 63) & ~(size_t)63;
	if (n > s->cap) {
		free(s->p);
		s->cap = 0;
		if (!(s->p = aligned_alloc(64, n ? n : 64)))
			return NULL;
		s->cap = n;
	}
	return s->p;
}
