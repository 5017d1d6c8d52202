/*
 * k_einsum.c - Einsum.
 *
 * Needs: the runtime's GEMM (gemm.c) for f32/f64 and runtime/einsum.h, the equation
 * parser tapc's shape inference also uses (so both read an equation the
 * same way).  Each operand becomes a strided view over its labels: a label
 * repeated within an operand (a diagonal) takes the sum of its axes'
 * strides, a dim of 1 that broadcasts takes stride 0.  Then:
 *
 *  - two f32/f64 operands whose every label is batch (in both operands and
 *    the output), M (first operand and output), N (second and output) or K
 *    (both operands, summed) are a batched GEMM, unless the products are
 *    tiny (M*N*K < 64 in a batch: an elementwise "ij,ij->ij").  An
 *    operand whose M and K labels (K and N) each merge into one strided
 *    dim is read in place, transposed where its unit stride says so
 *    (attention's "bhqd,bhkd->bhqk" reads both in place); otherwise it is
 *    copied into [batch, M, K] order first.  The product goes straight into the output
 *    when its M and N labels merge there (either way round: an [N, M]
 *    output swaps the operands), else into scratch and is permuted after;
 *  - one operand without summed labels (a transpose) is a strided copy;
 *  - everything else (a label summed within one operand, three or more
 *    operands, integer types) takes the general loop: each output element
 *    is the sum, over the summed labels, of the operands' product (in
 *    double for floats; integers wrap in unsigned arithmetic).
 */
#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include "runtime/einsum.h"
#include "runtime/internal.h"

#define NUM_TYPES(X)                                                          \
	X(TAPRT_F32, float, double, f32) X(TAPRT_F64, double, double, f64)    \
	X(TAPRT_I8, int8_t, uint64_t, i8) X(TAPRT_U8, uint8_t, uint64_t, u8)   \
	X(TAPRT_I16, int16_t, uint64_t, i16) X(TAPRT_U16, uint16_t, uint64_t, u16) \
	X(TAPRT_I32, int32_t, uint64_t, i32) X(TAPRT_U32, uint32_t, uint64_t, u32) \
	X(TAPRT_I64, int64_t, uint64_t, i64) X(TAPRT_U64, uint64_t, uint64_t, u64)

/* What the strategies need: the operands as views over labels. */
typedef struct {
	int nin, es, dtype;
	const void *x[EINSUM_MAX_IN];
	int64_t size[EINSUM_LABELS];            /* each label's size, -1 unused */
	int64_t st[EINSUM_MAX_IN][EINSUM_LABELS]; /* operand strides per label, 0 if absent */
	bool has[EINSUM_MAX_IN][EINSUM_LABELS]; /* operand t has label l */
	bool out[EINSUM_LABELS];                /* the output has label l */
	int orank;
	int olab[EINSUM_MAX_RANK];
	int64_t ost[EINSUM_LABELS];             /* output strides per label */
	int nsum;
	int sum[EINSUM_LABELS];                 /* summed labels */
	int rank0;
	int lab0[EINSUM_MAX_RANK];              /* the first operand's labels, by axis */
	void *y;
	int64_t ynumel;
} job;

/* ------------------------------------------------------------ strided copy */

/* dst (dense, row-major over d[0..r)) = src viewed with element strides s:
 * unit dims dropped and contiguous neighbours merged first, so that a
 * permutation keeping the last axis copies whole rows. */
#define GATHER_VIEW(T)                                                        \
	do {                                                                  \
		const T *s_ = src;                                            \
		T *d_ = dst;                                                  \
		int64_t pos_[3 * EINSUM_MAX_RANK] = {0}, off_ = 0, in_ = vd[n - 1], is_ = vs[n - 1]; \
		for (int64_t row_ = 0, rows_ = total / in_; row_ < rows_; row_++) { \
			if (is_ == 1)                                         \
				memcpy(d_, s_ + off_, (size_t)in_ * sizeof(T)); \
			else                                                  \
				for (int64_t j_ = 0; j_ < in_; j_++)          \
					d_[j_] = s_[off_ + j_ * is_];         \
			d_ += in_;                                            \
			for (int k_ = n - 2; k_ >= 0; k_--) {                 \
				off_ += vs[k_];                               \
				if (++pos_[k_] < vd[k_])                      \
					break;                                \
				off_ -= vs[k_] * vd[k_];                      \
				pos_[k_] = 0;                                 \
			}                                                     \
		}                                                             \
	} while (0)

