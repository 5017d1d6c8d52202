/*
 * conv_dnnl.c - 2-D f32 convolutions on oneDNN, behind the runtime's Conv
 * (k_nn.c's conv_f32 asks here first for the GEMM-sized ones).
 *
 * Needs: oneDNN 2.x (Debian's libdnnl-dev) when configure found it
 * (HAVE_DNNL); without it taprt_conv_dnnl declines and the caller uses
 * im2col + GEMM.  Why oneDNN: its AVX-512 "brgconv" kernels run ResNet-18's
 * convolutions in 12.4 ms on one thread where im2col + OpenBLAS takes about
 * 19 (docs/runtime.md, "Convolutions"); they want channels-last (NHWC)
 * activations, and tapc's tensors are NCHW, so each call transposes its
 * input into a scratch buffer (oneDNN's reorder) and its output back: a
 * channel-blocked result (nChw8c, AVX2's; nChw16c, AVX-512's Winograd;
 * NHWC, its brgconv) with the residual and the activation in the same pass
 * (dst_out), any other through oneDNN's reorder and then the epilogue (the
 * bias is oneDNN's).
 *
 * A node's primitive and its reordered weights are made on the node's
 * first run and kept (keyed by the node, which belongs to one rank, so one
 * thread), like onnxruntime's pre-packed weights -- so only a W that is a
 * weight or a constant (taprt_node.fixed) comes here, never one computed
 * by the graph, whose values change between calls; a training program
 * (cx->step > 0) reorders them again on every call, after the optimizer
 * changed them in place.  oneDNN's OpenMP threads
 * follow taprt_conv_threads (--threads).
 *
 * Where the rank's team splits a layer's planes by pixels
 * (taprt_split_pixels: one image, at least 1024 output pixels a thread),
 * each thread runs primitives of its own over its half of the output rows
 * (bands_make, bands_run): its input rows into oneDNN's layout, the
 * convolution and the result back with the epilogue, all on the rows its
 * own core wrote in the layer before and in its own scratch, where the
 * whole primitive split each of the three passes its own way and half of
 * every tensor crossed between the cores (docs/runtime.md, "Threads and
 * CPU features").  A thread's rows are one band or, where their result
 * is over BAND_BYTES, several, one after another, so that each band's
 * result is still in L2 for its way back to NCHW; one thread takes such
 * bands too (band_count).  TAPRT_NO_BANDS=1 keeps the whole primitive.
 *
 * The int8 products of k_quant.c come here too (taprt_qmatmul_dnnl): an
 * a [M,K] (u8 or s8) @ b [K,N] (s8, a weight) into s32 on oneDNN's int8
 * matmul, b reordered into its layout once and kept with its column sums.
 * Only on oneDNN's VNNI and AMX kernels (its implementation name says):
 * vpdpbusd and tdpbusd sum u8 x s8 products into 32 bits exactly; the
 * kernels without them pass the products through 16-bit sums that saturate
 * (u8 x s8) or halve the weights (s8 x s8), and the spec's sums are exact.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "config.h"
#include "runtime/internal.h"
#include "runtime/vec8.h"

static int conv_threads = 1;

void
taprt_conv_threads(int n)
{
	conv_threads = n > 0 ? n : 1;
}

#ifdef HAVE_DNNL
#include <dnnl.h>

/*
 * One thread's band of output rows, for a team that splits a layer by
 * pixels (taprt_split_pixels): its own primitive over the input rows the
 * band reads (the image's pads where the band reaches its edges, none
 * inside), with the node's reordered weights or its own, and its source,
 * result and scratchpad in the thread's own scratch.
 */
typedef struct Band {
	int64_t oh0, oh1;               /* its output rows */
	int64_t ih0;                    /* the first input row it reads */
	dnnl_primitive_t prim, rsrc;    /* the convolution; the NCHW rows -> its layout */
	dnnl_memory_t usrc, src, dst;   /* handles set per call */
	dnnl_memory_t scr;              /* its scratchpad (likewise) */
	dnnl_memory_t wei;              /* the node's reordered weights, or its own */
	dnnl_primitive_t rwei;          /* OIHW -> its own weights; NULL: a copy */
	bool own;                       /* wei is its own */
	size_t src_bytes, dst_bytes, scr_bytes;
	int dcb;                        /* as Prim's; never 0 */
} Band;

typedef struct Prim {
	const void *key;                /* the node */
	const float *w, *b;             /* its weights and bias */
	taprt_conv2d c;                 /* its shape: a key only matches all three */
	bool declined;                  /* oneDNN has no kernel worth using */
	dnnl_primitive_t prim;          /* the convolution */
	dnnl_primitive_t rsrc, rdst;    /* NCHW -> its source layout, its result -> NCHW */
	dnnl_memory_t usrc, udst;       /* the NCHW tensors (handles set per call) */
	dnnl_memory_t src, dst;         /* in its layouts (scratch, set per call) */
	dnnl_memory_t wei, bias;
	dnnl_memory_t uwei;             /* the OIHW weights (the program's, in place) */
	dnnl_primitive_t rwei;          /* OIHW -> wei, or NULL: the same layout */
	size_t src_bytes, dst_bytes, wei_bytes;
	int dcb;                        /* its result's channels a block, for dst_out:
					 * 8 or 16 (nChw8c, nChw16c), M (NHWC);
					 * 0: another layout, oneDNN's reorder */
	int team;                       /* the team the bands were made for */
	int nband;                      /* how many (band_count); 0: not tried;
					 * -1: oneDNN declined them */
	Band *band;
	struct Prim *next;
} Prim;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static Prim *cache[256];
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t engine;
static pthread_key_t stream_key;
static void (*set_omp_threads)(int);

