#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The tuned-table checks with the measurement off: every entry must then be
# the highest ISA's own function, with no time measured.
CK_RUN_CASE=tuned NFCOLL_SIMD_TUNE=off exec ./tests/test_kernels
