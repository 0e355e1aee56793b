/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>

#include "nf_log.h"

static int nf_rank = -1;
static int nf_verbose;

void nf_log_set_rank(int rank) { nf_rank = rank; }
int nf_log_rank(void) { return nf_rank; }
void nf_log_set_verbose(int level) { nf_verbose = level; }

/* One fprintf per message so lines from different ranks do not interleave. */
static void nf_log_v(const char *what, const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (nf_rank >= 0)
        fprintf(stderr, "libnfcoll[%d]: %s%s\n", nf_rank, what, msg);
    else
        fprintf(stderr, "libnfcoll: %s%s\n", what, msg);
}

void nf_log_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nf_log_v("error: ", fmt, ap);
    va_end(ap);
}

void nf_log_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nf_log_v("warning: ", fmt, ap);
    va_end(ap);
}

void nf_log_info(int level, const char *fmt, ...)
{
    va_list ap;
    if (level > nf_verbose)
        return;
    va_start(ap, fmt);
    nf_log_v("", fmt, ap);
    va_end(ap);
}
