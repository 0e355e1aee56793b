#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The nfcoll package as a Python user installs it (issue 59, item 4): a fresh
# virtual environment (python3 -m venv --system-site-packages: Debian's
# numpy and mpi4py stay visible), pip install --no-build-isolation
# --no-index of the tree's python/ (offline: Debian's setuptools and wheel),
# then `python -c "import nfcoll; ..."` on 2 ranks under the tree's launcher:
# the venv's copy imported, nfcoll.__version__ configure.ac's and the
# library's, one allreduce summed. Then the order the package finds its
# library in (python/nfcoll/_lib.py), with copies of the build as the
# configured libdir (NFCOLL_LIBDIR at pip install) and as a system-wide
# install on the loader's path: NFCOLL_LIBRARY before both, the configured
# libdir before the loader's path, a preloaded library before all, the
# loader's path last (warning that the libdir had none), and an
# NFCOLL_LIBRARY that cannot be loaded fails the import. pip uninstall
# removes every file; the source tree is left as it was; the venv is removed.
. "${srcdir:-.}/tests/mpi_common.sh"
. "$srcdir/tests/python_common.sh"
py_need numpy mpi4py
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
venv=$tmp/venv vpy=$tmp/venv/bin/python
if ! "$py" -m venv --system-site-packages "$venv" > "$tmp/venv.out" 2>&1; then
  echo "SKIP: $py -m venv cannot make a virtual environment with pip" \
    "(Debian: apt-get install python3-venv): $(tail -1 "$tmp/venv.out")"
  exit 77
fi
for m in pip setuptools wheel; do
  if ! "$vpy" -c "import $m" >/dev/null 2>&1; then
    echo "SKIP: the virtual environment cannot import $m (Debian: apt-get install python3-$m)"
    exit 77
  fi
done
ver=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' config.h)
site=$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
real=$(readlink -f "$lib")
mkdir "$tmp/libdir" "$tmp/system"
cp "$real" "$tmp/libdir/libnfcoll.so.0"   # the package's own library
cp "$real" "$tmp/system/libnfcoll.so.0"   # one installed system-wide
srcfiles() { (cd "$top/python" && find . -name __pycache__ -prune -o -print | sort); }
srcfiles > "$tmp/src.before"

# pip install ./python, offline and without the user's pip configuration
if (cd "$top" && PIP_CONFIG_FILE=/dev/null NFCOLL_LIBDIR=$tmp/libdir "$vpy" -m pip install \
      --no-build-isolation --no-index --disable-pip-version-check ./python) > "$tmp/pip.out" 2>&1 &&
   [ -f "$site/nfcoll/__init__.py" ] && [ -d "$site/nfcoll-$ver.dist-info" ]; then
  echo "ok - pip install ./python: nfcoll $ver into $site"
else
  echo "FAIL - pip install ./python (nfcoll $ver into $site)"; cat "$tmp/pip.out"; finish
fi
srcfiles > "$tmp/src.after"
same "$tmp/src.before" "$tmp/src.after" "pip install left the source tree's python/ as it was"

prog='import nfcoll
import numpy as np
from mpi4py import MPI
c = MPI.COMM_WORLD
x = np.full(1000, c.Get_rank() + 1, np.float32)
nfcoll.allreduce(x)
ok = (x == c.Get_size() * (c.Get_size() + 1) // 2).all()
line = "%s %s version=%s file=%s sum=%s" % (nfcoll.__version__, nfcoll.library(), nfcoll.version(),
                                           nfcoll.__file__, "ok" if ok else "wrong %s" % x[:4])
lines = c.gather(line)  # one line per rank, from rank 0: not interleaved
if c.Get_rank() == 0:
    print("\n".join(lines))'
# pyrun WHAT HOW PATH [VAR=VALUE]...: both ranks print the venv's package,
# version $ver, the library PATH found by HOW, and the right sum
pyrun() {
  what=$1 want="$ver Library(path='$3', how='$2') version=$ver file=$site/nfcoll/__init__.py sum=ok"
  shift 3
  out "$tmp/out" 2 PYTHONPATH= LD_LIBRARY_PATH="$tmp/system${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$@" "$vpy" -c "$prog"
  if [ "$(grep -cxF "$want" "$tmp/out")" = 2 ]; then
    echo "ok - $what: $want"
  else
    echo "FAIL - $what: expected on both ranks: $want"; cat "$tmp/out" "$tmp/out.err"; nf_failed=1
  fi
}
pyrun "NFCOLL_LIBRARY, before the configured libdir and the loader's path" \
  NFCOLL_LIBRARY "$lib" NFCOLL_LIBRARY="$lib"
pyrun "the configured libdir, before the loader's path" \
  libdir "$tmp/libdir/libnfcoll.so.0" NFCOLL_LIBRARY=
pyrun "LD_PRELOAD, before NFCOLL_LIBRARY" preloaded "$lib" LD_PRELOAD="$lib" NFCOLL_LIBRARY="$lib"
rm "$tmp/libdir/libnfcoll.so.0"
pyrun "the loader's path, last" loader "$tmp/system/libnfcoll.so.0" NFCOLL_LIBRARY=
if grep -q "no libnfcoll.so.0 in the configured libdir $tmp/libdir" "$tmp/out.err"; then
  echo "ok - the loader's path: a warning names the configured libdir that had none"
else
  echo "FAIL - the loader's path: no warning naming the configured libdir"; cat "$tmp/out.err"
  nf_failed=1
fi
sh "$srcdir/tests/mpi_run.sh" 2 PYTHONPATH= LD_LIBRARY_PATH="$tmp/system${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  NFCOLL_LIBRARY="$tmp/missing.so" "$vpy" -c "$prog" > "$tmp/out" 2>&1
rc=$?
[ $rc = 77 ] && exit 77
if [ $rc != 0 ] && grep -q "NFCOLL_LIBRARY=$tmp/missing.so cannot be loaded (nothing else is tried)" \
     "$tmp/out" && ! grep -q "sum=ok" "$tmp/out"; then
  echo "ok - an NFCOLL_LIBRARY that cannot be loaded fails the import (exit $rc), nothing else tried"
else
  echo "FAIL - NFCOLL_LIBRARY=$tmp/missing.so: exit $rc"; cat "$tmp/out"; nf_failed=1
fi

if PIP_CONFIG_FILE=/dev/null "$vpy" -m pip uninstall -y nfcoll > "$tmp/pip.out" 2>&1 &&
   [ ! -e "$site/nfcoll" ] && [ ! -e "$site/nfcoll-$ver.dist-info" ]; then
  echo "ok - pip uninstall nfcoll removed every file"
else
  echo "FAIL - pip uninstall nfcoll"; cat "$tmp/pip.out"; ls -R "$site/nfcoll" 2>&1; nf_failed=1
fi
finish
