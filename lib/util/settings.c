/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>

#include "nf_kernels.h"
#include "nf_log.h"
#include "nf_settings.h"
#include "nf_util.h"

static const nf_setting_desc_t nf_settings_desc[NF_SET_COUNT] = {
    [NF_SET_EF] = {"NFCOLL_EF", "on", "on|off",
                   "error feedback for the binary and ternary routes"},
    [NF_SET_EF_DECAY] = {"NFCOLL_EF_DECAY", "1", "number in [0, 1]",
                         "error-feedback decay: the next call adds ef_decay * e, not e "
                         "(1: the whole residual; a rule's ef_decay and route = auto's "
                         "profile win; calibration's binary and ternary shadows run 0.25 unless "
                         "it is set)"},
    [NF_SET_SCALE_BLOCK] = {"NFCOLL_SCALE_BLOCK", "0", "0|multiple of 512",
                            "binary: one scale per block of this many elements (whole "
                            "512-bit lines), not one per segment (0; a rule's scale_block "
                            "wins)"},
    [NF_SET_TERNARY_GAMMA] = {"NFCOLL_TERNARY_GAMMA", "1.0", "number >= 0",
                              "ternary gate factor: |y| > gamma * mean|y| sends +-1"},
    [NF_SET_SIMD] = {"NFCOLL_SIMD", "avx512", "scalar|avx2|avx512",
                     "highest kernel ISA to use (capped by the CPU)"},
    [NF_SET_CXL] = {"NFCOLL_CXL", "prefer", "require|prefer|off",
                    "place the aggregation buffer on the CXL memory node"},
    [NF_SET_CXL_NODE] = {"NFCOLL_CXL_NODE", "auto", "auto|OS node index",
                         "use this NUMA node as the CXL node"},
    [NF_SET_POLICY] = {"NFCOLL_POLICY", "", "path",
                       "admission policy file (unset: every call takes pmpi)"},
    [NF_SET_STATS] = {"NFCOLL_STATS", "", "1|path.json",
                      "print (1) or write (path.json) traffic statistics at MPI_Finalize"},
    [NF_SET_TRACE] = {"NFCOLL_TRACE", "", "path",
                      "write one record per allreduce call for replay"},
    [NF_SET_COUNT_BITS] = {"NFCOLL_COUNT_BITS", "16", "1..16",
                           "sign-count lane width: larger communicators fall back to fp32"},
    [NF_SET_VERBOSE] = {"NFCOLL_VERBOSE", "0", "0..3", "diagnostic output level"},
    [NF_SET_RANKS_PER_NODE] = {"NFCOLL_RANKS_PER_NODE", "0", "0|N",
                               "testing: treat each N consecutive ranks as one node (0: real nodes)"},
    [NF_SET_SIMD_TUNE] = {"NFCOLL_SIMD_TUNE", "on", "on|off",
                          "time each kernel's AVX2 and AVX-512 versions at initialization "
                          "(about 20 ms) and keep the faster; off: every kernel is the highest "
                          "ISA under NFCOLL_SIMD"},
    [NF_SET_CALIBRATE] = {"NFCOLL_CALIBRATE", "", "path",
                          "calibration run: reduce exactly, measure every low-bit route in "
                          "shadow, write the profile here at MPI_Finalize (wins over the "
                          "policy's calibrate)"},
    [NF_SET_RESIDUAL_MAX] = {"NFCOLL_RESIDUAL_MAX", "auto", "auto|off|bytes[K|M|G|T]",
                             "error-feedback residuals one process keeps, over all its "
                             "communicators; beyond it the least recently used are dropped "
                             "(auto: a quarter of the CXL node's memory, or of this machine's "
                             "without one)"},
    [NF_SET_PROGRESS] = {"NFCOLL_PROGRESS", "thread", "thread|off",
                         "who runs nonblocking calls (NF_Iallreduce, MPI_Iallreduce): a library "
                         "thread, which needs MPI_THREAD_MULTIPLE (the shim asks for it), or, "
                         "off, the caller when it issues them (counted as fallback no-progress)"},
    [NF_SET_PROGRESS_CPU] = {"NFCOLL_PROGRESS_CPU", "none", "none|CPU index",
                             "pin the progress threads to this CPU (none: the CPUs of the thread "
                             "that started them, where they compete with the rank for its core)"},
    [NF_SET_STALL_WARN] = {"NFCOLL_STALL_WARN", "60", "seconds (0: off)",
                           "a nonblocking call still waiting for its peers after this many "
                           "seconds says so once: its communicator, call index and the ranks "
                           "that have not arrived"},
};

