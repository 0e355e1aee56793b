# SPDX-License-Identifier: BSD-3-Clause
# NF_CHECK_PYTHON: the interpreter the Python package (python/nfcoll) is
# installed for and tested with. Debian's /usr/bin/python3 is the one that
# sees python3-numpy, python3-mpi4py and python3-torch, so it is preferred
# over whatever python3 comes first on PATH (pyenv, a venv); PYTHON=...
# chooses another. Without Python 3 nothing fails: the package is not
# installed and its tests SKIP.
AC_DEFUN([NF_CHECK_PYTHON], [
  AC_ARG_VAR([PYTHON], [Python 3 interpreter for the nfcoll package (default /usr/bin/python3)])
  AS_IF([test -z "$PYTHON" && test -x /usr/bin/python3], [PYTHON=/usr/bin/python3])
  AM_PATH_PYTHON([3.7], [], [PYTHON=:])
  # Debian's interpreters read PREFIX/lib/python3.X/dist-packages, not the
  # site-packages AM_PATH_PYTHON names: take dist-packages where it is on
  # the interpreter's path (make install pythondir=DIR chooses another).
  AS_IF([test "x$PYTHON" != x:], [
    nf_py_prefix=$prefix
    test "x$nf_py_prefix" = xNONE && nf_py_prefix=$ac_default_prefix
    AS_IF([$PYTHON -c "import sys; sys.exit('$nf_py_prefix/lib/python$PYTHON_VERSION/dist-packages' not in sys.path)" 2>/dev/null],
      [pythondir='${prefix}'/lib/python$PYTHON_VERSION/dist-packages])])
  nf_python_summary="not found (the nfcoll package is not installed; its tests SKIP)"
  AS_IF([test "x$PYTHON" != x:], [
    nf_python_mods=
    for nf_m in numpy mpi4py torch matplotlib; do
      AS_IF([$PYTHON -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$nf_m') is None)" 2>/dev/null],
        [nf_python_mods="$nf_python_mods $nf_m"], [nf_python_mods="$nf_python_mods no-$nf_m"])
    done
    nf_python_summary="$PYTHON ($PYTHON_VERSION;$nf_python_mods), into $pythondir"])
  AM_CONDITIONAL([HAVE_PYTHON], [test "x$PYTHON" != x:])
])
