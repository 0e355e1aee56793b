/* SPDX-License-Identifier: BSD-3-Clause */
/* Names of the datatypes and ops in nf_types.h; no MPI calls. */
#include "config.h"

#include <string.h>

#include "nf_types.h"
#include "nf_util.h"

#define NF_X_NAME(e, s, h) s,
static const char *const nf_dt_names[NF_DT_N] = {NF_DATATYPES(NF_X_NAME)};
static const char *const nf_op_names[NF_OP_N] = {NF_OPS(NF_X_NAME)};
#undef NF_X_NAME

#define NF_X_ALIAS(e, s, h) {s, NF_DT_##e},
static const struct { const char *name; nf_dtype_t dt; } nf_dt_alias[] = {
    NF_DATATYPE_ALIASES(NF_X_ALIAS)};
#undef NF_X_ALIAS

const char *nf_dtype_name(nf_dtype_t dt)
{
    return (unsigned)dt < NF_DT_N ? nf_dt_names[dt] : "unknown";
}

const char *nf_opkind_name(nf_opkind_t op)
{
    return (unsigned)op < NF_OP_N ? nf_op_names[op] : "unknown";
}

/* name in lower case without an "MPI_" prefix, into buf; NF_ERR_INVALID
 * when it is empty or does not fit (no name is that long). ASCII only: the
 * C locale's tolower would make this locale-dependent. */
static nf_status_t nf_canon(const char *name, char *buf, size_t len)
{
    if (name == NULL)
        return NF_ERR_INVALID;
    if ((name[0] | 0x20) == 'm' && (name[1] | 0x20) == 'p' && (name[2] | 0x20) == 'i' &&
        name[3] == '_')
        name += 4;
    size_t n = strlen(name);
    if (n == 0 || n >= len)
        return NF_ERR_INVALID;
    for (size_t i = 0; i <= n; i++)
        buf[i] = (char)nf_ascii_lower((unsigned char)name[i]);
    return NF_OK;
}

static int nf_find(const char *const *names, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (strcmp(key, names[i]) == 0)
            return i;
    return NF_NAME_UNKNOWN;
}

int nf_dtype_parse(const char *name)
{
    char buf[32];
    if (nf_canon(name, buf, sizeof(buf)) != NF_OK)
        return NF_NAME_UNKNOWN;
    int i = nf_find(nf_dt_names, NF_DT_N, buf);
    if (i >= 0)
        return i;
    for (size_t a = 0; a < sizeof(nf_dt_alias) / sizeof(nf_dt_alias[0]); a++)
        if (strcmp(buf, nf_dt_alias[a].name) == 0)
            return (int)nf_dt_alias[a].dt;
    return NF_NAME_UNKNOWN;
}

int nf_opkind_parse(const char *name)
{
    char buf[32];
    if (nf_canon(name, buf, sizeof(buf)) != NF_OK)
        return NF_NAME_UNKNOWN;
    return nf_find(nf_op_names, NF_OP_N, buf);
}
