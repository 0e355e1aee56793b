/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Kernel dispatch: what the CPU and the OS allow (cpuid + xgetbv), capped by
 * the ISAs this build compiled. Tables of unbuilt ISAs are never referenced.
 */
#include "config.h"

#include <stdint.h>

#include "nf_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define NF_X86 1
#endif

#ifdef NF_X86
/* xgetbv by opcode so this file needs no -mxsave. */
static uint64_t xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static nf_isa_t cpu_isa(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return NF_ISA_SCALAR;
    const int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, popcnt = (c >> 23) & 1;
    if (!osxsave || !avx || !popcnt || __get_cpuid_max(0, NULL) < 7)
        return NF_ISA_SCALAR;
    const uint64_t xcr = xcr0();
    if ((xcr & 0x6) != 0x6) /* XMM and YMM state */
        return NF_ISA_SCALAR;
    __cpuid_count(7, 0, a, b, c, d);
    const int avx2 = (b >> 5) & 1, bmi2 = (b >> 8) & 1;
    if (!avx2 || !bmi2)
        return NF_ISA_SCALAR;
    const int f = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
    if (f && dq && bw && vl && (xcr & 0xe0) == 0xe0) /* opmask, ZMM_Hi256, Hi16_ZMM */
        return NF_ISA_AVX512;
    return NF_ISA_AVX2;
}
#else
static nf_isa_t cpu_isa(void)
{
    return NF_ISA_SCALAR;
}
#endif

/* Highest ISA the CPU runs; cpuid can trap under a hypervisor, so ask once.
 * Racing first callers compute the same value. */
static nf_isa_t cpu_isa_cached(void)
{
    static int cached = -1;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        v = (int)cpu_isa();
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return (nf_isa_t)v;
}

const nf_kernels_t *nf_kernels_for(nf_isa_t isa)
{
    if ((int)isa < 0 || isa >= NF_ISA_COUNT || isa > cpu_isa_cached())
        return NULL;
    switch (isa) {
    case NF_ISA_SCALAR:
        return &nf_kernels_scalar;
#ifdef NF_HAVE_AVX2
    case NF_ISA_AVX2:
        return &nf_kernels_avx2;
#endif
#ifdef NF_HAVE_AVX512
    case NF_ISA_AVX512:
        return &nf_kernels_avx512;
#endif
    default:
        return NULL;
    }
}

nf_isa_t nf_isa_detect(void)
{
    for (int i = NF_ISA_COUNT - 1; i > 0; i--)
        if (nf_kernels_for((nf_isa_t)i))
            return (nf_isa_t)i;
    return NF_ISA_SCALAR;
}

const char *nf_isa_name(nf_isa_t isa)
{
    static const char *const names[NF_ISA_COUNT] = {"scalar", "avx2", "avx512"};
    return (int)isa >= 0 && isa < NF_ISA_COUNT ? names[isa] : NULL;
}