static void
gather_view(void *dst, const void *src, int r, const int64_t *d, const int64_t *s, int es)
{
	int64_t total = 1, vd[3 * EINSUM_MAX_RANK], vs[3 * EINSUM_MAX_RANK];
	int n = 0;
	for (int i = 0; i < r; i++) {
		total *= d[i];
		if (d[i] == 1)
			continue;
		if (n > 0 && vs[n - 1] == s[i] * d[i]) {
			vd[n - 1] *= d[i];
			vs[n - 1] = s[i];
			continue;
		}
		vd[n] = d[i];
		vs[n++] = s[i];
	}
	if (total == 0)
		return;
	if (n == 0) {
		vd[0] = 1;
		vs[0] = 0;
		n = 1;
	}
	switch (es) {
	case 1: GATHER_VIEW(uint8_t); break;
	case 2: GATHER_VIEW(uint16_t); break;
	case 4: GATHER_VIEW(uint32_t); break;
	default: GATHER_VIEW(uint64_t); break;
	}
}
#undef GATHER_VIEW

/* ------------------------------------------------------------ general loop */

/* The last summed label is a tight loop (one and two operands unrolled);
 * an odometer walks the others.  With no summed label it runs once. */
#define GENERAL(E, T, A, sfx)                                                 \
static void                                                                   \
general_##sfx(const job *j, const int64_t *odim, int64_t (*ost)[EINSUM_MAX_RANK], \
    const int64_t *sdim, int64_t (*sst)[EINSUM_LABELS])                       \
{                                                                             \
	T *y = j->y;                                                          \
	const T *x0 = j->x[0], *x1 = j->x[j->nin > 1 ? 1 : 0];                \
	int ns = j->nsum > 0 ? j->nsum - 1 : 0;  /* odometer labels */        \
	int64_t L = j->nsum > 0 ? sdim[ns] : 1;                               \
	int64_t s0 = j->nsum > 0 ? sst[0][ns] : 0;                            \
	int64_t s1 = j->nsum > 0 && j->nin > 1 ? sst[1][ns] : 0;              \
	int64_t opos[EINSUM_MAX_RANK] = {0}, ooff[EINSUM_MAX_IN] = {0};       \
	for (int64_t e = 0; e < j->ynumel; e++) {                             \
		A acc = 0;                                                    \
		int64_t spos[EINSUM_LABELS] = {0}, soff[EINSUM_MAX_IN];       \
		for (int t = 0; t < j->nin; t++)                              \
			soff[t] = ooff[t];                                    \
		for (;;) {                                                    \
			if (j->nin <= 2) {                                    \
				/* four partial sums: the adds overlap */     \
				const T *p0 = x0 + soff[0];                   \
				const T *p1 = j->nin > 1 ? x1 + soff[1] : x1; \
				A a0 = 0, a1 = 0, a2 = 0, a3 = 0;             \
				int64_t i = 0;                                \
				if (j->nin == 1)                              \
					for (; i + 4 <= L; i += 4) {          \
						a0 += (A)p0[i * s0];          \
						a1 += (A)p0[(i + 1) * s0];    \
						a2 += (A)p0[(i + 2) * s0];    \
						a3 += (A)p0[(i + 3) * s0];    \
					}                                     \
				else                                          \
					for (; i + 4 <= L; i += 4) {          \
						a0 += (A)p0[i * s0] * (A)p1[i * s1]; \
						a1 += (A)p0[(i + 1) * s0] * (A)p1[(i + 1) * s1]; \
						a2 += (A)p0[(i + 2) * s0] * (A)p1[(i + 2) * s1]; \
						a3 += (A)p0[(i + 3) * s0] * (A)p1[(i + 3) * s1]; \
					}                                     \
				for (; i < L; i++)                            \
					a0 += j->nin == 1 ? (A)p0[i * s0] :   \
					    (A)p0[i * s0] * (A)p1[i * s1];    \
				acc += (a0 + a1) + (a2 + a3);                 \
			} else {                                              \
				for (int64_t i = 0; i < L; i++) {             \
					A p = 1;                              \
					for (int t = 0; t < j->nin; t++)      \
						p *= (A)((const T *)j->x[t])[soff[t] + \
						    i * (j->nsum > 0 ? sst[t][ns] : 0)]; \
					acc += p;                             \
				}                                             \
			}                                                     \
			int k = ns - 1;                                       \
			for (; k >= 0; k--) {                                 \
				for (int t = 0; t < j->nin; t++)              \
					soff[t] += sst[t][k];                 \
				if (++spos[k] < sdim[k])                      \
					break;                                \
				for (int t = 0; t < j->nin; t++)              \
					soff[t] -= sst[t][k] * sdim[k];       \
				spos[k] = 0;                                  \
			}                                                     \
			if (k < 0)                                            \
				break;                                        \
		}                                                             \
		y[e] = (T)acc;                                                \
		for (int k = j->orank - 1; k >= 0; k--) {                     \
			for (int t = 0; t < j->nin; t++)                      \
				ooff[t] += ost[t][k];                         \
			if (++opos[k] < odim[k])                              \
				break;                                        \
			for (int t = 0; t < j->nin; t++)                      \
				ooff[t] -= ost[t][k] * odim[k];               \
			opos[k] = 0;                                          \
		}                                                             \
	}                                                                     \
}
NUM_TYPES(GENERAL)
#undef GENERAL