static void
stream_free(void *s)
{
	dnnl_stream_destroy(s);
}

static void
engine_init(void)
{
	if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
		engine = NULL;
	pthread_key_create(&stream_key, stream_free);
	/* libdnnl's OpenMP runtime, already loaded with it */
	set_omp_threads = (void (*)(int))dlsym(RTLD_DEFAULT, "omp_set_num_threads");
}

/* The calling thread's stream (ranks are threads; a team's threads). */
static dnnl_stream_t
thread_stream(void)
{
	dnnl_stream_t s = pthread_getspecific(stream_key);
	if (!s && engine && dnnl_stream_create(&s, engine, dnnl_stream_default_flags) == dnnl_success)
		pthread_setspecific(stream_key, s);
	return s;
}

/* The rank's stream, and its OpenMP threads. */
static dnnl_stream_t
stream(void)
{
	if (set_omp_threads)
		set_omp_threads(conv_threads);
	return thread_stream();
}

static size_t
hash(const void *k)
{
	uintptr_t v = (uintptr_t)k;
	return (size_t)((v >> 4) ^ (v >> 12)) & 255;
}

static void
prim_put(Prim *p)
{
	pthread_mutex_lock(&cache_lock);
	p->next = cache[hash(p->key)];
	cache[hash(p->key)] = p;
	pthread_mutex_unlock(&cache_lock);
}

/*
 * A reorder from a to b (NULL in *r: the same layout).  A weight's
 * (user_scratch) takes the caller's scratchpad: wreorder_run maps it for
 * the call and unmaps it after.  Why: a reorder into oneDNN's Winograd
 * layouts transforms the filters through a scratchpad the size of its
 * result, and oneDNN's own (scratchpad mode "library") is the primitive's
 * for its life: ResNet-18's kept reorders held 67 MB that its forwards
 * never touch (the program's peak RSS 226 -> 179 MB at one image,
 * measured).  The reorder itself is kept: a training program runs it
 * again after every step.
 */
static dnnl_status_t
reorder(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b, bool user_scratch,
    dnnl_primitive_t *r)
{
	*r = NULL;
	if (dnnl_memory_desc_equal(a, b))
		return dnnl_success;
	dnnl_primitive_attr_t attr = NULL;
	dnnl_status_t st = dnnl_success;
	if (user_scratch && ((st = dnnl_primitive_attr_create(&attr)) != dnnl_success ||
	    (st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user)) !=
	    dnnl_success))
		goto done;
	dnnl_primitive_desc_t pd;
	if ((st = dnnl_reorder_primitive_desc_create(&pd, a, engine, b, engine, attr)) ==
	    dnnl_success) {
		st = dnnl_primitive_create(r, pd);
		dnnl_primitive_desc_destroy(pd);
	}
done:
	if (attr)
		dnnl_primitive_attr_destroy(attr);
	return st;
}

/* Run weight reorder r (reorder's, user_scratch) from -> to on s, its scratchpad mapped
 * for the call; 0 when done. */
static int
wreorder_run(dnnl_primitive_t r, dnnl_memory_t from, dnnl_memory_t to, dnnl_stream_t s)
{
	const_dnnl_primitive_desc_t pd;
	const dnnl_memory_desc_t *md;
	if (dnnl_primitive_get_primitive_desc(r, &pd) ||
	    !(md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0)))
		return -1;
	size_t bytes = dnnl_memory_desc_get_size(md);
	void *buf = NULL;
	dnnl_memory_t scr = NULL;
	if (bytes && ((buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
	    -1, 0)) == MAP_FAILED || dnnl_memory_create(&scr, md, engine, buf))) {
		if (buf != MAP_FAILED)
			munmap(buf, bytes);
		return -1;
	}
	dnnl_exec_arg_t ra[3] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to},
		{DNNL_ARG_SCRATCHPAD, scr}};
	int rc = dnnl_primitive_execute(r, s, scr ? 3 : 2, ra) || dnnl_stream_wait(s) ? -1 : 0;
	if (scr) {
		dnnl_memory_destroy(scr);
		munmap(buf, bytes);
	}
	return rc;
}

#define CK(x) if ((x) != dnnl_success) goto fail

/*
 * The convolution's primitive desc: Winograd for 3x3 stride-1 undilated
 * filters where oneDNN has it (F(2,3) or F(4,3) on AVX-512: about 40% off
 * ResNet-18's convolution time), else its direct kernels; layouts its own
 * choice.  NULL unless the chosen kernel is a JIT one (a GEMM or reference
 * fallback is slower than the caller's own path).
 */
