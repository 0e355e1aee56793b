# SPDX-License-Identifier: BSD-3-Clause
# NF_CHECK_HWLOC: hwloc >= 2.0 (memory attributes need 2.3), required.
AC_DEFUN([NF_CHECK_HWLOC], [
  AC_ARG_WITH([hwloc], [AS_HELP_STRING([--with-hwloc], [hwloc (required)])], [], [with_hwloc=guess])
  AS_IF([test "x$with_hwloc" = xno], [AC_MSG_ERROR([libnfcoll needs hwloc to find the CXL node; --without-hwloc is not supported])])
  PKG_CHECK_MODULES([HWLOC], [hwloc >= 2.3],
    [nf_hwloc_version=`$PKG_CONFIG --modversion hwloc`],
    [AC_CHECK_LIB([hwloc], [hwloc_memattr_get_value],
       [HWLOC_LIBS=-lhwloc; HWLOC_CFLAGS=; nf_hwloc_version="found (no pkg-config)"],
       [AC_MSG_ERROR([hwloc >= 2.3 not found. Debian: apt-get install libhwloc-dev])])])
  AC_DEFINE_UNQUOTED([NF_HWLOC_VERSION_STRING], ["$nf_hwloc_version"], [hwloc version at build time])
])