static bool
general(const job *j)
{
	int64_t odim[EINSUM_MAX_RANK], ost[EINSUM_MAX_IN][EINSUM_MAX_RANK];
	int64_t sdim[EINSUM_LABELS], sst[EINSUM_MAX_IN][EINSUM_LABELS];
	for (int k = 0; k < j->orank; k++) {
		odim[k] = j->size[j->olab[k]];
		for (int t = 0; t < j->nin; t++)
			ost[t][k] = j->st[t][j->olab[k]];
	}
	for (int k = 0; k < j->nsum; k++) {
		sdim[k] = j->size[j->sum[k]];
		if (sdim[k] == 0) {     /* an empty sum */
			memset(j->y, 0, (size_t)(j->ynumel * j->es));
			return true;
		}
		for (int t = 0; t < j->nin; t++)
			sst[t][k] = j->st[t][j->sum[k]];
	}
	switch (j->dtype) {
#define CASE(E, T, A, sfx) case E: general_##sfx(j, odim, ost, sdim, sst); return true;
	NUM_TYPES(CASE)
#undef CASE
	default:
		return false;
	}
}

/* ------------------------------------------------------------------ GEMM */

/* Labels l[0..n) of a view (outer to inner) merged into one strided dim. */
typedef struct {
	int64_t size, stride;
	bool ok;
} block;

static block
merge(const int *l, int n, const int64_t *size, const int64_t *st)
{
	block b = {1, 0, true};
	bool any = false;
	for (int i = 0; i < n; i++) {
		int64_t d = size[l[i]];
		if (d == 1)
			continue;
		if (any && b.stride != st[l[i]] * d)
			b.ok = false;
		b.size *= d;
		b.stride = st[l[i]];
		any = true;
	}
	return b;
}

/* An R x C matrix of blocks r, c for BLAS: row-major (*trans false) when
 * the columns are unit-stride, column-major (*trans) when the rows are. */
