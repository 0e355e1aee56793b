/* SPDX-License-Identifier: BSD-3-Clause */
/* Symbol visibility. The library builds with -fvisibility=hidden; only the
 * public API and the interposed MPI_* carry NF_EXPORT. Kept apart from
 * nf_log.h so exporting a symbol does not pull in logging. */
#ifndef NF_EXPORT_H
#define NF_EXPORT_H

#define NF_EXPORT __attribute__((visibility("default")))

#endif
