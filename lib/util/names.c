/* SPDX-License-Identifier: BSD-3-Clause */
/* Names of public enums and error strings; no MPI calls (the policy parser
 * and the tools link this alone). */
#include "config.h"

#include <string.h>

#include "nfcoll.h"
#include "nf_export.h"
#include "nf_route.h"


NF_EXPORT const char *nf_route_name(nf_route_t route)
{
    if ((unsigned)route >= NF_ROUTE_COUNT)
        return "unknown";
    return nf_routes[route].name;
}

NF_EXPORT nf_status_t nf_route_parse(const char *name, nf_route_t *route)
{
    for (int r = 0; name != NULL && r < NF_ROUTE_COUNT; r++) {
        if (strcmp(name, nf_routes[r].name) == 0) {
            *route = (nf_route_t)r;
            return NF_OK;
        }
    }
    return NF_ERR_INVALID;
}

static const char *const nf_fallback_names[NF_FALLBACK_COUNT] = {
    [NF_FALLBACK_DATATYPE] = "datatype",
    [NF_FALLBACK_OP] = "op",
    [NF_FALLBACK_COMM] = "communicator",
    [NF_FALLBACK_NONFINITE] = "nonfinite",
    [NF_FALLBACK_CAPACITY] = "capacity",
    [NF_FALLBACK_RESOURCE] = "resource",
    [NF_FALLBACK_POLICY] = "policy-mismatch",
    [NF_FALLBACK_LAYOUT] = "layout-mismatch",
    [NF_FALLBACK_PROGRESS] = "no-progress",
    [NF_FALLBACK_SETUP] = "setup",
};

NF_EXPORT const char *nf_fallback_name(nf_fallback_t reason)
{
    if ((unsigned)reason >= NF_FALLBACK_COUNT)
        return "unknown";
    return nf_fallback_names[reason];
}

static const char *const nf_status_names[] = {
    "success",
    "invalid argument",
    "out of memory",
    "I/O or system call failed",
    "not supported",
    "no CXL memory node",
    "capacity exceeded",
    "MPI call failed",
    "parse error",
};

NF_EXPORT const char *nf_strerror(int status)
{
    if (status > 0 || status < NF_ERR_MPI_BASE)
        return "MPI error (see MPI_Error_string)";
    if (status <= NF_ERR_LAST)
        return "unknown error";
    return nf_status_names[-status];
}
