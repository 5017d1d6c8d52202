/*
 * comm_threads.c - the in-process communication backend: ranks are threads
 * of one process, so collectives read each other's buffers directly.
 *
 * Needs: pthreads and C11 atomics.  The table's init, rank, abort and
 * finalize are these (declared in internal.h for the unit tests):
 *
 *     taprt_comm *taprt_threads_world(int nranks);
 *         shared state for nranks ranks; NULL on bad nranks or no memory
 *     taprt_comm *taprt_threads_rank(taprt_comm *world, int rank);
 *         the handle rank `rank` passes as cx->comm; NULL if out of range
 *     void taprt_threads_abort(taprt_comm *world);
 *         wake every rank blocked in this backend; from then on every call
 *         returns -ECANCELED (a rank failed, the others must stop)
 *     void taprt_threads_free(taprt_comm *world);
 *         after every rank's thread has been joined
 *
 * Collectives.  A group's synchronization state (a barrier and one
 * published-arguments entry per member) lives in a slot keyed by the
 * group's rank list in group order, found in a world-wide table under a
 * mutex and then cached per rank, so disjoint groups (tensor-parallel
 * groups inside pipeline stages, data-parallel groups across them) run
 * concurrently without touching each other.  Members call collectives on
 * one group in the same order (SPMD), so the barrier's generation counter
 * is all the pairing needed.  Every collective is: publish pointers and
 * arguments, barrier, each member works on its share reading the others'
 * buffers, barrier (so nobody returns while its buffers are still read).
 * allreduce: member i reduces chunk i of all buffers in group order and
 * writes the result into chunk i of every buffer, so every rank gets the
 * same bits on every run.  The arguments are compared after the first
 * barrier, so a count/dtype/op mismatch across members makes all of them
 * return -EBADMSG instead of hanging or reading out of bounds.
 *
 * Point to point.  send never waits for the receiver (MPI's buffered
 * send): if the matching recv is already posted the sender copies straight
 * into the receiver's buffer, otherwise it queues a copy.  recv is then
 * the only call that waits for a peer, so only receives waiting on each
 * other in a cycle can deadlock, whatever order sends come in: exchanges
 * written "send then recv" on both sides (the pipeline schedule's pattern
 * between neighbours) and ring shifts always complete, at the price of one
 * extra copy when the sender runs ahead.  Messages match by (source, tag); two
 * with the same source and tag are received in the order they were sent.
 * recv's byte count must equal send's.
 *
 * Started all-reduces (iallreduce, test, wait).  A group's slot also has a
 * ring of NASYNC entries; a member's n-th started all-reduce on the group
 * uses entry n % NASYNC once the entry serves sequence n (its epoch), so
 * members pair started calls by order as they pair blocking ones, and the
 * two kinds never share state.  Starting publishes the buffer and counts
 * the arrival; test (and wait, and a start finding its entry busy) then
 * advances each of the rank's started requests: once all members have
 * arrived it reduces its share (the same chunk, group order and code as
 * allreduce, so the same bits) into every member's buffer, and once all
 * shares are in it leaves; the last to leave frees the entry for sequence
 * n + NASYNC.  No thread runs in the background: a member's share is
 * reduced when that member calls in, which every member does in the same
 * order (SPMD), so a rank waiting on one request is never waiting on a
 * member that waits for it.  A buffer must not be touched between the
 * start and the completed test or the wait.
 *
 * Waiting spins for a few milliseconds (taprt_comm_spin_ns: only when the
 * ranks and their intra-op threads fit on the online CPUs) and then blocks
 * on a condition variable, so oversubscribed runs (8 ranks on a 2-core CI
 * machine) do not burn the cores they need.  The environment variable
 * TAPRT_COMM_SPIN=US sets the window in microseconds (0: always block).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "runtime/internal.h"

/* Error codes: negative errno values, so strerror(-rc) reads well. */
#define ERR_INVAL	(-EINVAL)	/* bad argument */
#define ERR_NOMEM	(-ENOMEM)
#define ERR_MISMATCH	(-EBADMSG)	/* members disagree: count, dtype, op, kind; recv size */
#define ERR_CANCELED	(-ECANCELED)	/* taprt_threads_abort was called */