static dnnl_primitive_desc_t
conv_pd(const taprt_conv2d *c, bool bias, const_dnnl_primitive_attr_t attr)
{
	dnnl_dims_t sd = {c->N, c->C, c->H, c->W}, wd = {c->M, c->C, c->KH, c->KW}, bd = {c->M};
	dnnl_dims_t dd = {c->N, c->M, c->OH, c->OW}, st = {c->SH, c->SW}, dil = {c->DH - 1, c->DW - 1};
	/* the end pads the output size implies (ONNX may give more) */
	dnnl_dims_t pl = {c->PT, c->PL};
	dnnl_dims_t pr = {(c->OH - 1) * c->SH + (c->KH - 1) * c->DH + 1 - c->H - c->PT,
		(c->OW - 1) * c->SW + (c->KW - 1) * c->DW + 1 - c->W - c->PL};
	dnnl_memory_desc_t smd, wmd, bmd, dmd;
	if (pr[0] < 0 || pr[1] < 0 ||
	    dnnl_memory_desc_init_by_tag(&smd, 4, sd, dnnl_f32, dnnl_format_tag_any) ||
	    dnnl_memory_desc_init_by_tag(&wmd, 4, wd, dnnl_f32, dnnl_format_tag_any) ||
	    dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x) ||
	    dnnl_memory_desc_init_by_tag(&dmd, 4, dd, dnnl_f32, dnnl_format_tag_any))
		return NULL;
	bool wino = c->KH == 3 && c->KW == 3 && c->SH == 1 && c->SW == 1 && c->DH == 1 &&
	    c->DW == 1 && !getenv("TAPRT_NO_WINOGRAD");
	for (int k = wino ? 0 : 1; k < 2; k++) {
		dnnl_convolution_desc_t cd;
		dnnl_primitive_desc_t pd;
		if (dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference,
		    k ? dnnl_convolution_direct : dnnl_convolution_winograd, &smd, &wmd,
		    bias ? &bmd : NULL, &dmd, st, dil, pl, pr) != dnnl_success ||
		    dnnl_primitive_desc_create(&pd, &cd, attr, engine, NULL) != dnnl_success)
			continue;
		const char *impl = NULL;
		if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
		    impl && !strstr(impl, "gemm") && !strstr(impl, "ref"))
			return pd;
		dnnl_primitive_desc_destroy(pd);
	}
	return NULL;
}

/* The channels a block of a result of dims d in layout r, for dst_out: 8
 * or 16 (nChw8c, nChw16c), M (NHWC, whole 8-channel runs in every pixel);
 * 0 for any other layout. */
static int
dst_cb(const dnnl_memory_desc_t *r, const dnnl_dims_t d)
{
	static const dnnl_format_tag_t tags[3] = {dnnl_nChw8c, dnnl_nChw16c, dnnl_nhwc};
	for (int i = 0; i < 3; i++) {
		dnnl_memory_desc_t m;
		if (dnnl_memory_desc_init_by_tag(&m, 4, d, dnnl_f32, tags[i]) == dnnl_success &&
		    dnnl_memory_desc_equal(r, &m))
			return i == 0 ? 8 : i == 1 ? 16 : d[1] % 8 == 0 ? (int)d[1] : 0;
	}
	return 0;
}

/* Copy the weights w into the kernel's layout. */
static int
weights_in(Prim *p, const float *w, dnnl_stream_t s)
{
	if (p->rwei)
		return wreorder_run(p->rwei, p->uwei, p->wei, s);
	void *h;
	if (dnnl_memory_get_data_handle(p->wei, &h))
		return -1;
	memcpy(h, w, p->wei_bytes);
	return 0;
}

/* The primitive for node n (made on first use); NULL if oneDNN declines. */
static Prim *
prim_get(const taprt_node *n, const float *w, const float *b, const taprt_conv2d *c)
{
	pthread_mutex_lock(&cache_lock);
	Prim *p = cache[hash(n)];
	while (p && (p->key != n || p->w != w || p->b != b || memcmp(&p->c, c, sizeof *c) != 0))
		p = p->next;
	pthread_mutex_unlock(&cache_lock);
	if (p)
		return p->declined ? NULL : p;
	dnnl_stream_t s = stream();
	if (!s || !(p = calloc(1, sizeof *p)))
		return NULL;
	p->key = n;
	p->w = w;
	p->b = b;
	p->c = *c;
	dnnl_dims_t sd = {c->N, c->C, c->H, c->W}, wd = {c->M, c->C, c->KH, c->KW};
	dnnl_dims_t dd = {c->N, c->M, c->OH, c->OW}, bd = {c->M};
	dnnl_memory_desc_t usmd, udmd, uwmd, bmd;
	dnnl_primitive_t rw = NULL;
	dnnl_memory_t uw = NULL;
	dnnl_primitive_desc_t pd = conv_pd(c, b != NULL, NULL);
	if (!pd)
		goto fail;
	const dnnl_memory_desc_t *qs = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
	const dnnl_memory_desc_t *qw = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
	const dnnl_memory_desc_t *qd = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
	CK(dnnl_memory_desc_init_by_tag(&usmd, 4, sd, dnnl_f32, dnnl_nchw));
	CK(dnnl_memory_desc_init_by_tag(&udmd, 4, dd, dnnl_f32, dnnl_nchw));
	CK(dnnl_memory_desc_init_by_tag(&uwmd, 4, wd, dnnl_f32, dnnl_oihw));
	CK(dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x));
	CK(dnnl_primitive_create(&p->prim, pd));
	CK(reorder(&usmd, qs, false, &p->rsrc));
	CK(reorder(qd, &udmd, false, &p->rdst));
	p->dcb = p->rdst ? dst_cb(qd, dd) : 0; /* 0: the result lands in y as it is */
	CK(dnnl_memory_create(&p->usrc, &usmd, engine, DNNL_MEMORY_NONE));
	CK(dnnl_memory_create(&p->udst, &udmd, engine, DNNL_MEMORY_NONE));
	CK(dnnl_memory_create(&p->src, qs, engine, DNNL_MEMORY_NONE));
	CK(dnnl_memory_create(&p->dst, qd, engine, DNNL_MEMORY_NONE));
	p->src_bytes = (dnnl_memory_desc_get_size(qs) + 63) & ~(size_t)63;
	p->dst_bytes = (dnnl_memory_desc_get_size(qd) + 63) & ~(size_t)63;
	if (b)
		CK(dnnl_memory_create(&p->bias, &bmd, engine, (void *)b));
	/* the weights in the kernel's layout, made now (freed with the process);
	 * the reorder is kept: a training program's weights change every step */
	CK(dnnl_memory_create(&p->wei, qw, engine, DNNL_MEMORY_ALLOCATE));
	CK(dnnl_memory_create(&uw, &uwmd, engine, (void *)w));
	CK(reorder(&uwmd, qw, true, &rw));
	p->wei_bytes = dnnl_memory_desc_get_size(qw);
	p->uwei = uw;
	p->rwei = rw;
	uw = NULL;
	rw = NULL;
	if (weights_in(p, w, s) != 0)
		goto fail;
	dnnl_primitive_desc_destroy(pd);
	prim_put(p);
	return p;
