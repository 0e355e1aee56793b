# SPDX-License-Identifier: BSD-3-Clause
# NF_CHECK_CHECK: the Check unit-test framework; without it make check fails loudly.
AC_DEFUN([NF_CHECK_CHECK], [
  AC_ARG_WITH([check], [AS_HELP_STRING([--with-check], [Check unit tests (default: guess)])], [], [with_check=guess])
  nf_check_version=no
  AS_IF([test "x$with_check" != xno],
    [PKG_CHECK_MODULES([CHECK], [check >= 0.11],
       [nf_check_version=`$PKG_CONFIG --modversion check`],
       [AS_IF([test "x$with_check" = xyes],
          [AC_MSG_ERROR([Check requested but not found. Debian: apt-get install check])],
          [AC_MSG_WARN([Check not found: unit tests cannot be built (Debian: apt-get install check)])])])])
  AM_CONDITIONAL([HAVE_CHECK], [test "x$nf_check_version" != xno])
])
