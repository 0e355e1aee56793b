# SPDX-License-Identifier: BSD-3-Clause
"""Finding libnfcoll.so, starting MPI through it, and declaring its C
functions for ctypes.

Which library, in this order; the first that applies decides, and
nfcoll.library() says which (path, how):

  1. "preloaded": a libnfcoll already in the process (LD_PRELOAD, or a
     program linked with -lnfcoll). It always wins: one process uses one
     copy, never a second with state of its own (NFCOLL_LIBRARY naming
     another file is then ignored, with a warning).
  2. "NFCOLL_LIBRARY": the file that variable names, when it is set and not
     empty. Only that file: if it cannot be loaded, import fails (OSError);
     nothing else is tried, so a library installed elsewhere can never stand
     in for the one asked for.
  3. "libdir": libnfcoll.so.0 in the configured libdir (_build.LIBDIR: the
     libdir configure gave make install, or the one pip install recorded:
     NFCOLL_LIBDIR, else the source tree's configured libdir, else
     pkg-config's for nfcoll), when that file exists. If it exists but
     cannot be loaded, import fails.
  4. "loader": libnfcoll.so.0 through the dynamic loader's path
     (LD_LIBRARY_PATH, then ld.so.cache: a system-wide install), with a
     warning when a configured libdir was known but held no library.

So the package's own library (3) comes before one the loader happens to
know (4), and an explicit NFCOLL_LIBRARY before both: the in-tree tests set
it to the build's lib/.libs/libnfcoll.so.

MPI_Init: when MPI is not initialized yet, nfcoll initializes it through
libnfcoll's own MPI_Init_thread (the one LD_PRELOAD would interpose), so the
ranks agree on the policy, stats and trace settings at MPI_Init as in a
preloaded program, and registers libnfcoll's MPI_Finalize (stats report,
then PMPI_Finalize) to run at exit; mpi4py then finds MPI initialized and
leaves finalization to nfcoll. When MPI was initialized before nfcoll was
imported (mpi4py imported first, not preloaded), libnfcoll starts at its
first call, the ranks compare policies per communicator, and nothing
writes NFCOLL_STATS at exit.

Functions added in later releases (NF_Health_report, NF_Residuals_save,
NF_Residuals_load, NF_Iallreduce, NF_Iallreduce_route) are looked up at first use: an older library still loads,
and only a call that needs one says that the library is too old.
"""

import atexit
import ctypes
import os
import warnings


class RouteStats(ctypes.Structure):
    """nf_route_stats_t"""
    _fields_ = [("calls", ctypes.c_uint64), ("bytes", ctypes.c_uint64),
                ("upstream_bytes", ctypes.c_uint64), ("total_bytes", ctypes.c_uint64),
                ("fp32_ring_bytes", ctypes.c_uint64)]


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _declare(lib, name, sig):
    fn = getattr(lib, name)
    fn.restype, fn.argtypes = sig
    return fn


def _path_of(fn):
    """The file a loaded function lives in (dladdr), or None."""
    try:
        dladdr = ctypes.CDLL(None).dladdr
    except (OSError, AttributeError):
        return None
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    info = _DlInfo()
    if not dladdr(ctypes.cast(fn, ctypes.c_void_p), ctypes.byref(info)) or not info.dli_fname:
        return None
    return os.fsdecode(info.dli_fname)


SONAME = "libnfcoll.so.0"
# how the library in use was found: library().how
PRELOADED, ENV, LIBDIR, LOADER = "preloaded", "NFCOLL_LIBRARY", "libdir", "loader"


def _configured_libdir():
    """_build.LIBDIR (written by make, or by pip install), or None."""
    try:
        from . import _build
    except ImportError:
        return None
    return getattr(_build, "LIBDIR", None) or None


def _load(name):
    lib = ctypes.CDLL(name)
    if not hasattr(lib, "nf_version"):
        raise OSError("%s: not a libnfcoll (no nf_version)" % name)
    return lib, _path_of(lib.nf_version) or name


def _open():
    """(CDLL, path, how) of the libnfcoll to use, found in the order the
    module's docstring gives; OSError when none."""
    glob = ctypes.CDLL(None)  # the process's global scope: LD_PRELOAD, -lnfcoll
    asked = os.environ.get("NFCOLL_LIBRARY")
    if hasattr(glob, "nf_version") and hasattr(glob, "NF_Region_bind"):
        path = _path_of(glob.nf_version)
        if asked and path and os.path.realpath(asked) != os.path.realpath(path):
            warnings.warn("NFCOLL_LIBRARY=%s ignored: libnfcoll is already loaded from %s "
                          "(LD_PRELOAD); one process uses one copy" % (asked, path))
        # dlopen of the loaded file returns that same copy, not a new one
        return (ctypes.CDLL(path) if path else glob), path, PRELOADED
    if asked:
        try:
            return _load(asked) + (ENV,)
        except OSError as e:
            raise OSError("nfcoll: NFCOLL_LIBRARY=%s cannot be loaded (nothing else is tried): %s"
                          % (asked, e)) from None
    libdir = _configured_libdir()
    own = os.path.join(libdir, SONAME) if libdir else None
    if own and os.path.exists(own):
        try:
            return _load(own) + (LIBDIR,)
        except OSError as e:
            raise OSError("nfcoll: %s, in the configured libdir, cannot be loaded: %s "
                          "(NFCOLL_LIBRARY=path chooses another)" % (own, e)) from None
    tried = []
    for name in (SONAME, "libnfcoll.so"):
        try:
            lib, path = _load(name)
        except OSError as e:
            tried.append(str(e))
            continue
        if own:
            warnings.warn("nfcoll: no %s in the configured libdir %s: loaded %s from the "
                          "loader's path instead" % (SONAME, libdir, path))
        return lib, path, LOADER
    where = ("neither in the configured libdir %s nor " % libdir) if libdir else "not "
    raise OSError("nfcoll: %s is %son the loader path (set NFCOLL_LIBRARY=/path/to/%s, or "
                  "LD_LIBRARY_PATH, or run ldconfig after make install): %s"
                  % (SONAME, where, SONAME, "; ".join(tried)))