fail:
	if (rw)
		dnnl_primitive_destroy(rw);
	if (uw)
		dnnl_memory_destroy(uw);
	if (pd)
		dnnl_primitive_desc_destroy(pd);
	dnnl_primitive_t prims[4] = {p->prim, p->rsrc, p->rdst, p->rwei};
	for (int i = 0; i < 4; i++)
		if (prims[i])
			dnnl_primitive_destroy(prims[i]);
	dnnl_memory_t mems[7] = {p->usrc, p->udst, p->src, p->dst, p->wei, p->bias, p->uwei};
	for (int i = 0; i < 7; i++)
		if (mems[i])
			dnnl_memory_destroy(mems[i]);
	Prim keep = {.key = n, .w = w, .b = b, .c = *c, .declined = true};
	*p = keep;                      /* remembered as declined */
	prim_put(p);
	return NULL;
}

/* The program's weights into band bd's own layout (a node's Winograd
 * weights depend on the tiles: a band has its own). */
static int
band_weights_in(Prim *p, Band *bd, dnnl_stream_t s)
{
	if (!bd->own)
		return 0;
	if (bd->rwei)
		return wreorder_run(bd->rwei, p->uwei, bd->wei, s);
	void *h;
	if (dnnl_memory_get_data_handle(bd->wei, &h))
		return -1;
	const taprt_conv2d *c = &p->c;
	memcpy(h, p->w, (size_t)(c->M * c->C * c->KH * c->KW) * sizeof(float)); /* OIHW */
	return 0;
}

/*
 * NB bands of output rows (band_count), equal to within a row: each its
 * own primitive over the input rows it reads (the image's
 * pads only at the image's edges), oneDNN's choice of kernel and layouts
 * for the band, with the node's reordered weights where the band's layout
 * is theirs and a copy in its own otherwise (oneDNN's Winograd weights
 * depend on the tiles; given the node's, it read them as its own: wrong
 * results).  Each band has its own scratchpad, in the running thread's
 * scratch, sized for the whole team (inside a parallel region oneDNN runs
 * a primitive on the calling thread alone, but some kernels index their
 * scratchpad by the thread's number in the team).  0 when made, -1 when
 * oneDNN declined one (the node keeps the whole primitive).
 */
static int
bands_make(Prim *p, int NB)
{
	const taprt_conv2d *c = &p->c;
	const dnnl_memory_desc_t *qw = NULL;
	if (dnnl_memory_get_memory_desc(p->wei, &qw) || !(p->band = calloc(NB, sizeof *p->band)))
		return -1;
	/* the scratchpad the caller's (the thread's scratch): oneDNN's own is
	 * one for the process, and the team's threads run at once */
	dnnl_primitive_attr_t attr;
	if (dnnl_primitive_attr_create(&attr)) {
		free(p->band);
		p->band = NULL;
		return -1;
	}
	int rc = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) ? -1 : 0;
	for (int t = 0; t < NB && rc == 0; t++) {
		Band *bd = &p->band[t];
		bd->oh0 = c->OH * t / NB;
		bd->oh1 = c->OH * (t + 1) / NB;
		/* the input rows the band's windows cover, pads included */
		int64_t r0 = bd->oh0 * c->SH - c->PT;
		int64_t r1 = (bd->oh1 - 1) * c->SH - c->PT + (c->KH - 1) * c->DH + 1;
		int64_t ih0 = r0 > 0 ? r0 : 0, ih1 = r1 < c->H ? r1 : c->H;
		bd->ih0 = ih0;
		taprt_conv2d bc = *c;
		bc.H = ih1 - ih0;
		bc.OH = bd->oh1 - bd->oh0;
		bc.PT = ih0 - r0;
		dnnl_primitive_desc_t pd = bd->oh1 > bd->oh0 && bc.H > 0 ?
		    conv_pd(&bc, p->bias != NULL, attr) : NULL;
		if (!pd) {
			rc = -1;
			break;
		}
		const dnnl_memory_desc_t *qbw = dnnl_primitive_desc_query_md(pd,
		    dnnl_query_weights_md, 0), *quw = NULL;
		bd->own = !dnnl_memory_desc_equal(qw, qbw);
		bd->wei = p->wei;
		if (bd->own && (dnnl_memory_get_memory_desc(p->uwei, &quw) ||
		    dnnl_memory_create(&bd->wei, qbw, engine, DNNL_MEMORY_ALLOCATE) ||
		    reorder(quw, qbw, true, &bd->rwei) || band_weights_in(p, bd, thread_stream()))) {
			if (bd->wei == p->wei)
				bd->wei = NULL;
			rc = -1;
		}
		const dnnl_memory_desc_t *qs = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
		const dnnl_memory_desc_t *qd = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
		const dnnl_memory_desc_t *qp = dnnl_primitive_desc_query_md(pd,
		    dnnl_query_scratchpad_md, 0);
		/* the band's rows of the NCHW input, in place: the image's strides */
		dnnl_dims_t sd = {c->N, c->C, bc.H, c->W}, dd = {c->N, c->M, bc.OH, c->OW};
		dnnl_dims_t ss = {c->C * c->H * c->W, c->H * c->W, c->W, 1};
		dnnl_memory_desc_t usmd;
		bd->dcb = dst_cb(qd, dd);
		if (rc || !bd->dcb || dnnl_memory_desc_init_by_strides(&usmd, 4, sd, dnnl_f32, ss) ||
		    dnnl_primitive_create(&bd->prim, pd) || reorder(&usmd, qs, false, &bd->rsrc) ||
		    !bd->rsrc || dnnl_memory_create(&bd->usrc, &usmd, engine, DNNL_MEMORY_NONE) ||
		    dnnl_memory_create(&bd->src, qs, engine, DNNL_MEMORY_NONE) ||
		    dnnl_memory_create(&bd->dst, qd, engine, DNNL_MEMORY_NONE) ||
		    dnnl_memory_create(&bd->scr, qp, engine, DNNL_MEMORY_NONE))
			rc = -1;
		bd->src_bytes = (dnnl_memory_desc_get_size(qs) + 63) & ~(size_t)63;
		bd->dst_bytes = (dnnl_memory_desc_get_size(qd) + 63) & ~(size_t)63;
		bd->scr_bytes = (dnnl_memory_desc_get_size(qp) + 63) & ~(size_t)63;
		dnnl_primitive_desc_destroy(pd);
	}
	dnnl_primitive_attr_destroy(attr);
	if (rc == 0)
		return 0;
	for (int t = 0; t < NB; t++) {
		Band *bd = &p->band[t];
		dnnl_primitive_t prims[3] = {bd->prim, bd->rsrc, bd->rwei};
		dnnl_memory_t mems[5] = {bd->usrc, bd->src, bd->dst, bd->scr,
			bd->own ? bd->wei : NULL};
		for (int i = 0; i < 3; i++)
			if (prims[i])
				dnnl_primitive_destroy(prims[i]);
		for (int i = 0; i < 5; i++)
			if (mems[i])
				dnnl_memory_destroy(mems[i]);
	}
	free(p->band);
	p->band = NULL;
	return -1;
}