static pthread_mutex_t nf_settings_lock = PTHREAD_MUTEX_INITIALIZER;
static nf_settings_t nf_settings_cache;
static int nf_settings_loaded;

const nf_setting_desc_t *nf_settings_table(size_t *n)
{
    *n = NF_SET_COUNT;
    return nf_settings_desc;
}

const char *nf_setting_raw(nf_setting_id_t id)
{
    const char *v = getenv(nf_settings_desc[id].name);
    return (v != NULL && v[0] != '\0') ? v : NULL;
}

static void nf_settings_bad(nf_setting_id_t id, const char *v)
{
    const nf_setting_desc_t *d = &nf_settings_desc[id];
    if (nf_log_rank() > 0) /* every rank parses the same environment: rank 0 speaks */
        return;
    nf_log_warn("%s='%s' is not valid (expected %s); using the default '%s'",
                d->name, v, d->values, d->def);
}

static void nf_load_ef(nf_settings_t *s)
{
    const char *v = nf_setting_raw(NF_SET_EF);
    if (v != NULL && nf_parse_bool(v, &s->ef) != NF_OK)
        nf_settings_bad(NF_SET_EF, v);
    v = nf_setting_raw(NF_SET_SIMD_TUNE);
    if (v != NULL && nf_parse_bool(v, &s->simd_tune) != NF_OK)
        nf_settings_bad(NF_SET_SIMD_TUNE, v);
}

static void nf_load_gamma(nf_settings_t *s)
{
    const char *v = nf_setting_raw(NF_SET_TERNARY_GAMMA);
    double g;
    if (v == NULL)
        return;
    if (nf_parse_double(v, &g) != NF_OK || g < 0.0)
        nf_settings_bad(NF_SET_TERNARY_GAMMA, v);
    else
        s->gamma = g;
}

static void nf_load_ef_decay(nf_settings_t *s)
{
    const char *v = nf_setting_raw(NF_SET_EF_DECAY);
    double d;
    if (v == NULL)
        return;
    if (nf_parse_double(v, &d) != NF_OK || !(d >= 0.0 && d <= 1.0))
        nf_settings_bad(NF_SET_EF_DECAY, v);
    else
        s->ef_decay = d, s->ef_decay_set = 1;
}

static void nf_load_scale_block(nf_settings_t *s)
{
    const char *v = nf_setting_raw(NF_SET_SCALE_BLOCK);
    long b;
    if (v == NULL)
        return;
    if (nf_parse_long(v, 0, NF_SCALE_BLOCK_MAX, &b) != NF_OK || b % NF_SCALE_BLOCK_UNIT != 0)
        nf_settings_bad(NF_SET_SCALE_BLOCK, v);
    else
        s->scale_block = (uint64_t)b;
}

static void nf_load_simd(nf_settings_t *s)
{
    const char *v = nf_setting_raw(NF_SET_SIMD);
    if (v == NULL)
        return;
    for (int isa = 0; isa < NF_ISA_COUNT; isa++) {
        if (nf_strcaseeq(v, nf_isa_name((nf_isa_t)isa))) {
            s->simd_cap = isa;
            return;
        }
    }
    nf_settings_bad(NF_SET_SIMD, v);
}

static void nf_load_cxl(nf_settings_t *s)
{
    static const char *const modes[] = {[NF_CXL_PREFER] = "prefer",
                                        [NF_CXL_REQUIRE] = "require",
                                        [NF_CXL_OFF] = "off"};
    const char *v = nf_setting_raw(NF_SET_CXL);
    long node;
    if (v != NULL) {
        int i;
        for (i = 0; i < 3 && !nf_strcaseeq(v, modes[i]); i++)
            ;
        if (i < 3)
            s->cxl = (nf_cxl_mode_t)i;
        else
            nf_settings_bad(NF_SET_CXL, v);
    }
    v = nf_setting_raw(NF_SET_CXL_NODE);
    if (v != NULL && !nf_strcaseeq(v, "auto")) {
        if (nf_parse_long(v, 0, 65535, &node) == NF_OK)
            s->cxl_node = (int)node;
        else
            nf_settings_bad(NF_SET_CXL_NODE, v);
    }
}

