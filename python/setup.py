# SPDX-License-Identifier: BSD-3-Clause
"""pip install ./python: what pyproject.toml cannot say statically.

version: configure.ac's AC_INIT (../configure.ac, in a clone or a release
tarball), else the PKG-INFO of an sdist built from here.

nfcoll/_build.py, written into the package pip installs (never into the
source tree): VERSION, and LIBDIR, the configured libdir the package loads
libnfcoll.so.0 from after LD_PRELOAD and NFCOLL_LIBRARY and before the
loader's path (python/nfcoll/_lib.py), the first of
  NFCOLL_LIBDIR=DIR given to pip install;
  the libdir make wrote into nfcoll/_build.py (a tree configured in place);
  pkg-config --variable=libdir nfcoll (the libnfcoll installed where
  pkg-config finds it, as a C program's build would);
  none: the package then finds the library by NFCOLL_LIBRARY, else the
  loader's path.
"""

import atexit
import importlib.util
import os
import runpy
import shutil
import subprocess
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def _version_module():
    """nfcoll/_version.py, loaded by its path: importing nfcoll starts MPI."""
    spec = importlib.util.spec_from_file_location(
        "_nfcoll_version", os.path.join(HERE, "nfcoll", "_version.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def version():
    v = _version_module().from_configure_ac(os.path.join(HERE, os.pardir, "configure.ac"))
    if v:
        return v
    try:
        with open(os.path.join(HERE, "PKG-INFO"), encoding="utf-8") as f:
            for line in f:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    raise SystemExit("nfcoll: no version: neither %s nor PKG-INFO found"
                     % os.path.normpath(os.path.join(HERE, os.pardir, "configure.ac")))


def libdir():
    """(LIBDIR or None, where it came from)."""
    env = os.environ.get("NFCOLL_LIBDIR")
    if env:
        return os.path.abspath(env), "from NFCOLL_LIBDIR"
    made = os.path.join(HERE, "nfcoll", "_build.py")
    if os.path.exists(made):
        d = runpy.run_path(made).get("LIBDIR")
        if d:
            return d, "from configure (make's nfcoll/_build.py)"
    try:
        r = subprocess.run(["pkg-config", "--variable=libdir", "nfcoll"],
                           capture_output=True, text=True, check=False)
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip(), "from pkg-config --variable=libdir nfcoll"
    except OSError:
        pass
    return None, "none: no NFCOLL_LIBDIR, no make-written nfcoll/_build.py, no nfcoll.pc"


class BuildPy(build_py):
    """build_py, then _build.py (and the LICENSE) into the built package."""

    def run(self):
        super().run()
        pkg = os.path.join(self.build_lib, "nfcoll")
        self.mkpath(pkg)
        d, origin = libdir()
        with open(os.path.join(pkg, "_build.py"), "w", encoding="utf-8") as f:
            f.write('"""Written by pip install (python/setup.py). LIBDIR: the configured\n'
                    'libdir, %s. VERSION: configure.ac\'s."""\n'
                    'LIBDIR = %r\nVERSION = %r\n' % (origin, d, self.distribution.get_version()))
        lic = os.path.join(HERE, os.pardir, "LICENSE")
        if os.path.exists(lic):
            shutil.copyfile(lic, os.path.join(pkg, "LICENSE"))


# setuptools' build/ and nfcoll.egg-info/ go to a directory of its own, not
# into the source tree (which may be read-only: make distcheck)
_work = tempfile.mkdtemp(prefix="nfcoll-setup-")
atexit.register(shutil.rmtree, _work, True)
setup(version=version(), cmdclass={"build_py": BuildPy},
      options={"build": {"build_base": os.path.join(_work, "build")},
               "egg_info": {"egg_base": _work}})
