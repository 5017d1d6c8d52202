/*
 * einsum.h - the Einsum equation parser, shared by tapc (shape inference,
 * cost) and libtaprt's kernel so that both read an equation the same way.
 *
 * Header-only and self-contained (no IR or runtime types); not installed.
 * einsum_parse() maps every operand axis and every output axis to a label;
 * einsum_sizes() checks the operands' dims against each other and gives
 * each label its size.  Labels: 'a'..'z' are 0..25, 'A'..'Z' 26..51, and
 * the dims an ellipsis stands for are 52.. , right-aligned over all
 * operands as numpy broadcasts them.  Spaces are ignored.  Without "->"
 * the output is numpy's implicit one: the ellipsis dims, then the letters
 * that appear exactly once, in ASCII order ('B' before 'a').  A letter
 * repeated within one operand takes its diagonal; a dim of 1 broadcasts
 * against the same label's dim elsewhere (numpy does both).
 */
#ifndef TAPRT_EINSUM_H
#define TAPRT_EINSUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define EINSUM_MAX_RANK 8
#define EINSUM_MAX_IN 16
#define EINSUM_LETTERS 52
#define EINSUM_LABELS (EINSUM_LETTERS + EINSUM_MAX_RANK)

typedef struct {
	int nin;                                /* operands */
	int rank[EINSUM_MAX_IN];                /* their ranks */
	signed char lab[EINSUM_MAX_IN][EINSUM_MAX_RANK]; /* label of each operand axis */
	int orank;                              /* output rank */
	signed char olab[EINSUM_MAX_RANK];      /* label of each output axis */
	int nell;                               /* dims the ellipsis stands for (the most
						 * of any operand); labels 52..52+nell-1 */
} einsum_eq;

static inline int
einsum_letter(char c)
{
	if (c >= 'a' && c <= 'z')
		return c - 'a';
	if (c >= 'A' && c <= 'Z')
		return 26 + (c - 'A');
	return -1;
}

/* A label as the equation writes it: "b", or "..." for an ellipsis dim. */
static inline const char *
einsum_label_name(int l, char *buf)
{
	if (l >= EINSUM_LETTERS)
		return "...";
	buf[0] = (char)(l < 26 ? 'a' + l : 'A' + (l - 26));
	buf[1] = 0;
	return buf;
}

/*
 * One term of eq in [p, end): its letters in let[] (*nl of them) and where
 * the ellipsis stands among them (*ell, -1 for none).  0, or -1 with err.
 */
static inline int
einsum_term(const char *p, const char *end, signed char *let, int *nl, int *ell, char *err,
    size_t errlen)
{
	*nl = 0;
	*ell = -1;
	for (; p < end; p++) {
		if (*p == ' ')
			continue;
		if (*p == '.') {
			if (end - p < 3 || p[1] != '.' || p[2] != '.') {
				snprintf(err, errlen, "a '.' that is not part of '...'");
				return -1;
			}
			if (*ell >= 0) {
				snprintf(err, errlen, "a term with two ellipses");
				return -1;
			}
			*ell = *nl;
			p += 2;
			continue;
		}
		int l = einsum_letter(*p);
		if (l < 0) {
			snprintf(err, errlen, "unexpected character '%c'", *p);
			return -1;
		}
		if (*nl >= EINSUM_MAX_RANK) {
			snprintf(err, errlen, "a term with more than %d letters", EINSUM_MAX_RANK);
			return -1;
		}
		let[(*nl)++] = (signed char)l;
	}
	return 0;
}

