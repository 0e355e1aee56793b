/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Calibration (calib.c): a run that reduces every float-sum segment exactly
 * while it computes binary and ternary in shadow (with shadow residuals, as
 * if that route had run all along), measures per segment the cosine
 * similarity and relative L2 error of each against the exact result over
 * the first K calls, and writes a profile at MPI_Finalize that `route =
 * auto` reads. docs/design.md, "Calibration".
 */
#ifndef NF_CALIB_H
#define NF_CALIB_H

#include "nf_comm.h"
#include "nf_run.h"

/* Calibrate into path (NULL: no calibration), K calls per segment, admit
 * threshold for the profile's route. */
void nf_calib_init(const char *path, unsigned calls, double admit);
int nf_calib_on(void);

/* Run a fitting float-sum call (count > 0, on a ready communicator) cut
 * into seg: the exact result into recvbuf, and the shadows while some
 * segment has fewer than K calls. Collective like the call. */
nf_status_t nf_calib_run(nf_comm_t *c, const nf_run_args_t *a, nf_seg_t *seg, size_t nseg);

/* The profile name of a segment: its region, or buffer:BYTES. */
const char *nf_calib_name(const nf_seg_t *g, char *buf, size_t len);

/* Write the profile (one rank calls it) and forget the measurements. */
void nf_calib_finish(int write);

#endif
