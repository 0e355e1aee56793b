# SPDX-License-Identifier: BSD-3-Clause
# NF_CHECK_XXHASH: libxxhash (XXH3-64) checksums residual checkpoints,
# required.
AC_DEFUN([NF_CHECK_XXHASH], [
  PKG_CHECK_MODULES([XXHASH], [libxxhash >= 0.8.0],
    [nf_xxhash_version="`$PKG_CONFIG --modversion libxxhash`"],
    [AC_CHECK_LIB([xxhash], [XXH3_64bits],
       [XXHASH_LIBS=-lxxhash; XXHASH_CFLAGS=; nf_xxhash_version="found (no pkg-config)"],
       [AC_MSG_ERROR([libxxhash (0.8 or later, for XXH3) not found. Debian: apt-get install libxxhash-dev])])])
])