_THREAD_LEVELS = {"single": 0, "funneled": 1, "serialized": 2, "multiple": 3}


def _init_mpi():
    """Start MPI through libnfcoll's MPI_Init_thread unless it is up; True
    when this module did (and so finalizes it)."""
    flag = ctypes.c_int()
    lib.PMPI_Initialized(ctypes.byref(flag))  # libmpi's, found through libnfcoll's handle
    if flag.value:
        if os.environ.get("NFCOLL_STATS"):
            warnings.warn("nfcoll: MPI was initialized before nfcoll was imported and libnfcoll "
                          "is not preloaded: NFCOLL_STATS will not be written (import nfcoll "
                          "before mpi4py.MPI, or run under LD_PRELOAD=libnfcoll.so)")
        return False
    import mpi4py
    # Open MPI's components resolve libmpi's symbols globally: make libmpi
    # global before MPI_Init (mpi4py does the same when it initializes).
    mpi = _path_of(lib.PMPI_Init_thread)
    if mpi:
        ctypes.CDLL(mpi, mode=ctypes.RTLD_GLOBAL)
    provided = ctypes.c_int()
    init = lib.MPI_Init_thread
    init.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
    level = _THREAD_LEVELS.get(str(mpi4py.rc.thread_level).lower(), 3)
    rc = init(None, None, level, ctypes.byref(provided))
    if rc != 0:
        raise OSError("nfcoll: MPI_Init_thread failed (%d)" % rc)
    mpi4py.rc.initialize = mpi4py.rc.finalize = False
    atexit.register(finalize)
    return True


def finalize():
    """libnfcoll's MPI_Finalize (the NFCOLL_STATS report, then
    PMPI_Finalize) when this module initialized MPI and it is still up."""
    flag = ctypes.c_int()
    lib.PMPI_Finalized(ctypes.byref(flag))
    if started_mpi and not flag.value:
        lib.MPI_Finalize()


lib, path, how = _open()
preloaded = how == PRELOADED
started_mpi = False if preloaded else _init_mpi()

# MPI handles are what mpi4py's MPI._handleof() gives: a pointer in Open MPI
# (to ompi_mpi_comm_world, ompi_mpi_float, ...), an int in MPICH. The size
# of the handle type decides which ctypes type carries it.
from mpi4py import MPI  # noqa: E402 - after MPI_Init above

handle_t = ctypes.c_void_p if MPI._sizeof(MPI.Comm) == ctypes.sizeof(ctypes.c_void_p) \
    else ctypes.c_int

_i, _p, _s = ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p
# name: (restype, argtypes) of the functions every libnfcoll has
_CORE = {
    "nf_version": (_s, [ctypes.POINTER(_i)] * 3),
    "nf_strerror": (_s, [_i]),
    "nf_route_name": (_s, [_i]),
    "nf_route_parse": (_i, [_s, ctypes.POINTER(_i)]),
    "nf_fallback_name": (_s, [_i]),
    "nf_stats_get": (_i, [_i, ctypes.POINTER(RouteStats)]),
    "nf_stats_fallbacks": (ctypes.c_uint64, [_i]),
    "nf_stats_reset": (None, []),
    "NF_Allreduce": (_i, [_p, _p, _i, handle_t, handle_t, handle_t]),
    "NF_Allreduce_route": (_i, [_p, _p, _i, handle_t, handle_t, handle_t, _i]),
    "NF_Region_bind": (_i, [_p, _i, handle_t, _s]),
    "NF_Region_unbind": (_i, [_p]),
    # libmpi's, through libnfcoll's handle: completing NF_Iallreduce's requests
    # (mpi4py 3.1 cannot wrap a C MPI_Request). ctypes drops the GIL in it.
    "MPI_Test": (_i, [ctypes.POINTER(handle_t), ctypes.POINTER(_i), _p]),
    "MPI_Wait": (_i, [ctypes.POINTER(handle_t), _p]),
}
# and those newer than the first release, bound at first use
_LATER = {
    "NF_Health_report": (_i, [ctypes.c_double]),
    "NF_Iallreduce": (_i, [_p, _p, _i, handle_t, handle_t, handle_t, ctypes.POINTER(handle_t)]),
    "NF_Iallreduce_route": (_i, [_p, _p, _i, handle_t, handle_t, handle_t, _i,
                                 ctypes.POINTER(handle_t)]),
    "NF_Comm_prepare": (_i, [handle_t]),
    "NF_Residuals_save": (_i, [handle_t, _s]),
    "NF_Residuals_load": (_i, [handle_t, _s]),
}
_bound = {}
for _name, _sig in _CORE.items():
    _declare(lib, _name, _sig)


def later(name):
    """A function newer than the first release, or RuntimeError saying the
    libnfcoll in use is too old to have it."""
    fn = _bound.get(name)
    if fn is None:
        try:
            fn = _declare(lib, name, _LATER[name])
        except AttributeError:
            raise RuntimeError("nfcoll: %s: the libnfcoll in use (%s, version %s) is too old: "
                               "it has no %s" % (name, path, version(), name)) from None
        _bound[name] = fn
    return fn


def has(name):
    """Whether the library in use has this function."""
    return hasattr(lib, name)


def version():
    return lib.nf_version(None, None, None).decode()
