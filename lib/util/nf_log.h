/* SPDX-License-Identifier: BSD-3-Clause */
/* Logging: one prefix, rank-aware, with warn-once support. No MPI calls. */
#ifndef NF_LOG_H
#define NF_LOG_H

#include <stdatomic.h>

/* Set once the MPI rank is known (-1 before). Messages then carry it. */
void nf_log_set_rank(int rank);
int nf_log_rank(void);

void nf_log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void nf_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Printed only when NFCOLL_VERBOSE >= level. */
void nf_log_info(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void nf_log_set_verbose(int level);

/* Warn once per call site for the life of the process. */
#define nf_log_warn_once(...)                                   \
    do {                                                        \
        static atomic_flag nf_once_ = ATOMIC_FLAG_INIT;         \
        if (!atomic_flag_test_and_set(&nf_once_))               \
            nf_log_warn(__VA_ARGS__);                           \
    } while (0)

/* Warn once, from one rank only: for conditions every rank sees alike. */
#define nf_log_warn_once_root(is_root, ...)                     \
    do {                                                        \
        if (is_root)                                            \
            nf_log_warn_once(__VA_ARGS__);                      \
    } while (0)

#endif