taprt_comm *taprt_threads_world(int nranks);
taprt_comm *taprt_threads_rank(taprt_comm *world, int rank);
void taprt_threads_abort(taprt_comm *world);
void taprt_threads_free(taprt_comm *world);

enum { K_ALLREDUCE, K_ALLGATHER, K_REDUCE_SCATTER, K_BARRIER };

#define NASYNC 16                       /* started all-reduces in flight per group */

/* One member's arguments to the current collective on a group. */
typedef struct {
	const void *src;
	void *dst;
	int64_t count;
	int dtype, op, kind;
	char pad[64 - 2 * sizeof(void *) - sizeof(int64_t) - 3 * sizeof(int)];
} Pub;

/* One started all-reduce of a group (the ring entry of sequence epoch). */
typedef struct {
	_Alignas(64) atomic_uint epoch; /* the sequence it serves now */
	atomic_uint arrived;            /* members that published */
	atomic_uint reduced;            /* members that reduced their share */
	atomic_uint left;               /* members done with the entry */
	Pub *pub;                       /* size entries (src = the buffer) */
} Async;

typedef struct Slot Slot;
struct Slot {
	Slot *next;                     /* the world's table */
	int size;
	int *ranks;                     /* the key: global ranks, group order */
	_Alignas(64) atomic_uint arrived;
	_Alignas(64) atomic_uint gen;   /* barrier generation */
	atomic_int sleepers;            /* waiters blocked on cv */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	Pub *pub;                       /* size entries, one cache line each */
	Async *async;                   /* NASYNC entries */
	unsigned *aseq;                 /* per member: its started all-reduces so far */
};

/* A rank's started all-reduce (taprt_request of this backend). */
struct taprt_request {
	taprt_request *next;            /* the rank's started ones, in start order */
	Slot *s;
	int me;                         /* the rank's index in the group */
	unsigned seq;
	int state;                      /* R_ARRIVED, R_REDUCED, R_LEFT */
	int status;                     /* 0 or an error code */
};

enum { R_ARRIVED, R_REDUCED, R_LEFT };

typedef struct Msg Msg;
struct Msg {
	Msg *next;
	int src, tag;
	int64_t bytes, cap;
	unsigned char *data;            /* follows the struct */
};

/* What a rank blocked in recv is waiting for. */
typedef struct {
	bool active;
	bool claimed;                   /* a sender is delivering: wait for it */
	bool done;                      /* copied into buf, status set */
	int src, tag, status;
	void *buf;
	int64_t bytes;
	Msg *msg;                       /* or: handed over as a queued copy */
} Posted;

/* One per destination rank. */
typedef struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	Msg *head, **tail;              /* queued messages, in arrival order */
	Msg *spare;                     /* a consumed message kept for reuse */
	Posted post;
	char pad[64];
} Mailbox;

typedef struct World World;

#define NCACHE 8
struct taprt_comm {
	World *w;
	int rank;                       /* -1: the world handle */
	int ncache, next;               /* groups this rank used recently */
	Slot *cache[NCACHE];
	int cache_me[NCACHE];           /* this rank's index in the group */
	taprt_request *started;         /* not yet left, in start order */
};

struct World {
	taprt_comm self;                /* the world handle */
	int nranks;
	int64_t spin_ns;                /* spinning before blocking */
	atomic_bool aborted;
	pthread_mutex_t mu;             /* the slot table */
	Slot *slots;
	Mailbox *box;                   /* nranks */
	taprt_comm *rank;               /* nranks handles */
};

static inline void
cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* memmove that accepts NULL with 0 bytes (empty messages, count 0) */
static inline void
copy(void *dst, const void *src, int64_t bytes)
{
	if (bytes > 0)
		memmove(dst, src, bytes);
}

/* ------------------------------------------------------------ the world */

taprt_comm *
taprt_threads_world(int nranks)
{
	if (nranks < 1)
		return NULL;
	World *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	w->box = calloc(nranks, sizeof *w->box);
	w->rank = calloc(nranks, sizeof *w->rank);
	if (!w->box || !w->rank) {
		free(w->box);
		free(w->rank);
		free(w);
		return NULL;
	}
	w->self.w = w;
	w->self.rank = -1;
	w->nranks = nranks;
	w->spin_ns = taprt_comm_spin_ns(nranks, 1); /* threads_init counts their teams */
	atomic_init(&w->aborted, false);
	pthread_mutex_init(&w->mu, NULL);
	for (int r = 0; r < nranks; r++) {
		w->rank[r].w = w;
		w->rank[r].rank = r;
		pthread_mutex_init(&w->box[r].mu, NULL);
		pthread_cond_init(&w->box[r].cv, NULL);
		w->box[r].tail = &w->box[r].head;
	}
	return &w->self;
}

