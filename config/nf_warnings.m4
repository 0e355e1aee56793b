# SPDX-License-Identifier: BSD-3-Clause
# NF_CHECK_WARNINGS: the project builds clean under these.
AC_DEFUN([NF_CHECK_WARNINGS], [
  AC_ARG_ENABLE([werror], [AS_HELP_STRING([--enable-werror], [treat warnings as errors])], [], [enable_werror=no])
  NF_WARN_CFLAGS="-Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes"
  AS_IF([test "x$enable_werror" = xyes], [NF_WARN_CFLAGS="$NF_WARN_CFLAGS -Werror"])
  AC_SUBST([NF_WARN_CFLAGS])
  # Kernels must give the same bits on every ISA: no FMA contraction.
  AC_SUBST([NF_FP_CFLAGS], ["-ffp-contract=off -fno-fast-math"])
])