static void nf_load_ints(nf_settings_t *s)
{
    const char *v = nf_setting_raw(NF_SET_COUNT_BITS);
    long l;
    if (v != NULL) {
        if (nf_parse_long(v, 1, NF_COUNT_PLANES_MAX, &l) == NF_OK)
            s->count_bits = (unsigned)l;
        else
            nf_settings_bad(NF_SET_COUNT_BITS, v);
    }
    v = nf_setting_raw(NF_SET_RANKS_PER_NODE);
    if (v != NULL) {
        if (nf_parse_long(v, 0, 1 << 20, &l) == NF_OK)
            s->ranks_per_node = (int)l;
        else
            nf_settings_bad(NF_SET_RANKS_PER_NODE, v);
    }
    v = nf_setting_raw(NF_SET_VERBOSE);
    if (v != NULL) {
        if (nf_parse_long(v, 0, 3, &l) == NF_OK)
            s->verbose = (int)l;
        else
            nf_settings_bad(NF_SET_VERBOSE, v);
    }
}

static void nf_load_progress(nf_settings_t *s)
{
    const char *v = nf_setting_raw(NF_SET_PROGRESS);
    long cpu;
    if (v != NULL && nf_strcaseeq(v, "off"))
        s->progress = NF_PROGRESS_OFF;
    else if (v != NULL && !nf_strcaseeq(v, "thread"))
        nf_settings_bad(NF_SET_PROGRESS, v);
    v = nf_setting_raw(NF_SET_PROGRESS_CPU);
    if (v == NULL || nf_strcaseeq(v, "none"))
        return;
    if (nf_parse_long(v, 0, 65535, &cpu) == NF_OK)
        s->progress_cpu = (int)cpu;
    else
        nf_settings_bad(NF_SET_PROGRESS_CPU, v);
}

static void nf_load_stall(nf_settings_t *s)
{
    const char *v = nf_setting_raw(NF_SET_STALL_WARN);
    double t = 0.0;
    if (v == NULL)
        return;
    if (nf_parse_double(v, &t) == NF_OK && t >= 0.0 && t <= 1e9)
        s->stall_warn = t;
    else
        nf_settings_bad(NF_SET_STALL_WARN, v);
}

static void nf_load_residual_max(nf_settings_t *s)
{
    const char *v = nf_setting_raw(NF_SET_RESIDUAL_MAX);
    uint64_t b;
    if (v == NULL || nf_strcaseeq(v, "auto"))
        return;
    if (nf_strcaseeq(v, "off"))
        s->residual_max = NF_RESIDUAL_MAX_OFF;
    else if (nf_parse_size(v, &b) == NF_OK && b > 0 && b != NF_RESIDUAL_MAX_OFF)
        s->residual_max = b;
    else
        nf_settings_bad(NF_SET_RESIDUAL_MAX, v);
}

const nf_settings_t *nf_settings_load(void)
{
    pthread_mutex_lock(&nf_settings_lock);
    if (!nf_settings_loaded) {
        nf_settings_t s = {
            .ef = 1, .ef_decay = 1.0, .gamma = 1.0, .simd_cap = NF_ISA_COUNT - 1,
            .cxl = NF_CXL_PREFER, .cxl_node = -1, .count_bits = NF_COUNT_PLANES_MAX, .verbose = 0,
            .simd_tune = 1, .progress = NF_PROGRESS_THREAD, .progress_cpu = -1,
            .stall_warn = 60.0,
        };
        nf_load_ints(&s);
        nf_log_set_verbose(s.verbose);
        nf_load_ef(&s);
        nf_load_gamma(&s);
        nf_load_ef_decay(&s);
        nf_load_scale_block(&s);
        nf_load_simd(&s);
        nf_load_cxl(&s);
        nf_load_residual_max(&s);
        nf_load_progress(&s);
        nf_load_stall(&s);
        s.policy = nf_setting_raw(NF_SET_POLICY);
        s.stats = nf_setting_raw(NF_SET_STATS);
        s.trace = nf_setting_raw(NF_SET_TRACE);
        s.calibrate = nf_setting_raw(NF_SET_CALIBRATE);
        nf_settings_cache = s;
        nf_settings_loaded = 1;
    }
    pthread_mutex_unlock(&nf_settings_lock);
    return &nf_settings_cache;
}

void nf_settings_reset(void)
{
    pthread_mutex_lock(&nf_settings_lock);
    nf_settings_loaded = 0;
    pthread_mutex_unlock(&nf_settings_lock);
}