taprt_comm *
taprt_threads_rank(taprt_comm *world, int rank)
{
	if (!world || rank < 0 || rank >= world->w->nranks)
		return NULL;
	return &world->w->rank[rank];
}

void
taprt_threads_abort(taprt_comm *world)
{
	if (!world)
		return;
	World *w = world->w;
	atomic_store(&w->aborted, true);
	/* lock each mutex so no waiter is between its check and its wait */
	pthread_mutex_lock(&w->mu);
	for (Slot *s = w->slots; s; s = s->next) {
		pthread_mutex_lock(&s->mu);
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
	}
	pthread_mutex_unlock(&w->mu);
	for (int r = 0; r < w->nranks; r++) {
		pthread_mutex_lock(&w->box[r].mu);
		pthread_cond_broadcast(&w->box[r].cv);
		pthread_mutex_unlock(&w->box[r].mu);
	}
}

static void
free_msgs(Msg *m)
{
	while (m) {
		Msg *next = m->next;
		free(m);
		m = next;
	}
}

void
taprt_threads_free(taprt_comm *world)
{
	if (!world)
		return;
	World *w = world->w;
	for (Slot *s = w->slots, *next; s; s = next) {
		next = s->next;
		pthread_mutex_destroy(&s->mu);
		pthread_cond_destroy(&s->cv);
		for (int i = 0; i < NASYNC; i++)
			free(s->async[i].pub);
		free(s->async);
		free(s->aseq);
		free(s->pub);
		free(s->ranks);
		free(s);
	}
	for (int r = 0; r < w->nranks; r++) {
		free_msgs(w->box[r].head);
		free(w->box[r].spare);
		pthread_mutex_destroy(&w->box[r].mu);
		pthread_cond_destroy(&w->box[r].cv);
	}
	pthread_mutex_destroy(&w->mu);
	free(w->box);
	free(w->rank);
	free(w);
}

/* ---------------------------------------------------------------- groups */

static bool
same_group(const Slot *s, const taprt_group *g)
{
	return s->size == g->size && memcmp(s->ranks, g->ranks, g->size * sizeof(int)) == 0;
}

static Slot *
new_slot(const taprt_group *g)
{
	/* aligned: the barrier's counters sit on their own cache lines */
	Slot *s = aligned_alloc(64, sizeof *s);
	if (!s)
		return NULL;
	memset(s, 0, sizeof *s);
	s->ranks = malloc(g->size * sizeof(int));
	s->pub = aligned_alloc(64, g->size * sizeof(Pub));
	s->async = aligned_alloc(64, NASYNC * sizeof *s->async);
	s->aseq = calloc(g->size, sizeof *s->aseq);
	bool ok = s->ranks && s->pub && s->async && s->aseq;
	if (s->async)
		memset(s->async, 0, NASYNC * sizeof *s->async);
	for (int i = 0; ok && i < NASYNC; i++) {
		Async *a = &s->async[i];
		atomic_init(&a->epoch, i);
		atomic_init(&a->arrived, 0);
		atomic_init(&a->reduced, 0);
		atomic_init(&a->left, 0);
		ok = (a->pub = aligned_alloc(64, g->size * sizeof(Pub))) != NULL;
	}
	if (!ok) {
		for (int i = 0; s->async && i < NASYNC; i++)
			free(s->async[i].pub);
		free(s->async);
		free(s->aseq);
		free(s->ranks);
		free(s->pub);
		free(s);
		return NULL;
	}
	memcpy(s->ranks, g->ranks, g->size * sizeof(int));
	s->size = g->size;
	atomic_init(&s->arrived, 0);
	atomic_init(&s->gen, 0);
	atomic_init(&s->sleepers, 0);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	return s;
}

/*
 * The slot for g and the caller's index in it, or an error code: the group
 * must be 1..nranks distinct valid ranks including the caller's.
 */
