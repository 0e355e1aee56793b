/* SPDX-License-Identifier: BSD-3-Clause */
/* The route table (nf_route.h). */
#include "config.h"

#include "nf_route.h"

const nf_route_info_t nf_routes[NF_ROUTE_COUNT] = {
    /*                   name       lowbit residual float_only bits intk */
    [NF_ROUTE_PMPI] = {"pmpi", 0, 0, 0, 32, 0},
    [NF_ROUTE_FP32] = {"fp32", 0, 0, 1, 32, 0},
    [NF_ROUTE_BINARY] = {"binary", 1, 1, 1, 1, 0},
    [NF_ROUTE_TERNARY] = {"ternary", 1, 1, 1, 2, 0},
    [NF_ROUTE_BF16] = {"bf16", 0, 0, 1, 16, 0},
    [NF_ROUTE_INT4] = {"int4", 1, 1, 1, 4, 4},
    [NF_ROUTE_INT3] = {"int3", 1, 1, 1, 3, 3},
    [NF_ROUTE_INT2] = {"int2", 1, 1, 1, 2, 2},
};
