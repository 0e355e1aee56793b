# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the tests/python_*.sh tests after tests/mpi_common.sh: the
# interpreter configure chose (NF_PYTHON, exported by make), the package from
# the source tree (PYTHONPATH=$pypath) and the library just built
# (NFCOLL_LIBRARY=$lib, or LD_PRELOAD=$lib): the package takes NFCOLL_LIBRARY
# before its configured libdir and the loader's path and tries nothing else,
# so a libnfcoll installed elsewhere is never the one tested
# (tests/python/test_nfcoll.py checks the library and package in use).
py=${NF_PYTHON:-/usr/bin/python3}
top=$(cd "$srcdir" && pwd)
lib=$PWD/lib/.libs/libnfcoll.so
fail=$PWD/tests/.libs/libnf_fail_pmpi.so  # PMPI stand-ins that fail once armed
pypath=$top/python:$top/tests/python

# py_need MODULE...: SKIP unless the interpreter imports them all.
py_need() {
  if [ "$py" = : ] || ! command -v "$py" >/dev/null 2>&1; then
    echo "SKIP: no Python 3 interpreter (configure found none; PYTHON=... ./configure)"; exit 77
  fi
  for m in "$@"; do
    if ! "$py" -c "import $m" >/dev/null 2>&1; then
      echo "SKIP: $py cannot import $m (Debian: apt-get install python3-$m)"; exit 77
    fi
  done
  case " $* " in *" mpi4py "*) py_same_mpi ;; esac
  if [ ! -f "$lib" ]; then
    echo "SKIP: no shared library $lib (configured with --disable-shared?)"; exit 77
  fi
  if ldd "$lib" 2>/dev/null | grep -q libasan; then
    echo "SKIP: libnfcoll is built with sanitizers; $py cannot load it (the ASan runtime must come first)"
    exit 77
  fi
}

# py_same_mpi: SKIP unless mpi4py is built against the MPI family libnfcoll
# is (one process cannot load two MPI libraries).
py_same_mpi() {
  v=$("$py" -c 'import mpi4py; mpi4py.rc.initialize = False
from mpi4py import MPI; print(MPI.get_vendor()[0])' 2>/dev/null)
  case $NF_MPI_FAMILY:$v in
    openmpi:"Open MPI"|mpich:MPICH|mpich:"Intel MPI"|mpich:MVAPICH*|unknown:*) ;;
    *) echo "SKIP: $py's mpi4py is built against ${v:-an unknown MPI}, libnfcoll against" \
         "$NF_MPI_FAMILY; they must use the same MPI (Debian's python3-mpi4py is Open MPI's)"
       exit 77 ;;
  esac
}

# py_regions FILE: the stats JSON's regions as "name:route[,route] ...", sorted.
py_regions() {
  "$py" -c 'import json, sys
r = json.load(open(sys.argv[1])).get("regions", {})
print(" ".join(sorted(k + ":" + ",".join(sorted(v)) for k, v in r.items())))' "$1"
}

# expect_regions FILE WANT WHAT: one ok/FAIL line.
expect_regions() {
  got=$(py_regions "$1" 2>&1)
  if [ "$got" = "$2" ]; then
    echo "ok - $3: regions in the stats JSON: $got"
  else
    echo "FAIL - $3: regions in the stats JSON: '$got', expected '$2'"; nf_failed=1
  fi
}