static int
group_slot(taprt_comm *c, const taprt_group *g, Slot **out, int *me)
{
	if (!c || c->rank < 0 || !g || g->size < 1 || !g->ranks)
		return ERR_INVAL;
	for (int i = 0; i < c->ncache; i++)
		if (same_group(c->cache[i], g)) {
			*out = c->cache[i];
			*me = c->cache_me[i];
			return 0;
		}
	World *w = c->w;
	if (g->size > w->nranks)
		return ERR_INVAL;
	int idx = -1;
	for (int i = 0; i < g->size; i++) {
		if (g->ranks[i] < 0 || g->ranks[i] >= w->nranks)
			return ERR_INVAL;
		for (int j = 0; j < i; j++)
			if (g->ranks[j] == g->ranks[i])
				return ERR_INVAL;
		if (g->ranks[i] == c->rank)
			idx = i;
	}
	if (idx < 0)
		return ERR_INVAL;
	pthread_mutex_lock(&w->mu);
	Slot *s = w->slots;
	while (s && !same_group(s, g))
		s = s->next;
	if (!s && (s = new_slot(g))) {
		s->next = w->slots;
		w->slots = s;
	}
	pthread_mutex_unlock(&w->mu);
	if (!s)
		return ERR_NOMEM;
	int k = c->ncache < NCACHE ? c->ncache++ : c->next++ % NCACHE;
	c->cache[k] = s;
	c->cache_me[k] = idx;
	*out = s;
	*me = idx;
	return 0;
}

/*
 * Wait until every member of s has arrived.  The arrival is one atomic
 * add; the last one bumps the generation and wakes the sleepers.  sleepers
 * and gen are sequentially consistent so that either the last arriver sees
 * a sleeper or the sleeper sees the new generation (no lost wake-up).
 */
static int
barrier(World *w, Slot *s)
{
	if (s->size == 1)
		return atomic_load(&w->aborted) ? ERR_CANCELED : 0;
	unsigned g = atomic_load_explicit(&s->gen, memory_order_acquire);
	if (atomic_fetch_add_explicit(&s->arrived, 1, memory_order_acq_rel) == (unsigned)s->size - 1) {
		atomic_store_explicit(&s->arrived, 0, memory_order_relaxed);
		atomic_store(&s->gen, g + 1);
		if (atomic_load(&s->sleepers) > 0) {
			pthread_mutex_lock(&s->mu);
			pthread_cond_broadcast(&s->cv);
			pthread_mutex_unlock(&s->mu);
		}
		return atomic_load(&w->aborted) ? ERR_CANCELED : 0;
	}
	for (int64_t end = taprt_now_ns() + w->spin_ns; w->spin_ns > 0;) {
		for (int i = 0; i < 64; i++) {
			if (atomic_load_explicit(&s->gen, memory_order_acquire) != g)
				return atomic_load(&w->aborted) ? ERR_CANCELED : 0;
			cpu_relax();
		}
		if (taprt_now_ns() >= end)
			break;
	}
	pthread_mutex_lock(&s->mu);
	atomic_fetch_add(&s->sleepers, 1);
	while (atomic_load(&s->gen) == g && !atomic_load(&w->aborted))
		pthread_cond_wait(&s->cv, &s->mu);
	atomic_fetch_sub(&s->sleepers, 1);
	pthread_mutex_unlock(&s->mu);
	return atomic_load(&w->aborted) ? ERR_CANCELED : 0;
}

/*
 * dst[0..n) = src[0][off..] op src[1][off..] op ... in group order, through
 * a cache-sized block so dst may be one of the sources.
 */
static void
reduce_into(taprt_reducer *red, int esz, const Pub *pub, int size, int64_t off, int64_t n,
    void *const *dsts, int ndst)
{
	_Alignas(64) unsigned char tmp[8192];
	int64_t blk = sizeof tmp / esz;
	for (int64_t k = 0; k < n; k += blk) {
		int64_t m = n - k < blk ? n - k : blk;
		int64_t at = (off + k) * esz;
		memcpy(tmp, (const char *)pub[0].src + at, m * esz);
		for (int r = 1; r < size; r++)
			red(tmp, (const char *)pub[r].src + at, m);
		for (int d = 0; d < ndst; d++)
			memcpy((char *)dsts[d] + k * esz, tmp, m * esz);
	}
}

