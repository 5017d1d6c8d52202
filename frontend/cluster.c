/*
 * cluster.c - read -cluster=FILE, the cluster a plan is for, from JSON:
 *
 *   {"latency": 1e-5,
 *    "nodes": [
 *      {"name": "a100x4", "count": 3, "devices": 4, "flops": 1.56e14,
 *       "memory": 4.0e10, "intra_bw": 3.0e11, "inter_bw": 1.25e9},
 *      {"name": "k80x1", "count": 4, "devices": 1, "flops": 4.37e12,
 *       "memory": 1.2e10, "inter_bw": 7.5e9}]}
 *
 * Needs jansson (Debian's libjansson-dev) for the JSON; the file is opened
 * through ir_file_read like every input.  Every problem is one diag line
 * naming the file and the key: "c.json: nodes[1].flops: not positive".
 * docs/planner.md describes each key.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/cluster.h"

#define MAX_CLUSTER_FILE ((int64_t)1 << 20)

typedef struct {
	const char *path;
	char at[64];                    /* "nodes[1]." or "" */
	bool ok;
} Reader;

static void
bad(Reader *r, const char *key, const char *what)
{
	if (r->ok)
		diag_file(r->path, "%s%s: %s", r->at, key, what);
	r->ok = false;
}

/* A positive finite number (zero too if zero_ok); dflt if absent and not
 * required. */
static double
number(Reader *r, json_t *obj, const char *key, bool required, double dflt, bool zero_ok)
{
	json_t *v = json_object_get(obj, key);
	if (!v) {
		if (required)
			bad(r, key, "missing");
		return dflt;
	}
	if (!json_is_number(v)) {
		bad(r, key, "wrong type: expected a number");
		return dflt;
	}
	double x = json_number_value(v);
	if (!isfinite(x) || x < 0 || (x == 0 && !zero_ok)) {
		bad(r, key, zero_ok ? "negative" : "not positive");
		return dflt;
	}
	return x;
}

static int
count(Reader *r, json_t *obj, const char *key, bool required, int dflt)
{
	json_t *v = json_object_get(obj, key);
	if (!v) {
		if (required)
			bad(r, key, "missing");
		return dflt;
	}
	if (!json_is_integer(v)) {
		bad(r, key, "wrong type: expected a whole number");
		return dflt;
	}
	json_int_t x = json_integer_value(v);
	if (x < 1 || x > IR_MAX_DEVICES) {
		char why[64];
		snprintf(why, sizeof why, x < 1 ? "not positive" : "over %d", IR_MAX_DEVICES);
		bad(r, key, why);
		return dflt;
	}
	return (int)x;
}

/* Keys outside the list are typos: say so rather than ignore them. */
static void
known_keys(Reader *r, json_t *obj, const char *const *keys)
{
	const char *k;
	json_t *v;
	json_object_foreach(obj, k, v) {
		bool found = false;
		for (int i = 0; keys[i]; i++)
			found |= strcmp(k, keys[i]) == 0;
		if (!found) {
			char key[96];
			int n = 0;
			for (const char *p = k; *p && n < 40; p++) /* printable ASCII only */
				key[n++] = *p >= 0x20 && *p < 0x7f ? *p : '?';
			key[n] = 0;
			bad(r, key, "unknown key");
		}
	}
}

static void
read_node(Reader *r, json_t *nd, int i, NodeKind *k)
{
	static const char *const keys[] = {"name", "count", "devices", "flops", "memory",
		"intra_bw", "inter_bw", "mem_bw", NULL};
	snprintf(r->at, sizeof r->at, "nodes[%d].", i);
	if (!json_is_object(nd)) {
		r->at[strlen(r->at) - 1] = 0;
		bad(r, "", "wrong type: expected an object");
		return;
	}
	known_keys(r, nd, keys);
	json_t *name = json_object_get(nd, "name");
	snprintf(k->name, sizeof k->name, "node%d", i);
	if (name && !json_is_string(name)) {
		bad(r, "name", "wrong type: expected a string");
	} else if (name) {
		const char *s = json_string_value(name);
		size_t n = json_string_length(name);
		bool printable = n > 0 && n < CLUSTER_NAME;
		for (size_t j = 0; j < n && printable; j++)
			printable = (unsigned char)s[j] >= 0x20 && s[j] != 0x7f;
		if (!printable)
			bad(r, "name", n >= CLUSTER_NAME ? "longer than 63 bytes" :
			    "empty or holds control characters");
		else
			memcpy(k->name, s, n + 1);
	}
	k->count = count(r, nd, "count", false, 1);
	k->devices = count(r, nd, "devices", true, 1);
	k->flops = number(r, nd, "flops", true, 1, false);
	k->memory = number(r, nd, "memory", true, 1, false);
	k->intra_bw = number(r, nd, "intra_bw", k->devices > 1, 0, false);
	k->inter_bw = number(r, nd, "inter_bw", false, 0, false);
	k->mem_bw = number(r, nd, "mem_bw", false, 0, true);
}

bool
cluster_read(const char *path, Cluster *c)
{
	char why[512];
	size_t len;
	char *text = ir_file_read(NULL, path, "", "", MAX_CLUSTER_FILE, &len, why, sizeof why);
	if (!text) {
		diag_file(path, "%s", why);
		return false;
	}
	json_error_t err;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
	free(text);
	if (!root) {
		diag_file(path, "line %d: %s (expected the JSON cluster format of docs/planner.md)",
		    err.line, err.text);
		return false;
	}
	Reader r = {.path = path, .ok = true};
	memset(c, 0, sizeof *c);
	static const char *const keys[] = {"latency", "op_latency", "alpha", "beta", "nodes", "name",
		"comment", NULL};
	json_t *nodes = NULL;
	if (!json_is_object(root)) {
		bad(&r, "the file", "wrong type: expected an object with \"nodes\"");
		goto done;
	}
	known_keys(&r, root, keys);
	c->latency = number(&r, root, "latency", false, 5e-6, true);
	c->op_latency = number(&r, root, "op_latency", false, 0, true);
	c->alpha = number(&r, root, "alpha", false, 1, false);
	c->beta = number(&r, root, "beta", false, 1, false);
	nodes = json_object_get(root, "nodes");
	if (!nodes) {
		bad(&r, "nodes", "missing");
	} else if (!json_is_array(nodes)) {
		bad(&r, "nodes", "wrong type: expected an array");
	} else if (json_array_size(nodes) == 0) {
		bad(&r, "nodes", "empty");
	} else if (json_array_size(nodes) > CLUSTER_MAX_KINDS) {
		bad(&r, "nodes", "more than 64 kinds of node");
	} else {
		int64_t devices = 0, count = 0;
		c->nkinds = (int)json_array_size(nodes);
		for (int i = 0; i < c->nkinds && r.ok; i++) {
			NodeKind *k = &c->kinds[i];
			read_node(&r, json_array_get(nodes, i), i, k);
			count += k->count;
			devices += (int64_t)k->count * k->devices;
		}
		r.at[0] = 0;
		if (r.ok && devices > IR_MAX_DEVICES)
			bad(&r, "nodes", "more than 65536 devices in all");
		c->nnodes = (int)count;
		c->ndevices = (int)devices;
		/* a link between nodes needs each end's inter_bw */
		for (int i = 0; i < c->nkinds && r.ok && count > 1; i++)
			if (c->kinds[i].inter_bw == 0) {
				snprintf(r.at, sizeof r.at, "nodes[%d].", i);
				bad(&r, "inter_bw", "missing (the cluster has more than one node)");
			}
	}
done:
	json_decref(root);
	return r.ok;
}
