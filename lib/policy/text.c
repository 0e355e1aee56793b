/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The policy layer's line-oriented data files (layout, profile): reading a
 * file whole, cutting it into lines and whitespace-separated fields, and
 * diagnostics with file:line. No MPI calls; nothing here is on the hot path.
 * Files are read with lib/util's nf_file_read_all: only regular files of
 * bounded size, never blocking on a FIFO.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nf_policy_int.h"
#include "nf_file.h"
#include "nf_util.h"

void nf_pol_diagf(nf_policy_diag_fn fn, void *arg, nf_policy_severity_t sev, const char *file, int line,
                  const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    nf_policy_diag_t d = {sev, file, line, msg};

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    (fn != NULL ? fn : nf_pol_default_diag)(&d, arg);
}

/* ----------------------------------------------------------------- reading */

nf_status_t nf_pol_read_file(const char *path, const char *what, nf_policy_diag_fn fn, void *arg,
                             char **text, size_t *len)
{
    char why[160];
    nf_status_t rc = nf_file_read_all(path, NF_POL_MAX_DATA, text, len, why, sizeof(why));
    if (rc == NF_OK)
        return NF_OK;
    /* "cannot open: ENOENT text" reads better as "cannot open WHAT: ..." */
    if (strncmp(why, "cannot open: ", 13) == 0)
        nf_pol_diagf(fn, arg, NF_POLICY_ERROR, path, 0, "cannot open %s: %s", what, why + 13);
    else if (strncmp(why, "cannot read: ", 13) == 0)
        nf_pol_diagf(fn, arg, NF_POLICY_ERROR, path, 0, "cannot read %s: %s", what, why + 13);
    else
        nf_pol_diagf(fn, arg, NF_POLICY_ERROR, path, 0, "cannot read %s: %s", what, why);
    return rc == NF_ERR_CAPACITY ? NF_ERR_PARSE : rc;
}

/* ------------------------------------------------------- lines and fields */

int nf_pol_next_line(nf_pol_lines_t *it, const char **s, size_t *len)
{
    const char *nl;
    size_t n;

    if (it->pos >= it->end)
        return 0;
    nl = memchr(it->pos, '\n', (size_t)(it->end - it->pos));
    n = (size_t)((nl != NULL ? nl : it->end) - it->pos);
    *s = it->pos;
    it->pos += n + (nl != NULL);
    if (n > 0 && (*s)[n - 1] == '\r')
        n--;
    *len = n;
    it->line++;
    return 1;
}

int nf_pol_fields(const char *s, size_t len, nf_pol_field_t *f, int max)
{
    int n = 0;
    size_t i = 0;

    for (;;) {
        size_t start;
        while (i < len && nf_ascii_isspace((unsigned char)s[i]))
            i++;
        if (i == len)
            return n;
        start = i;
        while (i < len && !nf_ascii_isspace((unsigned char)s[i]))
            i++;
        if (n < max) {
            f[n].s = s + start;
            f[n].len = i - start;
        }
        n++;
    }
}

int nf_pol_comment(const char *s, size_t len)
{
    size_t i = 0;

    while (i < len && nf_ascii_isspace((unsigned char)s[i]))
        i++;
    return i == len || s[i] == '#';
}

const char *nf_pol_field_show(const nf_pol_field_t *f, char *buf, size_t size)
{
    size_t n = f->len < size - 4 ? f->len : size - 4, i;

    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)f->s[i];
        buf[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    strcpy(buf + i, n < f->len ? "..." : "");
    return buf;
}

nf_status_t nf_pol_field_u64(const nf_pol_field_t *f, uint64_t *v)
{
    char buf[32];

    if (f->len >= sizeof(buf))
        return NF_ERR_INVALID;
    memcpy(buf, f->s, f->len);
    buf[f->len] = '\0';
    return nf_pol_parse_u64(buf, 0, v);
}

nf_status_t nf_pol_name_check(const nf_pol_field_t *f, const char *label, char *why, size_t size)
{
    char show[48];

    if (f->len >= NF_POL_MAX_SEGNAME) {
        snprintf(why, size, "%s too long (%zu bytes; at most %d)", label, f->len, NF_POL_MAX_SEGNAME - 1);
        return NF_ERR_INVALID;
    }
    for (size_t i = 0; i < f->len; i++) {
        unsigned char c = (unsigned char)f->s[i];
        if (c < 0x21 || c > 0x7e) {
            snprintf(why, size, "%s '%s' has byte 0x%02x (expected printable ASCII, no spaces)", label,
                     nf_pol_field_show(f, show, sizeof(show)), c);
            return NF_ERR_INVALID;
        }
    }
    return NF_OK;
}