/* ----------------------------------------------------------- collectives */

/*
 * Check the arguments, find the group, publish, wait for everyone.  On
 * success *sp and *mep are set and the caller must end with barrier().
 */
static int
enter(taprt_comm *c, const taprt_group *g, int kind, const void *src, void *dst,
    int64_t count, int dtype, int op, Slot **sp, int *mep)
{
	if (count < 0 || (kind != K_BARRIER && count > 0 && (!src || !dst)))
		return ERR_INVAL;
	if (kind == K_ALLREDUCE || kind == K_REDUCE_SCATTER) {
		if (!taprt_reducer_for(dtype, op))
			return ERR_INVAL;
	} else if (kind == K_ALLGATHER) {
		if (taprt_dtype_size(dtype) == 0)
			return ERR_INVAL;
	}
	int rc = group_slot(c, g, sp, mep);
	if (rc)
		return rc;
	if (atomic_load(&c->w->aborted))
		return ERR_CANCELED;
	Slot *s = *sp;
	Pub *p = &s->pub[*mep];
	p->src = src;
	p->dst = dst;
	p->count = count;
	p->dtype = dtype;
	p->op = op;
	p->kind = kind;
	if ((rc = barrier(c->w, s)))
		return rc;
	/* every member compares all entries, so all of them agree on failing */
	for (int i = 0; i < s->size; i++) {
		const Pub *q = &s->pub[i];
		if (q->count != count || q->dtype != dtype || q->op != op || q->kind != kind) {
			barrier(c->w, s);
			return ERR_MISMATCH;
		}
	}
	return 0;
}

/* Member me's share of count elements split size ways, 64-byte aligned. */
static void
share(int64_t count, int esz, int size, int me, int64_t *off, int64_t *n)
{
	int64_t line = 64 / esz;
	int64_t per = (count + size - 1) / size;
	per = (per + line - 1) / line * line;
	int64_t lo = per * me, hi = lo + per;
	lo = lo < count ? lo : count;
	hi = hi < count ? hi : count;
	*off = lo;
	*n = hi - lo;
}

/* An all-reduce's work for member me of size published buffers: its share
 * of count elements reduced in group order into every member's dst. */
static void
reduce_share(const Pub *pub, int size, int me, int64_t count, int dtype, int op)
{
	int esz = taprt_dtype_size(dtype);
	int64_t off, n;
	share(count, esz, size, me, &off, &n);
	if (n > 0) {
		void *dsts[size];
		for (int r = 0; r < size; r++)
			dsts[r] = (char *)pub[r].dst + off * esz;
		reduce_into(taprt_reducer_for(dtype, op), esz, pub, size, off, n, dsts, size);
	}
}

static int
threads_allreduce(taprt_comm *c, const taprt_group *g, void *buf, int64_t count,
    int dtype, int op)
{
	Slot *s;
	int me;
	int rc = enter(c, g, K_ALLREDUCE, buf, buf, count, dtype, op, &s, &me);
	if (rc || s->size == 1)
		return rc;
	reduce_share(s->pub, s->size, me, count, dtype, op);
	return barrier(c->w, s);
}

static int
threads_allgather(taprt_comm *c, const taprt_group *g, const void *send, void *recv,
    int64_t count, int dtype)
{
	Slot *s;
	int me;
	int rc = enter(c, g, K_ALLGATHER, send, recv, count, dtype, 0, &s, &me);
	if (rc)
		return rc;
	size_t bytes = (size_t)count * taprt_dtype_size(dtype);
	for (int r = 0; r < s->size; r++)
		/* a move: recv's own block may be send (in place) */
		copy((char *)recv + r * bytes, s->pub[r].src, bytes);
	return barrier(c->w, s);
}

static int
threads_reduce_scatter(taprt_comm *c, const taprt_group *g, const void *send, void *recv,
    int64_t count, int dtype, int op)
{
	Slot *s;
	int me;
	int rc = enter(c, g, K_REDUCE_SCATTER, send, recv, count, dtype, op, &s, &me);
	if (rc)
		return rc;
	reduce_into(taprt_reducer_for(dtype, op), taprt_dtype_size(dtype), s->pub, s->size,
	    (int64_t)me * count, count, &recv, 1);
	return barrier(c->w, s);
}

