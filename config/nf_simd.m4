# SPDX-License-Identifier: BSD-3-Clause
# NF_CHECK_SIMD: probe each ISA's compiler flags separately; kernels for an
# ISA are built in their own convenience library with only those flags.
AC_DEFUN([NF_CHECK_SIMD], [
  AC_ARG_ENABLE([avx2], [AS_HELP_STRING([--disable-avx2], [do not build AVX2 kernels])], [], [enable_avx2=yes])
  AC_ARG_ENABLE([avx512], [AS_HELP_STRING([--disable-avx512], [do not build AVX-512 kernels])], [], [enable_avx512=yes])
  nf_simd_summary=
  NF_AVX2_CFLAGS="-mavx2 -mbmi2 -mpopcnt"
  NF_AVX512_CFLAGS="-mavx512f -mavx512bw -mavx512vl -mavx512dq -mbmi2 -mpopcnt"
  nf_have_avx2=no
  AS_IF([test "x$enable_avx2" != xno], [
    nf_save_CFLAGS=$CFLAGS; CFLAGS="$CFLAGS $NF_AVX2_CFLAGS"
    AC_MSG_CHECKING([whether $CC builds AVX2 kernels])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <immintrin.h>]],
        [[__m256 v = _mm256_set1_ps(1.0f); return _mm256_movemask_ps(v);]])],
      [nf_have_avx2=yes], [])
    AC_MSG_RESULT([$nf_have_avx2]); CFLAGS=$nf_save_CFLAGS])
  nf_have_avx512=no
  AS_IF([test "x$enable_avx512" != xno], [
    nf_save_CFLAGS=$CFLAGS; CFLAGS="$CFLAGS $NF_AVX512_CFLAGS"
    AC_MSG_CHECKING([whether $CC builds AVX-512 kernels])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <immintrin.h>]],
        [[__m512 v = _mm512_set1_ps(1.0f); return (int)_mm512_movepi32_mask(_mm512_castps_si512(v));]])],
      [nf_have_avx512=yes], [])
    AC_MSG_RESULT([$nf_have_avx512]); CFLAGS=$nf_save_CFLAGS])
  AS_IF([test $nf_have_avx2 = yes], [AC_DEFINE([NF_HAVE_AVX2], [1], [AVX2 kernels built]) nf_simd_summary="$nf_simd_summary avx2"])
  AS_IF([test $nf_have_avx512 = yes], [AC_DEFINE([NF_HAVE_AVX512], [1], [AVX-512 kernels built]) nf_simd_summary="$nf_simd_summary avx512"])
  AM_CONDITIONAL([NF_HAVE_AVX2], [test $nf_have_avx2 = yes])
  AM_CONDITIONAL([NF_HAVE_AVX512], [test $nf_have_avx512 = yes])
  AC_SUBST([NF_AVX2_CFLAGS])
  AC_SUBST([NF_AVX512_CFLAGS])
  AC_DEFINE_UNQUOTED([NF_SIMD_BUILT], ["scalar$nf_simd_summary"], [kernel ISAs compiled in])
])