static bool
as_matrix(block r, block c, bool *trans, int64_t *ld)
{
	if (!r.ok || !c.ok)
		return false;
	if (c.size == 1 || c.stride == 1) {
		*trans = false;
		*ld = r.size > 1 ? r.stride : c.size;
		if (*ld >= c.size && *ld >= 1 && *ld <= INT_MAX)
			return true;
	}
	if (r.size == 1 || r.stride == 1) {
		*trans = true;
		*ld = c.size > 1 ? c.stride : r.size;
		if (*ld >= r.size && *ld >= 1 && *ld <= INT_MAX)
			return true;
	}
	return false;
}

static void
gemm(int dtype, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *a, int64_t lda,
    const void *b, int64_t ldb, void *c, int64_t ldc)
{
	if (dtype == TAPRT_F32)
		taprt_sgemm(ta, tb, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
	else
		taprt_dgemm(ta, tb, M, N, K, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}

/* Row-major strides of a dense array over labels l[0..n) into st[label]. */
static int64_t
dense(const int *l, int n, const int64_t *size, int64_t *st)
{
	int64_t s = 1;
	for (int i = n - 1; i >= 0; i--) {
		st[l[i]] = s;
		s *= size[l[i]];
	}
	return s;
}

/* One operand as a batch of matrices over labels rows x cols: in place, or
 * copied into [batch, rows, cols] order at *spare.  Sets *p, *trans, *ld and
 * st (the batch strides to use). */
static void
operand(const job *j, int t, const int *bl, int nb, const int *rl, int nr, const int *cl,
    int nc, const void **p, bool *trans, int64_t *ld, int64_t *st, char **spare)
{
	memcpy(st, j->st[t], sizeof j->st[t]);
	*p = j->x[t];
	block r = merge(rl, nr, j->size, j->st[t]), c = merge(cl, nc, j->size, j->st[t]);
	if (as_matrix(r, c, trans, ld))
		return;
	int l[3 * EINSUM_MAX_RANK], n = 0;
	int64_t d[3 * EINSUM_MAX_RANK] = {0}, s[3 * EINSUM_MAX_RANK] = {0};
	for (int i = 0; i < nb; i++)
		l[n++] = bl[i];
	for (int i = 0; i < nr; i++)
		l[n++] = rl[i];
	for (int i = 0; i < nc; i++)
		l[n++] = cl[i];
	for (int i = 0; i < n; i++) {
		d[i] = j->size[l[i]];
		s[i] = j->st[t][l[i]];
	}
	gather_view(*spare, j->x[t], n, d, s, j->es);
	int64_t bytes = dense(l, n, j->size, st) * j->es;
	*p = *spare;
	*spare += (bytes + 63) & ~(int64_t)63;
	*trans = false;
	*ld = c.size;
}

static bool
try_gemm(taprt_ctx *cx, const taprt_node *n, const job *j)
{
	int bl[EINSUM_LABELS], ml[EINSUM_LABELS], nl[EINSUM_LABELS], kl[EINSUM_LABELS];
	int nb = 0, nm = 0, nn = 0, nk = 0;
	for (int l = 0; l < EINSUM_LABELS; l++) {
		bool a = j->has[0][l], b = j->has[1][l];
		if ((a || b) && !j->out[l] && !(a && b))
			return false;   /* summed within one operand */
	}
	for (int k = 0; k < j->orank; k++) {
		int l = j->olab[k];
		bool a = j->has[0][l], b = j->has[1][l];
		if (a && b)
			bl[nb++] = l;
		else if (a)
			ml[nm++] = l;
		else
			nl[nn++] = l;
	}
	/* K in the first operand's order, so that its K block can merge */
	for (int a = 0; a < j->rank0; a++) {
		int l = j->lab0[a];
		bool dup = false;
		for (int i = 0; i < nk; i++)
			dup |= kl[i] == l;
		if (!j->out[l] && !dup)
			kl[nk++] = l;
	}
	block bm = merge(ml, nm, j->size, j->ost), bn = merge(nl, nn, j->size, j->ost);
	int64_t M = bm.size, N = bn.size, K = 1, batch = 1;
	for (int i = 0; i < nk; i++)
		K *= j->size[kl[i]];
	for (int i = 0; i < nb; i++)
		batch *= j->size[bl[i]];
	if (M > INT_MAX || N > INT_MAX || K > INT_MAX)
		return false;
	if (K == 0) {
		memset(j->y, 0, (size_t)(j->ynumel * j->es));
		return true;
	}
	/* a batch of tiny products ("ij,ij->ij" is M = N = K = 1 per element)
	 * costs more in BLAS calls than in arithmetic */
	if (batch > 1 && M * N * K < 64)
		return false;
	/* where the product goes: the output itself, transposed, or scratch */
	bool direct = false, swap = false, tc;
	int64_t ldc;
	if (as_matrix(bm, bn, &tc, &ldc)) {
		direct = true;
		swap = tc;      /* the output holds [N, M]: compute B^T A^T */
	}
	int64_t cst[EINSUM_LABELS];
	memcpy(cst, j->ost, sizeof cst);
	/* at most: the product, and each operand copied */
	int64_t need = direct ? 0 : (batch * M * N * j->es + 63) & ~(int64_t)63;
	need += (batch * M * K * j->es + 63) & ~(int64_t)63;
	need += (batch * K * N * j->es + 63) & ~(int64_t)63;
	char *spare = taprt_scratch(need + 64);
	if (!spare) {
		taprt_fail(cx, "node '%s' (Einsum): out of memory for %lld bytes of scratch", n->name,
		    (long long)need);
		return true;
	}
	char *cbuf = NULL;
	if (!direct) {
		cbuf = spare;
		spare += (batch * M * N * j->es + 63) & ~(int64_t)63;
		int l[3 * EINSUM_MAX_RANK], nlab = 0;
		for (int i = 0; i < nb; i++)
			l[nlab++] = bl[i];
		for (int i = 0; i < nm; i++)
			l[nlab++] = ml[i];
		for (int i = 0; i < nn; i++)
			l[nlab++] = nl[i];
		dense(l, nlab, j->size, cst);
		ldc = N;
	}
	const void *pa, *pb;
	bool ta, tb;
	int64_t lda, ldb, sa[EINSUM_LABELS], sb[EINSUM_LABELS];
	operand(j, 0, bl, nb, ml, nm, kl, nk, &pa, &ta, &lda, sa, &spare);
	operand(j, 1, bl, nb, kl, nk, nl, nn, &pb, &tb, &ldb, sb, &spare);
	char *c = direct ? j->y : cbuf;
	int64_t pos[EINSUM_LABELS] = {0}, oa = 0, ob = 0, oc = 0;
	for (int64_t i = 0; i < batch; i++) {
		const char *a = (const char *)pa + oa * j->es, *b = (const char *)pb + ob * j->es;
		if (swap)
			gemm(j->dtype, !tb, !ta, N, M, K, b, ldb, a, lda, c + oc * j->es, ldc);
		else
			gemm(j->dtype, ta, tb, M, N, K, a, lda, b, ldb, c + oc * j->es, ldc);
		for (int k = nb - 1; k >= 0; k--) {
			int l = bl[k];
			oa += sa[l];
			ob += sb[l];
			oc += cst[l];
			if (++pos[k] < j->size[l])
				break;
			oa -= sa[l] * j->size[l];
			ob -= sb[l] * j->size[l];
			oc -= cst[l] * j->size[l];
			pos[k] = 0;
		}
	}
	if (!direct) {
		int64_t d[EINSUM_MAX_RANK], s[EINSUM_MAX_RANK];
		for (int k = 0; k < j->orank; k++) {
			d[k] = j->size[j->olab[k]];
			s[k] = cst[j->olab[k]];
		}
		gather_view(j->y, cbuf, j->orank, d, s, j->es);
	}
	return true;
}

/* ---------------------------------------------------------------- kernel */

void
taprt_op_Einsum(taprt_ctx *cx, const taprt_node *n)
{
	taprt_tensor *y = n->out[0];
	const char *eq = taprt_attr_str(n, "equation", NULL);
	if (!eq) {
		taprt_fail(cx, "node '%s' (Einsum): no equation", n->name);
		return;
	}
	if (n->nin < 1 || n->nin > EINSUM_MAX_IN) {
		taprt_fail(cx, "node '%s' (Einsum): %d operands", n->name, n->nin);
		return;
	}
	static job zero;
	job j = zero;
	int rank[EINSUM_MAX_IN];
	const int64_t *dims[EINSUM_MAX_IN];
	j.nin = n->nin;
	j.dtype = y->dtype;
	j.es = taprt_dtype_size(y->dtype);
	j.y = y->data;
	j.ynumel = y->numel;
	for (int t = 0; t < j.nin; t++) {
		const taprt_tensor *x = n->in[t];
		if (!x || x->dtype != y->dtype) {
			taprt_fail(cx, "node '%s' (Einsum): operand %d is %s, expected %s", n->name, t,
			    x ? taprt_dtype_name(x->dtype) : "missing", taprt_dtype_name(y->dtype));
			return;
		}
		rank[t] = x->rank;
		dims[t] = x->dims;
		j.x[t] = x->data;
	}
	einsum_eq e;
	char err[200];
	if (einsum_parse(eq, j.nin, rank, &e, err, sizeof err) ||
	    einsum_sizes(&e, dims, j.size, err, sizeof err)) {
		taprt_fail(cx, "node '%s' (Einsum): equation '%s': %s", n->name, eq, err);
		return;
	}
	bool shape_ok = e.orank == y->rank;
	for (int k = 0; shape_ok && k < e.orank; k++)
		shape_ok = j.size[e.olab[k]] == y->dims[k];
	if (!shape_ok) {
		taprt_fail(cx, "node '%s' (Einsum): the output's shape is not what equation '%s' gives",
		    n->name, eq);
		return;
	}
	if (y->numel == 0)
		return;
	for (int t = 0; t < j.nin; t++) {
		int64_t own[TAPRT_MAX_RANK];
		taprt_strides(n->in[t], own);
		for (int a = 0; a < rank[t]; a++) {
			int l = e.lab[t][a];
			j.has[t][l] = true;
			if (dims[t][a] != 1)    /* a dim of 1 broadcasts: stride 0 */
				j.st[t][l] += own[a];
		}
	}
	int64_t yst[TAPRT_MAX_RANK];
	taprt_strides(y, yst);
	j.orank = e.orank;
	for (int k = 0; k < e.orank; k++) {
		j.olab[k] = e.olab[k];
		j.out[e.olab[k]] = true;
		j.ost[e.olab[k]] = yst[k];
	}
	j.rank0 = rank[0];
	for (int a = 0; a < rank[0]; a++)
		j.lab0[a] = e.lab[0][a];
	/* summed labels in the operands' axis order: the last is the innermost
	 * loop, so a reduction over the last axis walks memory in order */
	bool listed[EINSUM_LABELS] = {false};
	for (int t = 0; t < j.nin; t++)
		for (int a = 0; a < rank[t]; a++) {
			int l = e.lab[t][a];
			if (!j.out[l] && !listed[l]) {
				listed[l] = true;
				j.sum[j.nsum++] = l;
			}
		}
	bool isfloat = y->dtype == TAPRT_F32 || y->dtype == TAPRT_F64;
	if (j.nin == 2 && isfloat && try_gemm(cx, n, &j))
		return;
	if (j.nin == 1 && j.nsum == 0) {
		int64_t d[EINSUM_MAX_RANK], s[EINSUM_MAX_RANK];
		for (int k = 0; k < e.orank; k++) {
			d[k] = y->dims[k];
			s[k] = j.st[0][e.olab[k]];
		}
		gather_view(y->data, j.x[0], e.orank, d, s, j.es);
		return;
	}
	if (!general(&j))
		taprt_bad_dtype(cx, n, "Einsum", y->dtype);
}
