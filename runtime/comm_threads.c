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
 * Waiting spins briefly (only when the ranks fit on the online CPUs) and
 * then blocks on a condition variable, so oversubscribed runs (8 ranks on
 * a 2-core CI machine) do not burn the cores they need.  The environment
 * variable TAPRT_COMM_SPIN overrides the spin count (0: always block).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
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

/* One member's arguments to the current collective on a group. */
typedef struct {
	const void *src;
	void *dst;
	int64_t count;
	int dtype, op, kind;
	char pad[64 - 2 * sizeof(void *) - sizeof(int64_t) - 3 * sizeof(int)];
} Pub;

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
};

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
};

struct World {
	taprt_comm self;                /* the world handle */
	int nranks;
	int spin;                       /* iterations before blocking */
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
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	/* spinning only pays when every rank has a core to itself; 2000
	 * pauses are some 50-100 us, longer than a futex wake-up */
	const char *env = getenv("TAPRT_COMM_SPIN");
	w->spin = env ? atoi(env) : ncpu >= nranks ? 2000 : 0;
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
	if (!s->ranks || !s->pub) {
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
	for (int i = w->spin; i > 0; i--) {
		if (atomic_load_explicit(&s->gen, memory_order_acquire) != g)
			return atomic_load(&w->aborted) ? ERR_CANCELED : 0;
		cpu_relax();
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

static int
threads_allreduce(taprt_comm *c, const taprt_group *g, void *buf, int64_t count,
    int dtype, int op)
{
	Slot *s;
	int me;
	int rc = enter(c, g, K_ALLREDUCE, buf, buf, count, dtype, op, &s, &me);
	if (rc || s->size == 1)
		return rc;
	int esz = taprt_dtype_size(dtype);
	int64_t off, n;
	share(count, esz, s->size, me, &off, &n);
	if (n > 0) {
		void *dsts[s->size];
		for (int r = 0; r < s->size; r++)
			dsts[r] = (char *)s->pub[r].dst + off * esz;
		reduce_into(taprt_reducer_for(dtype, op), esz, s->pub, s->size, off, n, dsts, s->size);
	}
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
};
