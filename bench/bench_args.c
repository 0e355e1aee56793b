/* SPDX-License-Identifier: BSD-3-Clause */
/* Command-line pieces the osu-style benchmarks share (bench_args.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_args.h"

int bench_size(const char *s, size_t *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        return -1;
    switch (*end) {
    case 'k': case 'K': v *= 1024; end++; break;
    case 'm': case 'M': v *= 1024 * 1024; end++; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end != '\0' || !isfinite(v) || v >= 0x1p63)
        return -1;
    *out = (size_t)v;
    return 0;
}

int bench_range(char *s, size_t *min, size_t *max)
{
    char *colon = strchr(s, ':');
    if (colon != NULL)
        *colon = '\0';
    if ((colon != NULL && bench_size(s, min) != 0) ||
        bench_size(colon != NULL ? colon + 1 : s, max) != 0 || *max < *min)
        return -1;
    return 0;
}
