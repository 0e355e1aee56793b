# SPDX-License-Identifier: BSD-3-Clause
# NF_CHECK_NUMA: libnuma, required (binding and move_pages verification).
AC_DEFUN([NF_CHECK_NUMA], [
  AC_ARG_WITH([numa], [AS_HELP_STRING([--with-numa], [libnuma (required)])], [], [with_numa=guess])
  AS_IF([test "x$with_numa" = xno], [AC_MSG_ERROR([libnfcoll needs libnuma to bind the aggregation buffer; --without-numa is not supported])])
  PKG_CHECK_MODULES([NUMA], [numa],
    [nf_numa_version=`$PKG_CONFIG --modversion numa`],
    [AC_CHECK_LIB([numa], [numa_move_pages],
       [NUMA_LIBS=-lnuma; NUMA_CFLAGS=; nf_numa_version="found (no pkg-config)"],
       [AC_MSG_ERROR([libnuma not found. Debian: apt-get install libnuma-dev])])])
  AC_DEFINE_UNQUOTED([NF_NUMA_VERSION_STRING], ["$nf_numa_version"], [libnuma version at build time])
])