#ifdef TAPRT_VEC8

/* r[i][j] -> r[j][i]: 8 pixels' 8 channels to 8 channels' 8 pixels */
static inline __attribute__((always_inline)) TAPRT_AVX2 void
tr8(v8 r[8])
{
	const v8i lo2 = {0, 8, 1, 9, 4, 12, 5, 13}, hi2 = {2, 10, 3, 11, 6, 14, 7, 15};
	const v8i lo4 = {0, 1, 8, 9, 4, 5, 12, 13}, hi4 = {2, 3, 10, 11, 6, 7, 14, 15};
	const v8i lo8 = {0, 1, 2, 3, 8, 9, 10, 11}, hi8 = {4, 5, 6, 7, 12, 13, 14, 15};
	v8 t[8], u[8];
	for (int i = 0; i < 8; i += 2) {
		t[i] = __builtin_shuffle(r[i], r[i + 1], lo2);
		t[i + 1] = __builtin_shuffle(r[i], r[i + 1], hi2);
	}
	for (int i = 0; i < 8; i += 4) {
		u[i] = __builtin_shuffle(t[i], t[i + 2], lo4);     /* channels 0, 4 */
		u[i + 1] = __builtin_shuffle(t[i], t[i + 2], hi4); /* 1, 5 */
		u[i + 2] = __builtin_shuffle(t[i + 1], t[i + 3], lo4); /* 2, 6 */
		u[i + 3] = __builtin_shuffle(t[i + 1], t[i + 3], hi4); /* 3, 7 */
	}
	for (int j = 0; j < 4; j++) {
		r[j] = __builtin_shuffle(u[j], u[j + 4], lo8);
		r[j + 4] = __builtin_shuffle(u[j], u[j + 4], hi8);
	}
}

/* Pixels per step of dst_block: a step's 8 channel runs (8 KiB) and the
 * lines of the result they came from (16 KiB with 16 channels a block)
 * stay in L1 for the epilogue and the next 8 channels of the block. */
#define DST_STEP 256

/*
 * Channels [m0, m1) of oneDNN's channel-blocked result d (cb channels a
 * block over dP pixels: nChw8c, nChw16c, or NHWC as one block of M; pixel
 * p's run of 8 channels at cb floats apart) into their NCHW planes at y
 * (ys floats apart; z likewise), P pixels: a step of pixels at a time,
 * and in each step every run of 8 channels through a register transpose,
 * then the residual and the activation over the step's rows while they
 * are in L1 -- the layout change and the epilogue in one pass over the
 * result, where oneDNN's reorder and then the epilogue took two.  The
 * steps are the outer loop: an NHWC pixel's M channels are M / 16 lines
 * that the runs of 8 share, and with the runs outside, each run went over
 * all of the result again (ResNet-18's 64-channel NHWC stem, 3.2 MB, on
 * one thread of a Xeon: 2.50 -> 2.37 ms for the node).
 */
static TAPRT_AVX2 void
dst_block(const float *d, int64_t cb, int64_t dP, float *y, const float *z, int64_t P,
    int64_t ys, int64_t m0, int64_t m1, const taprt_act *act, bool epi)
{
	for (int64_t p0 = 0; p0 < P; p0 += DST_STEP) {
		const int64_t p1 = P - p0 < DST_STEP ? P : p0 + DST_STEP;
		for (int64_t m = m0; m < m1; m += 8) {
			const float *dm = d + m / cb * cb * dP + m % cb;
			float *ym = y + m * ys;
			const int mr = m1 - m < 8 ? (int)(m1 - m) : 8;
			int64_t p = p0;
			for (; p + 8 <= p1; p += 8) {
				v8 r[8];
				for (int i = 0; i < 8; i++)
					r[i] = *(const v8u *)(dm + (p + i) * cb);
				tr8(r);
				for (int j = 0; j < mr; j++)
					*(v8u *)(ym + j * ys + p) = r[j];
			}
			for (; p < p1; p++)
				for (int j = 0; j < mr; j++)
					ym[j * ys + p] = dm[p * cb + j];
			if (epi)
				for (int j = 0; j < mr; j++)
					taprt_epilogue_f32(ym + j * ys + p0, p1 - p0, 0,
					    z ? z + (m + j) * ys + p0 : NULL, act);
		}
	}
}

