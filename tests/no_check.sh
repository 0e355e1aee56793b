#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Stands in for the Check unit tests when configure did not find Check.
echo "SKIP: the Check unit tests (kernels, topology, policy) were not built: Check was not found at configure time (Debian: apt-get install check)"
exit 77
