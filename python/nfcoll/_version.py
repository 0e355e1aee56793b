# SPDX-License-Identifier: BSD-3-Clause
"""The package's version: one source of truth, configure.ac's AC_INIT (the
library's PACKAGE_VERSION, which nf_version() returns).

make writes it into _build.py (VERSION) for make install, and setup.py
writes it into the _build.py of the package pip builds; a package run
from a source tree without either (PYTHONPATH=python, a VPATH build)
reads the tree's configure.ac. No imports beyond the standard library:
setup.py loads this file by its path, without the package (whose import
starts MPI).
"""

import os
import re

_AC_INIT = re.compile(r"AC_INIT\(\s*\[?[^],]*\]?\s*,\s*\[?\s*([^],\s]+)")


def from_configure_ac(path):
    """The version AC_INIT names in the configure.ac at path, or None."""
    try:
        with open(path, encoding="utf-8") as f:
            m = _AC_INIT.search(f.read())
    except OSError:
        return None
    return m.group(1) if m else None


def version():
    """_build.VERSION, else the source tree's configure.ac, else "unknown"."""
    try:
        from . import _build
        v = getattr(_build, "VERSION", None)
        if v:
            return v
    except ImportError:
        pass
    here = os.path.dirname(os.path.abspath(__file__))
    return from_configure_ac(os.path.join(here, os.pardir, os.pardir, "configure.ac")) or "unknown"
