/*
 * cluster.h - -cluster=FILE, the JSON description of a cluster (cluster.c).
 */
#ifndef TAPC_CLUSTER_H
#define TAPC_CLUSTER_H

#include "ir/ir.h"

/* Read path into c; false after one diag line naming the key at fault. */
bool cluster_read(const char *path, Cluster *c);

#endif