static int
threads_barrier(taprt_comm *c, const taprt_group *g)
{
	Slot *s;
	int me;
	int rc = enter(c, g, K_BARRIER, NULL, NULL, 0, 0, 0, &s, &me);
	return rc ? rc : barrier(c->w, s);
}

/* ------------------------------------------------- started all-reduces */

/* Wake the members of s blocked in wait_for (sequentially consistent with
 * their sleepers count, as in barrier). */
static void
wake(Slot *s)
{
	if (atomic_load(&s->sleepers) > 0) {
		pthread_mutex_lock(&s->mu);
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
	}
}

/* Move request q on as far as the other members let it, without waiting. */
static void
advance(taprt_request *q)
{
	Slot *s = q->s;
	Async *a = &s->async[q->seq % NASYNC];
	unsigned n = (unsigned)s->size;
	if (q->state == R_ARRIVED && atomic_load(&a->arrived) == n) {
		const Pub *me = &a->pub[q->me];
		for (int i = 0; i < s->size && !q->status; i++) /* all members agree */
			if (a->pub[i].count != me->count || a->pub[i].dtype != me->dtype ||
			    a->pub[i].op != me->op)
				q->status = ERR_MISMATCH;
		if (!q->status)
			reduce_share(a->pub, s->size, q->me, me->count, me->dtype, me->op);
		q->state = R_REDUCED;
		if (atomic_fetch_add(&a->reduced, 1) == n - 1)
			wake(s);
	}
	if (q->state == R_REDUCED && atomic_load(&a->reduced) == n) {
		q->state = R_LEFT;
		if (atomic_fetch_add(&a->left, 1) == n - 1) { /* the last: free the entry */
			atomic_store(&a->arrived, 0);
			atomic_store(&a->reduced, 0);
			atomic_store(&a->left, 0);
			atomic_store(&a->epoch, q->seq + NASYNC);
			wake(s);
		}
	}
}

/* Would advance(q) move q on now? */
static bool
ready(const taprt_request *q)
{
	const Async *a = &q->s->async[q->seq % NASYNC];
	unsigned n = (unsigned)q->s->size;
	return q->state == R_ARRIVED ? atomic_load(&a->arrived) == n :
	    q->state == R_REDUCED && atomic_load(&a->reduced) == n;
}

/* Advance every request rank c started, and drop those that left. */
static void
advance_all(taprt_comm *c)
{
	for (taprt_request **pp = &c->started; *pp;) {
		taprt_request *q = *pp;
		advance(q);
		if (q->state == R_LEFT)
			*pp = q->next, q->next = NULL;
		else
			pp = &q->next;
	}
}

/*
 * Wait until done(s, arg) holds, advancing the rank's started requests
 * meanwhile (another member may be waiting for this one's share): spin,
 * then sleep on the slot's condition variable.  What makes done true or
 * lets a request advance is a counter or epoch change that its maker
 * follows with wake(); the sleeper re-checks both under the mutex after
 * counting itself a sleeper, so a change on slot s is never missed, and a
 * short timed sleep covers requests on other groups' slots.
 */
static int
wait_for(taprt_comm *c, Slot *s, bool (*done)(Slot *, const void *), const void *arg)
{
	World *w = c->w;
	const int64_t end = w->spin_ns > 0 ? taprt_now_ns() + w->spin_ns : 0;
	for (int i = 0;; i++) {
		advance_all(c);
		if (done(s, arg))
			return 0;
		if (atomic_load(&w->aborted))
			return ERR_CANCELED;
		/* the clock every 64 polls */
		if (w->spin_ns > 0 && ((i & 63) || taprt_now_ns() < end)) {
			cpu_relax();
			continue;
		}
		pthread_mutex_lock(&s->mu);
		atomic_fetch_add(&s->sleepers, 1);
		bool go = done(s, arg) || atomic_load(&w->aborted);
		for (const taprt_request *q = c->started; q && !go; q = q->next)
			go = ready(q);
		if (!go) {
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_nsec += 200000; /* 0.2 ms: requests on other groups */
			if (until.tv_nsec >= 1000000000)
				until.tv_sec++, until.tv_nsec -= 1000000000;
			pthread_cond_timedwait(&s->cv, &s->mu, &until);
		}
		atomic_fetch_sub(&s->sleepers, 1);
		pthread_mutex_unlock(&s->mu);
	}
}