/* Parse eq for nin operands of ranks rank[]: 0, or -1 with a message in err. */
static inline int
einsum_parse(const char *eq, int nin, const int *rank, einsum_eq *e, char *err, size_t errlen)
{
	memset(e, 0, sizeof *e);
	if (nin < 1 || nin > EINSUM_MAX_IN) {
		snprintf(err, errlen, "%d operands, expected 1 to %d", nin, EINSUM_MAX_IN);
		return -1;
	}
	e->nin = nin;
	const char *arrow = strstr(eq, "->"), *end = arrow ? arrow : eq + strlen(eq);
	signed char let[EINSUM_MAX_IN][EINSUM_MAX_RANK];
	int nl[EINSUM_MAX_IN], ell[EINSUM_MAX_IN], count[EINSUM_LETTERS] = {0};
	int term = 0;
	for (const char *p = eq;;) {
		const char *q = p;
		while (q < end && *q != ',')
			q++;
		if (term >= nin) {
			snprintf(err, errlen, "more terms than the %d operands", nin);
			return -1;
		}
		if (einsum_term(p, q, let[term], &nl[term], &ell[term], err, errlen))
			return -1;
		if (rank[term] < 0 || rank[term] > EINSUM_MAX_RANK) {
			snprintf(err, errlen, "operand %d has rank %d", term, rank[term]);
			return -1;
		}
		if (ell[term] < 0 ? nl[term] != rank[term] : nl[term] > rank[term]) {
			snprintf(err, errlen, "term %d ('%.*s') has %d letters for operand %d of rank %d",
			    term, (int)(q - p), p, nl[term], term, rank[term]);
			return -1;
		}
		e->rank[term] = rank[term];
		if (ell[term] >= 0 && rank[term] - nl[term] > e->nell)
			e->nell = rank[term] - nl[term];
		for (int i = 0; i < nl[term]; i++)
			count[let[term][i]]++;
		term++;
		if (q == end)
			break;
		p = q + 1;
	}
	if (term != nin) {
		snprintf(err, errlen, "%d terms for %d operands", term, nin);
		return -1;
	}
	/* operand axes: letters, with an ellipsis's dims right-aligned */
	for (int t = 0; t < nin; t++) {
		int k = ell[t] < 0 ? 0 : rank[t] - nl[t], a = 0;
		for (int i = 0; i <= nl[t]; i++) {
			if (i == ell[t])
				for (int j = 0; j < k; j++)
					e->lab[t][a++] = (signed char)(EINSUM_LETTERS + e->nell - k + j);
			if (i < nl[t])
				e->lab[t][a++] = let[t][i];
		}
	}
	if (!arrow) {
		/* implicit output: ellipsis dims, then letters seen once, ASCII order */
		int o = 0;
		for (int j = 0; j < e->nell; j++)
			e->olab[o++] = (signed char)(EINSUM_LETTERS + j);
		for (int c = 0; c < EINSUM_LETTERS; c++) {
			int l = c < 26 ? 26 + c : c - 26;       /* 'A'..'Z', then 'a'..'z' */
			if (count[l] != 1)
				continue;
			if (o >= EINSUM_MAX_RANK) {
				snprintf(err, errlen, "the implicit output has more than %d dims",
				    EINSUM_MAX_RANK);
				return -1;
			}
			e->olab[o++] = (signed char)l;
		}
		e->orank = o;
		return 0;
	}
	const char *op = arrow + 2, *oend = op + strlen(op);
	signed char olet[EINSUM_MAX_RANK];
	int onl, oell;
	if (strchr(op, ',') || strchr(op, '-') || strchr(op, '>')) {
		snprintf(err, errlen, "the output term '%s' is not one term of letters", op);
		return -1;
	}
	if (einsum_term(op, oend, olet, &onl, &oell, err, errlen))
		return -1;
	bool seen[EINSUM_LETTERS] = {false};
	for (int i = 0; i < onl; i++) {
		char nb[2];
		if (!count[olet[i]]) {
			snprintf(err, errlen, "output label '%s' appears in no input",
			    einsum_label_name(olet[i], nb));
			return -1;
		}
		if (seen[olet[i]]) {
			snprintf(err, errlen, "output label '%s' is repeated",
			    einsum_label_name(olet[i], nb));
			return -1;
		}
		seen[olet[i]] = true;
	}
	if (oell < 0 && e->nell > 0) {
		snprintf(err, errlen, "the output has no '...' for the %d dims the inputs' ellipsis stands for",
		    e->nell);
		return -1;
	}
	int nell = oell < 0 ? 0 : e->nell;
	if (onl + nell > EINSUM_MAX_RANK) {
		snprintf(err, errlen, "the output has %d dims, more than %d", onl + nell, EINSUM_MAX_RANK);
		return -1;
	}
	int o = 0;
	for (int i = 0; i <= onl; i++) {
		if (i == oell)
			for (int j = 0; j < nell; j++)
				e->olab[o++] = (signed char)(EINSUM_LETTERS + j);
		if (i < onl)
			e->olab[o++] = olet[i];
	}
	e->orank = o;
	return 0;
}

/*
 * Each label's size from the operands' dims (dims[t] has rank[t] entries):
 * size[l] for every label, -1 for those no operand uses.  A dim of 1
 * broadcasts; an axis repeated within one operand must match exactly.
 * 0, or -1 with a message in err.
 */
static inline int
einsum_sizes(const einsum_eq *e, const int64_t *const *dims, int64_t *size, char *err,
    size_t errlen)
{
	char nb[2];
	for (int l = 0; l < EINSUM_LABELS; l++)
		size[l] = -1;
	for (int t = 0; t < e->nin; t++)
		for (int a = 0; a < e->rank[t]; a++) {
			int l = e->lab[t][a];
			int64_t d = dims[t][a];
			for (int b = 0; b < a; b++)
				if (e->lab[t][b] == l && dims[t][b] != d) {
					snprintf(err, errlen, "operand %d repeats '%s' over dims %lld and %lld",
					    t, einsum_label_name(l, nb), (long long)dims[t][b], (long long)d);
					return -1;
				}
			if (size[l] < 0 || size[l] == 1)
				size[l] = d;
			else if (d != size[l] && d != 1) {
				snprintf(err, errlen, "label '%s' is %lld in operand %d but %lld in an earlier operand",
				    einsum_label_name(l, nb), (long long)d, t, (long long)size[l]);
				return -1;
			}
		}
	return 0;
}

#endif