#endif /* TAPRT_VEC8 */

/* The result d (cb channels a block: nChw8c, nChw16c, or NHWC as one
 * block of M) into NCHW y with the residual and activation, the team
 * splitting the runs of 8 channels, an equal share of them a thread
 * (whole channels a thread, as the other kernels split them); 0 when this
 * CPU has no AVX2. */
static int
dst_out(const float *d, int64_t cb, float *y, const float *z, const taprt_conv2d *c,
    const taprt_act *act)
{
#ifdef TAPRT_VEC8
	if (taprt_isa() < TAPRT_ISA_AVX2)
		return 0;
	const int64_t M = c->M, P = c->OH * c->OW, nb = (M + 7) / 8;
	const int64_t image = (M + cb - 1) / cb * cb * P; /* blocks padded to cb */
	const bool epi = z || act->kind != TAPRT_ACT_NONE;
	#pragma omp parallel if (TAPRT_PAR(c->N * M * P))
	{
		int id, nt = taprt_team(&id);
		const int64_t i0 = c->N * nb * id / nt, i1 = c->N * nb * (id + 1) / nt;
		for (int64_t b = i0 / nb; b < c->N && b * nb < i1; b++) {
			const int64_t g0 = i0 > b * nb ? i0 - b * nb : 0;
			const int64_t g1 = i1 < (b + 1) * nb ? i1 - b * nb : nb;
			const int64_t o = b * M * P;
			dst_block(d + b * image, cb, P, y + o, z ? z + o : NULL, P, P, g0 * 8,
			    g1 * 8 < M ? g1 * 8 : M, act, epi);
		}
	}
	return 1;
#else
	(void)d, (void)cb, (void)y, (void)z, (void)c, (void)act;
	return 0;
#endif
}

/*
 * The node on its bands (bands_make), each thread an equal share of them
 * in order, one after another: the band's input rows into its layout in
 * the thread's scratch, its convolution, and its result into its rows of
 * y's planes with the residual and activation -- every pass on the rows
 * the thread's own core wrote in the layer before (the other
 * split-by-pixels kernels cut the same halves), no barrier between the
 * passes, no scratch line the other core touched, and a band's result
 * still in L2 when it is written out.  0 when done, -1 when oneDNN failed.
 */
static int
bands_run(Prim *p, const float *x, float *y, const float *z, const taprt_act *act)
{
#ifdef TAPRT_VEC8
	const taprt_conv2d *c = &p->c;
	const int NB = p->nband, T = p->team;
	const int64_t OP = c->OH * c->OW;
	const bool epi = z || act->kind != TAPRT_ACT_NONE;
	int failed = 0;
	#pragma omp parallel num_threads(T) if (T > 1)
	{
		int id, nt = taprt_team(&id);
		dnnl_stream_t s = thread_stream();
		for (int t = NB * id / nt; t < NB * (id + 1) / nt; t++) {
			Band *bd = &p->band[t];
			char *buf = taprt_scratch((int64_t)(bd->src_bytes + bd->dst_bytes +
			    bd->scr_bytes));
			float *dst = buf ? (float *)(buf + bd->src_bytes) : NULL;
			dnnl_exec_arg_t rs[2] = {{DNNL_ARG_FROM, bd->usrc}, {DNNL_ARG_TO, bd->src}};
			dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, bd->src}, {DNNL_ARG_WEIGHTS, bd->wei},
				{DNNL_ARG_DST, bd->dst}, {DNNL_ARG_SCRATCHPAD, bd->scr},
				{DNNL_ARG_BIAS, p->bias}};
			if (!s || !buf ||
			    dnnl_memory_set_data_handle(bd->usrc, (void *)(x + bd->ih0 * c->W)) ||
			    dnnl_memory_set_data_handle(bd->src, buf) ||
			    dnnl_memory_set_data_handle(bd->dst, dst) ||
			    dnnl_memory_set_data_handle(bd->scr, (char *)dst + bd->dst_bytes) ||
			    dnnl_primitive_execute(bd->rsrc, s, 2, rs) ||
			    dnnl_primitive_execute(bd->prim, s, p->bias ? 5 : 4, args) ||
			    dnnl_stream_wait(s)) {
				#pragma omp atomic write
				failed = 1;
				continue;
			}
			const int64_t cb = bd->dcb, bP = (bd->oh1 - bd->oh0) * c->OW;
			const int64_t o = bd->oh0 * c->OW;
			dst_block(dst, cb, bP, y + o, z ? z + o : NULL, bP, OP, 0, c->M, act, epi);
		}
	}
	return failed ? -1 : 0;
#else
	(void)p, (void)x, (void)y, (void)z, (void)act;
	return -1;
#endif
}

/* The result bytes a band aims at: its result and the input rows it reads
 * stay in the core's L2 from the convolution to dst_block's transpose. */
#define BAND_BYTES ((int64_t)512 << 10)

/* How many bands of output rows to run a layer on for a team of T (a
 * multiple of T: each thread its share of them, in order), or 0 for the
 * whole primitive: one image, split by pixels where the team splits its
 * planes so (taprt_split_pixels), and then also by size, a band's result
 * about BAND_BYTES and at least 8 rows; on one thread only by size. */