static bool
entry_free(Slot *s, const void *arg)
{
	unsigned seq = *(const unsigned *)arg;
	return atomic_load(&s->async[seq % NASYNC].epoch) == seq;
}

static bool
request_left(Slot *s, const void *arg)
{
	(void)s;
	return ((const taprt_request *)arg)->state == R_LEFT;
}

static int
threads_iallreduce(taprt_comm *c, const taprt_group *g, void *buf, int64_t count, int dtype,
    int op, taprt_request **req)
{
	if (!req || count < 0 || (count > 0 && !buf) || !taprt_reducer_for(dtype, op))
		return ERR_INVAL;
	Slot *s;
	int me;
	int rc = group_slot(c, g, &s, &me);
	if (rc)
		return rc;
	if (atomic_load(&c->w->aborted))
		return ERR_CANCELED;
	taprt_request *q = calloc(1, sizeof *q);
	if (!q)
		return ERR_NOMEM;
	*q = (taprt_request){.s = s, .me = me, .seq = s->aseq[me]++, .state = R_ARRIVED};
	if ((rc = wait_for(c, s, entry_free, &q->seq))) {
		free(q);
		return rc;
	}
	Async *a = &s->async[q->seq % NASYNC];
	a->pub[me] = (Pub){.src = buf, .dst = buf, .count = count, .dtype = dtype, .op = op,
		.kind = K_ALLREDUCE};
	taprt_request **pp = &c->started;
	while (*pp)
		pp = &(*pp)->next;
	*pp = q;
	if (atomic_fetch_add(&a->arrived, 1) == (unsigned)s->size - 1)
		wake(s);
	advance(q);
	*req = q;
	return 0;
}

static int
threads_test(taprt_comm *c, taprt_request *req, int *done)
{
	if (!c || c->rank < 0 || !req || !done)
		return ERR_INVAL;
	advance_all(c);
	*done = req->state == R_LEFT;
	return *done ? req->status : atomic_load(&c->w->aborted) ? ERR_CANCELED : 0;
}

static int
threads_wait(taprt_comm *c, taprt_request *req)
{
	if (!c || c->rank < 0 || !req)
		return ERR_INVAL;
	int rc = wait_for(c, req->s, request_left, req);
	if (rc == 0)
		rc = req->status;
	if (req->state != R_LEFT) /* aborted: unlink it */
		for (taprt_request **pp = &c->started; *pp; pp = &(*pp)->next)
			if (*pp == req) {
				*pp = req->next;
				break;
			}
	free(req);
	return rc;
}

/* -------------------------------------------------------- point to point */

static int
threads_send(taprt_comm *c, const void *buf, int64_t bytes, int peer, int tag)
{
	if (!c || c->rank < 0 || bytes < 0 || (bytes > 0 && !buf) || peer < 0 ||
	    peer >= c->w->nranks)
		return ERR_INVAL;
	World *w = c->w;
	if (atomic_load(&w->aborted))
		return ERR_CANCELED;
	Mailbox *mb = &w->box[peer];
	pthread_mutex_lock(&mb->mu);
	Posted *p = &mb->post;
	if (p->active && !p->claimed && p->src == c->rank && p->tag == tag) {
		/* the receiver is waiting: copy straight into its buffer, outside
		 * the lock so other senders to this rank are not held up */
		p->claimed = true;
		pthread_mutex_unlock(&mb->mu);
		int st = 0;
		if (p->bytes == bytes)
			copy(p->buf, buf, bytes);
		else
			st = ERR_MISMATCH;
		pthread_mutex_lock(&mb->mu);
		p->status = st;
		p->done = true;
		pthread_cond_broadcast(&mb->cv);
		pthread_mutex_unlock(&mb->mu);
		return 0;
	}
	/* no buffer to copy into: queue a copy */
	Msg *m = mb->spare;
	if (m && m->cap >= bytes)
		mb->spare = NULL;
	else
		m = NULL;
	pthread_mutex_unlock(&mb->mu);
	if (!m) {
		if (!(m = malloc(sizeof *m + bytes)))
			return ERR_NOMEM;
		m->cap = bytes;
		m->data = (unsigned char *)(m + 1);
	}
	m->next = NULL;
	m->src = c->rank;
	m->tag = tag;
	m->bytes = bytes;
	copy(m->data, buf, bytes);
	pthread_mutex_lock(&mb->mu);
	if (p->active && !p->claimed && p->src == c->rank && p->tag == tag) {
		/* it posted meanwhile (so nothing of ours is queued before this) */
		p->claimed = true;
		p->msg = m;
		pthread_cond_broadcast(&mb->cv);
	} else {
		*mb->tail = m;
		mb->tail = &m->next;
	}
	pthread_mutex_unlock(&mb->mu);
	return 0;
}

