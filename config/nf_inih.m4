# SPDX-License-Identifier: BSD-3-Clause
# NF_CHECK_INIH: libinih parses the admission policy file, required.
AC_DEFUN([NF_CHECK_INIH], [
  AC_ARG_WITH([inih], [AS_HELP_STRING([--with-inih], [libinih INI parser (required)])], [], [with_inih=guess])
  AS_IF([test "x$with_inih" = xno], [AC_MSG_ERROR([libnfcoll needs libinih to parse policy files; --without-inih is not supported])])
  PKG_CHECK_MODULES([INIH], [inih],
    [nf_inih_version="r`$PKG_CONFIG --modversion inih`"],
    [AC_CHECK_LIB([inih], [ini_parse_string],
       [INIH_LIBS=-linih; INIH_CFLAGS=; nf_inih_version="found (no pkg-config)"],
       [AC_MSG_ERROR([libinih not found. Debian: apt-get install libinih-dev])])])
])