static int
band_count(const taprt_conv2d *c, int T)
{
	if (c->N != 1 || (T > 1 && !taprt_split_pixels(c->OH * c->OW, T)))
		return 0;
	const int64_t bytes = c->M * c->OH * c->OW * (int64_t)sizeof(float);
	int64_t per = (bytes + T * BAND_BYTES - 1) / (T * BAND_BYTES);
	while (per > 1 && c->OH < 8 * T * per)
		per--;
	return T == 1 && per < 2 ? 0 : (int)(T * per);
}

int
taprt_conv_dnnl(taprt_ctx *cx, const taprt_node *n, const float *x, const float *w,
    const float *b, const float *z, float *y, const taprt_conv2d *c, const taprt_act *act)
{
	pthread_once(&engine_once, engine_init);
	/* the weights are kept reordered: only a weight's or a constant's */
	if (!engine || !(n->fixed & 2) || getenv("TAPRT_NO_DNNL"))
		return 0;
	Prim *p = prim_get(n, w, b, c);
	if (!p)
		return 0;
	/* a team splitting this layer by pixels: a band a thread */
	const int T = taprt_team_size(), NB = band_count(c, T);
	if (NB > 0 && taprt_isa() >= TAPRT_ISA_AVX2 && !getenv("TAPRT_NO_BANDS")) {
		if (p->nband == 0) {
			p->nband = bands_make(p, NB) == 0 ? NB : -1;
			p->team = T;
		}
		if (p->nband > 0 && p->team == T) {
			dnnl_stream_t s = stream();
			int bad = cx->step > 0 && weights_in(p, w, s) != 0;
			for (int t = 0; t < p->nband && cx->step > 0; t++)
				bad |= band_weights_in(p, &p->band[t], s) != 0;
			if (bad)
				return taprt_fail(cx, "node '%s': oneDNN's weight reorder failed",
				    n->name);
			if (bands_run(p, x, y, z, act) != 0)
				return taprt_fail(cx, "node '%s': oneDNN convolution failed", n->name);
			return 1;
		}
	}
	char *buf = taprt_scratch((int64_t)(p->src_bytes + p->dst_bytes) + 64);
	if (!buf)
		return taprt_fail(cx, "node '%s': out of memory for oneDNN's buffers", n->name);
	void *src = p->rsrc ? buf : (void *)x, *dst = p->rdst ? buf + p->src_bytes : (void *)y;
	dnnl_stream_t s = stream();
	/* training: the optimizer updated the weights in place since the last step */
	if (cx->step > 0 && weights_in(p, w, s) != 0)
		return taprt_fail(cx, "node '%s': oneDNN's weight reorder failed", n->name);
	if (dnnl_memory_set_data_handle(p->usrc, (void *)x) || dnnl_memory_set_data_handle(p->udst, y) ||
	    dnnl_memory_set_data_handle(p->src, src) || dnnl_memory_set_data_handle(p->dst, dst))
		return taprt_fail(cx, "node '%s': oneDNN refused the buffers", n->name);
	dnnl_exec_arg_t rs[2] = {{DNNL_ARG_FROM, p->usrc}, {DNNL_ARG_TO, p->src}};
	dnnl_exec_arg_t rd[2] = {{DNNL_ARG_FROM, p->dst}, {DNNL_ARG_TO, p->udst}};
	dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, p->src}, {DNNL_ARG_WEIGHTS, p->wei},
		{DNNL_ARG_DST, p->dst}, {DNNL_ARG_BIAS, p->bias}};
	if ((p->rsrc && dnnl_primitive_execute(p->rsrc, s, 2, rs)) ||
	    dnnl_primitive_execute(p->prim, s, p->bias ? 4 : 3, args) || dnnl_stream_wait(s))
		return taprt_fail(cx, "node '%s': oneDNN convolution failed", n->name);
	/* the result to NCHW and the epilogue in one pass, or in two */
	if (p->dcb && dst_out(dst, p->dcb, y, z, c, act))
		return 1;
	if (p->rdst && (dnnl_primitive_execute(p->rdst, s, 2, rd) || dnnl_stream_wait(s)))
		return taprt_fail(cx, "node '%s': oneDNN convolution failed", n->name);
	/* the residual and the activation, on the NCHW result */
	if (z || act->kind != TAPRT_ACT_NONE) {
		int64_t P = c->OH * c->OW, planes = c->N * c->M;
		#pragma omp parallel for if (TAPRT_PAR(planes * P)) schedule(static)
		for (int64_t i = 0; i < planes; i++)
			taprt_epilogue_f32(y + i * P, P, 0, z ? z + i * P : NULL, act);
	}
	return 1;
}

/* ------------------------------------------------ int8 products (k_quant.c) */

typedef struct QPrim {
	const void *key;                /* the node */
	int64_t M, N, K;
	int adt;                        /* a's dtype: a key only matches all of them */
	dnnl_primitive_t prim;
	dnnl_memory_t a, c, wei;        /* a and c set per call; wei the reordered b */
	int32_t *colsum;                /* b's column sums */
	struct QPrim *next;
} QPrim;

static QPrim *qcache[256];

/* The matmul for node n at this shape, b reordered (made on first use);
 * NULL if oneDNN declines. */