/* Unlink and return the first queued message from src with tag (mb->mu held). */
static Msg *
take(Mailbox *mb, int src, int tag)
{
	for (Msg **pp = &mb->head; *pp; pp = &(*pp)->next) {
		Msg *m = *pp;
		if (m->src == src && m->tag == tag) {
			*pp = m->next;
			if (!*pp)
				mb->tail = pp;
			return m;
		}
	}
	return NULL;
}

static int
threads_recv(taprt_comm *c, void *buf, int64_t bytes, int peer, int tag)
{
	if (!c || c->rank < 0 || bytes < 0 || (bytes > 0 && !buf) || peer < 0 ||
	    peer >= c->w->nranks)
		return ERR_INVAL;
	World *w = c->w;
	Mailbox *mb = &w->box[c->rank];
	Posted *p = &mb->post;
	int rc = 0;
	pthread_mutex_lock(&mb->mu);
	Msg *m = take(mb, peer, tag);
	if (!m) {
		*p = (Posted){.active = true, .src = peer, .tag = tag, .buf = buf, .bytes = bytes};
		/*
		 * While posted and unclaimed no matching message is queued (a
		 * matching send claims the post instead), so per-(source, tag)
		 * order holds.  A claimed post waits even after an abort: the
		 * sender is writing into buf.
		 */
		for (;;) {
			if (p->done) {
				rc = p->status;
				break;
			}
			if ((m = p->msg))
				break;
			if (!p->claimed && atomic_load(&w->aborted)) {
				rc = ERR_CANCELED;
				break;
			}
			pthread_cond_wait(&mb->cv, &mb->mu);
		}
		p->active = false;
	}
	pthread_mutex_unlock(&mb->mu);
	if (!m)
		return rc;
	if (m->bytes == bytes)
		copy(buf, m->data, bytes);
	else
		rc = ERR_MISMATCH;
	pthread_mutex_lock(&mb->mu);
	/* keep the larger buffer for the next sender to this rank */
	if (!mb->spare || mb->spare->cap < m->cap) {
		Msg *old = mb->spare;
		mb->spare = m;
		m = old;
	}
	pthread_mutex_unlock(&mb->mu);
	free(m);
	return rc;
}

/* ------------------------------------------------------------ the table */

static int
threads_init(const taprt_layout *l, taprt_comm **world, int *first, int *count, char *err,
    size_t errlen)
{
	if (!(*world = taprt_threads_world(l->nranks))) {
		snprintf(err, errlen, "cannot set up %d rank threads: out of memory", l->nranks);
		return -1;
	}
	/* each rank's team is busy too */
	(*world)->w->spin_ns = taprt_comm_spin_ns(l->nranks, l->threads);
	*first = 0;
	*count = l->nranks;
	return 0;
}

static int
threads_finalize(taprt_comm *world)
{
	taprt_threads_free(world);
	return 0;
}

static const char *
threads_strerror(int rc)
{
	return rc < 0 ? strerror(-rc) : "error";
}

const taprt_backend taprt_threads_backend = {
	.name = "threads",
	.init = threads_init,
	.rank = taprt_threads_rank,
	.abort = taprt_threads_abort,
	.finalize = threads_finalize,
	.strerror = threads_strerror,
	.allreduce = threads_allreduce,
	.allgather = threads_allgather,
	.reduce_scatter = threads_reduce_scatter,
	.send = threads_send,
	.recv = threads_recv,
	.barrier = threads_barrier,
	.iallreduce = threads_iallreduce,
	.test = threads_test,
	.wait = threads_wait,
};
