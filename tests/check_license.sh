#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The license (issue 59, item 1): LICENSE holds the BSD 3-Clause text with
# the copyright holder "The libnfcoll authors", and every source file (C,
# headers, shell, Python, Fortran, awk, automake and autoconf fragments,
# the project's m4, the pkg-config template, man pages but .so stubs) says
# SPDX-License-Identifier: BSD-3-Clause in its first three lines. The files
# are git's list in a clone, the source folders' in a release tarball.
top=${srcdir:-.}
fail=0
tag='SPDX-License-Identifier: BSD-3-Clause'
if [ ! -f "$top/LICENSE" ]; then
  echo "FAIL - no LICENSE file in $top"; exit 1
fi
for want in 'BSD 3-Clause License' 'Copyright (c) 2026, The libnfcoll authors' \
    'Neither the name of the copyright holder'; do
  grep -qF "$want" "$top/LICENSE" || { echo "FAIL - LICENSE lacks '$want'"; fail=1; }
done
list() {
  if [ -e "$top/.git" ] && command -v git >/dev/null 2>&1; then
    (cd "$top" && git ls-files)
  else
    (cd "$top" && find lib include tools bench tests python man config .ci -type f 2>/dev/null
     ls Makefile.am configure.ac quickstart.sh nfcoll.pc.in 2>/dev/null)
  fi
}
n=0
for f in $(list | grep -E '\.(c|h|h\.in|sh|sh\.in|py|awk|am|inc|ac|f90|sym|toml|[1-8])$|^\.ci/run$|^nfcoll\.pc\.in$|^config/nf_[a-z_0-9]*\.m4$' |
           grep -v '^tests/fixtures/\|^docs/\|^config/aux/\|^tests/mpi_launcher\.sh$'); do
  [ -f "$top/$f" ] || continue
  case $f in man/*) head -1 "$top/$f" | grep -q '^\.so ' && continue ;; esac
  n=$((n + 1))
  head -3 "$top/$f" | grep -qF "$tag" || { echo "FAIL - $f: no '$tag' in its first 3 lines"; fail=1; }
done
[ $n -gt 200 ] || { echo "FAIL - only $n source files found under $top"; fail=1; }
[ $fail = 0 ] && echo "ok - LICENSE (BSD-3-Clause, The libnfcoll authors) and the SPDX line in $n source files"
exit $fail