static QPrim *
qprim_get(const taprt_node *n, int64_t M, int64_t N, int64_t K, int adt, const int8_t *b)
{
	pthread_mutex_lock(&cache_lock);
	QPrim *p = qcache[hash(n)];
	while (p && (p->key != n || p->M != M || p->N != N || p->K != K || p->adt != adt))
		p = p->next;
	pthread_mutex_unlock(&cache_lock);
	if (p)
		return p->prim ? p : NULL;
	p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	*p = (QPrim){n, M, N, K, adt, NULL, NULL, NULL, NULL, NULL, NULL};
	dnnl_memory_desc_t amd, bmd, umd, cmd;
	dnnl_matmul_desc_t md;
	dnnl_primitive_desc_t pd = NULL;
	dnnl_primitive_t rb = NULL;
	dnnl_memory_t ub = NULL;
	const dnnl_memory_desc_t *wmd;
	dnnl_stream_t s = stream();
	CK(dnnl_memory_desc_init_by_tag(&amd, 2, (dnnl_dims_t){M, K},
	    adt == TAPRT_U8 ? dnnl_u8 : dnnl_s8, dnnl_ab));
	CK(dnnl_memory_desc_init_by_tag(&bmd, 2, (dnnl_dims_t){K, N}, dnnl_s8, dnnl_format_tag_any));
	CK(dnnl_memory_desc_init_by_tag(&umd, 2, (dnnl_dims_t){K, N}, dnnl_s8, dnnl_ab));
	CK(dnnl_memory_desc_init_by_tag(&cmd, 2, (dnnl_dims_t){M, N}, dnnl_s32, dnnl_ab));
	CK(dnnl_matmul_desc_init(&md, &amd, &bmd, NULL, &cmd));
	CK(dnnl_primitive_desc_create(&pd, &md, NULL, engine, NULL));
	const char *impl = NULL;
	/* only kernels that sum int8 products exactly in 32 bits (above) */
	if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success ||
	    !impl || (!strstr(impl, "vnni") && !strstr(impl, "amx")))
		goto fail;
	wmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
	if (!s || !wmd)
		goto fail;
	CK(dnnl_primitive_create(&p->prim, pd));
	CK(dnnl_memory_create(&p->a, &amd, engine, DNNL_MEMORY_NONE));
	CK(dnnl_memory_create(&p->c, &cmd, engine, DNNL_MEMORY_NONE));
	CK(dnnl_memory_create(&p->wei, wmd, engine, DNNL_MEMORY_ALLOCATE));
	CK(dnnl_memory_create(&ub, &umd, engine, (void *)b));
	CK(reorder(&umd, wmd, false, &rb));
	if (rb) {
		dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, ub}, {DNNL_ARG_TO, p->wei}};
		CK(dnnl_primitive_execute(rb, s, 2, ra));
		CK(dnnl_stream_wait(s));
	} else {
		void *h;
		CK(dnnl_memory_get_data_handle(p->wei, &h));
		memcpy(h, b, (size_t)(K * N));
	}
	if (!(p->colsum = calloc((size_t)N, sizeof *p->colsum)))
		goto fail;
	for (int64_t k = 0; k < K; k++)
		for (int64_t j = 0; j < N; j++)
			p->colsum[j] = (int32_t)((uint32_t)p->colsum[j] + (uint32_t)b[k * N + j]);
	goto done;
fail:
	if (p->prim)
		dnnl_primitive_destroy(p->prim);
	if (p->a)
		dnnl_memory_destroy(p->a);
	if (p->c)
		dnnl_memory_destroy(p->c);
	if (p->wei)
		dnnl_memory_destroy(p->wei);
	free(p->colsum);
	*p = (QPrim){n, M, N, K, adt, NULL, NULL, NULL, NULL, NULL, NULL}; /* declined: kept so */
done:
	if (rb)
		dnnl_primitive_destroy(rb);
	if (ub)
		dnnl_memory_destroy(ub);
	if (pd)
		dnnl_primitive_desc_destroy(pd);
	pthread_mutex_lock(&cache_lock);
	p->next = qcache[hash(n)];
	qcache[hash(n)] = p;
	pthread_mutex_unlock(&cache_lock);
	return p->prim ? p : NULL;
}

int
taprt_qmatmul_dnnl(taprt_ctx *cx, const taprt_node *n, int64_t M, int64_t N, int64_t K,
    const void *a, int adt, const int8_t *b, int32_t *c, const int32_t **colsum)
{
	pthread_once(&engine_once, engine_init);
	if (!engine || getenv("TAPRT_NO_DNNL") || M < 1 || N < 1 || K < 1)
		return 0;
	QPrim *p = qprim_get(n, M, N, K, adt, b);
	if (!p)
		return 0;
	dnnl_stream_t s = stream();
	dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, p->a}, {DNNL_ARG_WEIGHTS, p->wei},
		{DNNL_ARG_DST, p->c}};
	if (dnnl_memory_set_data_handle(p->a, (void *)a) || dnnl_memory_set_data_handle(p->c, c) ||
	    dnnl_primitive_execute(p->prim, s, 3, args) || dnnl_stream_wait(s))
		return taprt_fail(cx, "node '%s': oneDNN's int8 matmul failed", n->name);
	*colsum = p->colsum;
	return 1;
}

#else

int
taprt_qmatmul_dnnl(taprt_ctx *cx, const taprt_node *n, int64_t M, int64_t N, int64_t K,
    const void *a, int adt, const int8_t *b, int32_t *c, const int32_t **colsum)
{
	(void)cx, (void)n, (void)M, (void)N, (void)K, (void)a, (void)adt, (void)b, (void)c;
	(void)colsum;
	return 0;
}

int
taprt_conv_dnnl(taprt_ctx *cx, const taprt_node *n, const float *x, const float *w,
    const float *b, const float *z, float *y, const taprt_conv2d *c, const taprt_act *act)
{
	(void)cx, (void)n, (void)x, (void)w, (void)b, (void)z, (void)y, (void)c, (void)act;
	return 0;
}

#endif
