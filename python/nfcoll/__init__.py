# SPDX-License-Identifier: BSD-3-Clause
"""libnfcoll from Python: a thin ctypes layer over libnfcoll.so.

    import nfcoll                            # first: it starts MPI (see below)
    from mpi4py import MPI                   # communicators, if any but the world
    nfcoll.allreduce(grad)                   # the policy's admission decides
    nfcoll.allreduce(grad, route="binary")   # or a forced route ("int4", ...)
    nfcoll.bind(grad[:1290], "head.weight")  # name a region of a fused buffer
    h = nfcoll.allreduce_async(grad)         # the same, nonblocking (NF_Iallreduce):
    ...                                      # compute while it runs, then
    h.wait()                                 # grad holds the sum (h.done(): finished?)

Arrays are contiguous float32 numpy arrays or CPU torch tensors, reduced in
place (MPI_IN_PLACE, MPI_FLOAT, MPI_SUM). comm is an mpi4py communicator
(default MPI.COMM_WORLD). A failing call raises nfcoll.Error with the
library's message. See nfcoll.torch for PyTorch DDP.

Autograd: allreduce writes a tensor in place where autograd cannot see it,
like an in-place torch operation it cannot differentiate. A tensor that
requires grad is refused while grad mode is on (ValueError; reduce its
.grad, or call under torch.no_grad(), as an optimizer step would). Every
tensor written gets its version counter bumped, as torch's own in-place
operations do, so autograd refuses a backward pass that would use the old
values (x.detach() shares the counter; x.data does not: prefer detach()).

Import nfcoll before anything initializes MPI (mpi4py.MPI, torch's MPI
backend): nfcoll then starts MPI through libnfcoll's MPI_Init_thread, where
the ranks agree once on the policy, stats and trace settings, and ends it
at exit through libnfcoll's MPI_Finalize, which writes NFCOLL_STATS (call
nfcoll.finalize() to end it earlier; not MPI.Finalize(), which bypasses the
report). Under mpirun -x LD_PRELOAD=libnfcoll.so the same happens through
the preloaded library, and MPI_Allreduce calls of other code (mpi4py's
included) go through libnfcoll's admission too. When MPI was initialized
first and nothing was preloaded, libnfcoll starts at its first call: the
ranks compare their policies per communicator, and NFCOLL_STATS is not
written.

Which libnfcoll: the first of, in this order (nfcoll._lib has the details)

  1. one already in the process (LD_PRELOAD, -lnfcoll)      how "preloaded"
  2. the file NFCOLL_LIBRARY names (only it, if set)        how "NFCOLL_LIBRARY"
  3. libnfcoll.so.0 in the configured libdir, if there      how "libdir"
  4. libnfcoll.so.0 on the loader's path (ld.so.cache)      how "loader"

nfcoll.library() returns (path, how) of the one in use. The configured
libdir is the one make install put the library in, or, for a package
installed by pip install ./python, the one recorded then: NFCOLL_LIBDIR=DIR
pip install ./python, else the libdir of a tree configured in place, else
pkg-config's for nfcoll (none: NFCOLL_LIBRARY, or the loader's path).
nfcoll.__version__ is the package's version, configure.ac's, which a
library of the same release also reports (nfcoll.version()).
"""

import collections
import ctypes
import os
import threading
import warnings

from . import _version
from . import _lib  # first: it may initialize MPI

from mpi4py import MPI  # noqa: E402,I100

__all__ = ["Error", "allreduce", "allreduce_async", "Request", "bind", "unbind", "stats", "stats_reset", "routes",
           "health_report", "save_residuals", "load_residuals", "version", "library",
           "library_path", "preloaded", "finalize"]

__version__ = _version.version()
"""The package's version (configure.ac's AC_INIT)."""
library_path = _lib.path
"""The libnfcoll.so in use (library().path)."""
preloaded = _lib.preloaded
"""True when that library was in the process before nfcoll (LD_PRELOAD)."""

Library = collections.namedtuple("Library", ["path", "how"])
Library.__doc__ = """The libnfcoll in use: path, the file; how, how it was found:
"preloaded", "NFCOLL_LIBRARY", "libdir" or "loader" (see the module's help)."""


def library():
    """(path, how) of the libnfcoll in use, a Library: how is "preloaded"
    (in the process before nfcoll: LD_PRELOAD, -lnfcoll), "NFCOLL_LIBRARY",
    "libdir" (the configured libdir) or "loader" (the loader's path)."""
    return Library(_lib.path, _lib.how)

_IN_PLACE = ctypes.c_void_p(int(MPI.IN_PLACE))
_FLOAT = MPI._handleof(MPI.FLOAT)
_SUM = MPI._handleof(MPI.SUM)
_REQUEST_NULL = MPI._handleof(MPI.REQUEST_NULL)
_INT_MAX = 2**31 - 1


class Error(RuntimeError):
    """A libnfcoll call failed. code: the MPI error code (or nf_status_t)
    it returned; function: the C function."""

    def __init__(self, function, code, detail=""):
        self.function, self.code = function, code
        super().__init__("%s%s: %s" % (function, detail, _message(code)))


def _message(code):
    mpi = code if code > 0 else (-1000 - code if code <= -1000 else None)
    if mpi is not None:
        try:
            return MPI.Get_error_string(mpi)
        except MPI.Exception:
            return "MPI error %d" % mpi
    return _lib.lib.nf_strerror(code).decode()


def _finalized():
    flag = ctypes.c_int()
    _lib.lib.PMPI_Finalized(ctypes.byref(flag))
    return bool(flag.value)


def _check(function, rc, detail=""):
    if rc != 0:
        raise Error(function, rc, detail)


def finalize():
    """End MPI now through libnfcoll's MPI_Finalize (collective; writes
    NFCOLL_STATS) if nfcoll started it; otherwise nothing (the preloaded
    library's MPI_Finalize runs when mpi4py finalizes at exit)."""
    _lib.finalize()


def version():
    """The version string of the libnfcoll in use."""
    return _lib.version()


def routes():
    """The route names the library in use knows, in nf_route_t order: its
    route table (pmpi, fp32, binary, ternary, bf16, int4, int3, int2 in this
    version), the names allreduce's route takes."""
    names = []
    while True:
        name = _lib.lib.nf_route_name(len(names)).decode()
        if name == "unknown":
            return names
        names.append(name)


def _route(route):
    if isinstance(route, str):
        r = ctypes.c_int()
        if _lib.lib.nf_route_parse(route.encode(), ctypes.byref(r)) != 0:
            raise ValueError("unknown route %r (this libnfcoll knows %s)"
                             % (route, ", ".join(routes())))
        return r.value
    return int(route)  # a number goes to the library as it is, which checks it


def _comm(comm):
    return MPI._handleof(MPI.COMM_WORLD if comm is None else comm)


def _is_tensor(x):
    return hasattr(x, "data_ptr") and hasattr(x, "is_contiguous")


def _writable(x):
    """Refuse a tensor whose in-place write autograd would miss: one that
    requires grad while grad mode is on (torch refuses its own in-place
    operations on leaves then; on other tensors it records them, which it
    cannot do for a write it does not see)."""
    if _is_tensor(x) and x.requires_grad:
        import torch
        if torch.is_grad_enabled():
            raise ValueError("nfcoll: the tensor requires grad and grad mode is on: autograd "
                             "cannot see libnfcoll's in-place write (reduce its .grad, or call "
                             "under torch.no_grad())")


def _written(x):
    """Bump a tensor's version counter after the library wrote it, as a
    torch in-place operation would: an empty in-place operation on a view
    (views share the counter) costs no pass over the data."""
    if _is_tensor(x) and not (hasattr(x, "is_inference") and x.is_inference()):
        import torch
        with torch.no_grad():
            x.view(-1)[:0].zero_()


def _buffer(x):
    """(address, count) of a contiguous, writable float32 array or CPU tensor."""
    if _is_tensor(x):  # torch.Tensor
        if str(x.dtype) != "torch.float32":
            raise TypeError("nfcoll: tensor dtype %s, expected torch.float32" % x.dtype)
        if x.device.type != "cpu":
            raise ValueError("nfcoll: tensor on %s, expected a CPU tensor" % x.device)
        if not x.is_contiguous():
            raise ValueError("nfcoll: tensor is not contiguous")
        addr, count = x.data_ptr(), x.numel()
    elif hasattr(x, "__array_interface__") and hasattr(x, "flags"):  # numpy.ndarray
        if x.dtype.char != "f" or not x.dtype.isnative:
            raise TypeError("nfcoll: array dtype %s, expected float32" % x.dtype)
        if not (x.flags.c_contiguous or x.flags.f_contiguous):
            raise ValueError("nfcoll: array is not contiguous")
        if not x.flags.writeable:
            raise ValueError("nfcoll: array is read-only")
        addr, count = x.__array_interface__["data"][0], x.size
    else:
        raise TypeError("nfcoll: expected a float32 numpy array or a CPU torch tensor, got %s"
                        % type(x).__name__)
    if count > _INT_MAX:
        raise ValueError("nfcoll: %d elements, more than an MPI count (%d)" % (count, _INT_MAX))
    return addr, count


def allreduce(x, route=None, comm=None):
    """Sum x over the ranks of comm, in place, and return x.

    route None: libnfcoll's admission decides (the policy, NFCOLL_POLICY;
    without one every call takes pmpi). Otherwise a route name ("pmpi",
    "fp32", "binary", "ternary", "bf16", "int4", "int3", "int2": the
    library's route table, see routes()) or its nf_route_t number
    (NF_ROUTE_INT4 is 5, INT3 6, INT2 7): NF_Allreduce_route. A name this
    libnfcoll does not know is a ValueError. Collective: every rank of comm
    calls it with the same count (and the same bound regions in x).

    A torch tensor that requires grad is refused while grad mode is on
    (ValueError): autograd cannot see this write. Under torch.no_grad() it
    is reduced like any tensor, and every tensor written gets its version
    counter bumped, so a backward pass that saved its old values fails
    instead of computing with the new ones.
    """
    _writable(x)
    addr, count = _buffer(x)
    lib, c = _lib.lib, _comm(comm)
    if route is None:
        rc = lib.NF_Allreduce(_IN_PLACE, addr, count, _FLOAT, _SUM, c)
        _written(x)
        _check("NF_Allreduce", rc, "(%d floats)" % count)
    else:
        r = _route(route)
        rc = lib.NF_Allreduce_route(_IN_PLACE, addr, count, _FLOAT, _SUM, c, r)
        _written(x)
        _check("NF_Allreduce_route", rc, "(%d floats, route %r)" % (count, route))
    return x


def allreduce_async(x, route=None, comm=None):
    """Start allreduce(x, route, comm) and return at once a Request; x holds
    the sum after its wait() (NF_Iallreduce, NF_Iallreduce_route).

    The same arguments, checks and results, bit for bit, as allreduce: the
    library runs the call on its progress thread, in the order calls were
    issued, while this thread computes (NF_Iallreduce(3): without
    MPI_THREAD_MULTIPLE, or with NFCOLL_PROGRESS=off, it runs here, now).
    Collective: every rank of comm issues the same calls in the same order,
    blocking and nonblocking alike. On a communicator libnfcoll did not see
    made (mpi4py's Dup() without the preload), calls before its first
    blocking allreduce are MPI's own exact sums: see prepare(). Until the request is done, x must be
    neither read nor written (nor a region bound in it rebound); the Request
    keeps x alive. A failure at issue raises nfcoll.Error here; a failure of
    the call itself raises it from wait().
    """
    _writable(x)
    addr, count = _buffer(x)
    c, req = _comm(comm), _lib.handle_t(_REQUEST_NULL)
    if route is None:
        function, detail = "NF_Iallreduce", "(%d floats)" % count
        rc = _lib.later(function)(_IN_PLACE, addr, count, _FLOAT, _SUM, c, ctypes.byref(req))
    else:
        r = _route(route)
        function, detail = "NF_Iallreduce_route", "(%d floats, route %r)" % (count, route)
        rc = _lib.later(function)(_IN_PLACE, addr, count, _FLOAT, _SUM, c, r, ctypes.byref(req))
    _check(function, rc, detail)
    return Request(x, req, function, detail)


class Request:
    """A nonblocking allreduce (allreduce_async). wait() completes it and
    returns its array; done() says, without blocking, whether it finished.
    Either may be called from any thread, and again: a finished request
    keeps its outcome (the array, or the nfcoll.Error wait() raises).
    Dropped unfinished, it is waited for, since the library still writes
    its array (a failure then is only a warning)."""

    def __init__(self, x, req, function, detail):
        self._x, self._req, self._function, self._detail = x, req, function, detail
        self._lock = threading.Lock()  # one MPI completion call at a time on the request
        self._rc = None                # the call's MPI code once finished
        # a real MPI_Status, not MPI_STATUS_IGNORE: NULL under Open MPI but
        # (MPI_Status *)1 under MPICH, whose MPI_Test refuses a NULL status
        self._status = ctypes.create_string_buffer(MPI._sizeof(MPI.Status))

    def _finish(self, rc):
        self._rc = rc
        _written(self._x)

    def wait(self):
        """Block until the allreduce finished; return its array, or raise
        nfcoll.Error with the call's error. It waits in libnfcoll's
        MPI_Wait (the GIL released), the one wait the library has: it sleeps
        until the progress engine finishes the call, polling MPI between
        naps so the program's other requests progress (docs/design.md, "The
        progress engine"); Open MPI's own MPI_Wait would spin against the
        engine's thread for the core."""
        with self._lock:
            if self._rc is None:
                self._finish(_lib.lib.MPI_Wait(ctypes.byref(self._req), self._status))
        _check(self._function, self._rc, self._detail)
        return self._x

    def done(self):
        """True when the allreduce finished (wait() then returns at once),
        False while it runs or while another thread tests it."""
        if self._rc is not None:
            return True
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self._rc is None:
                flag = ctypes.c_int()
                rc = _lib.lib.MPI_Test(ctypes.byref(self._req), ctypes.byref(flag), self._status)
                if flag.value or rc != 0:
                    self._finish(rc)
            return self._rc is not None
        finally:
            self._lock.release()

    def __del__(self):
        if getattr(self, "_rc", 0) is None and not _finalized():  # MPI_Finalize ran it
            try:
                self.wait()
            except Exception as e:  # noqa: BLE001 - nobody left to raise to
                warnings.warn("nfcoll: a Request dropped unwaited failed: %s" % e)


def bind(x, name):
    """Name the floats of x (an array, a tensor or a slice view of a fused
    buffer) as a model region: NF_Region_bind(3). Local, not collective;
    every rank must bind the same layout. name: a str (the library checks
    its characters; an embedded NUL, which C would cut the name at, is a
    ValueError). A name is bound at one address at a time (unbind it to
    move it), and a binding outlives the memory: unbind before x is freed,
    or a new array at that address is cut by it."""
    if not isinstance(name, str):
        raise TypeError("nfcoll: region name must be a str, got %s" % type(name).__name__)
    if "\0" in name:
        raise ValueError("nfcoll: region name %r holds a NUL character" % name)
    addr, count = _buffer(x)
    rc = _lib.lib.NF_Region_bind(addr, count, _FLOAT, name.encode())
    _check("NF_Region_bind", rc, "(%r, %d floats)" % (name, count))


_ADDR_MAX = 2**(8 * ctypes.sizeof(ctypes.c_void_p)) - 1


def unbind(x):
    """Forget the region that starts at x: NF_Region_unbind(3). x: the
    array or tensor bound, or its address as an int (0 .. 2**64 - 1)."""
    if isinstance(x, int) and not 0 <= x <= _ADDR_MAX:
        raise ValueError("nfcoll: %d is not an address (0 to 0x%x)" % (x, _ADDR_MAX))
    addr = x if isinstance(x, int) else _buffer(x)[0]
    _check("NF_Region_unbind", _lib.lib.NF_Region_unbind(addr), "(0x%x)" % addr)


def stats():
    """This process's counters since MPI_Init (or stats_reset()):
    {"routes": {route: {"calls", "bytes", "upstream_bytes", "total_bytes",
    "fp32_ring_bytes"}}, "fallbacks": {reason: count}}, the keys of the
    NFCOLL_STATS JSON (which sums them over ranks at MPI_Finalize and adds
    "regions" and "placement")."""
    lib = _lib.lib
    out = {"routes": {}, "fallbacks": {}}
    for r, name in enumerate(routes()):
        s = _lib.RouteStats()
        _check("nf_stats_get", lib.nf_stats_get(r, ctypes.byref(s)), "(%s)" % name)
        out["routes"][name] = {f: getattr(s, f) for f, _ in s._fields_}
    f = 0
    while True:
        name = lib.nf_fallback_name(f).decode()
        if name == "unknown":
            return out
        out["fallbacks"][name] = lib.nf_stats_fallbacks(f)
        f += 1


def stats_reset():
    """Zero this process's counters."""
    _lib.lib.nf_stats_reset()


def health_report(loss):
    """Tell libnfcoll's health monitor this step's loss (policy health = on):
    NF_Health_report. RuntimeError when the library predates it."""
    _check("NF_Health_report", _lib.later("NF_Health_report")(float(loss)))


def prepare(comm=None):
    """Set libnfcoll up for comm now (collective and blocking, on every rank
    of comm): NF_Comm_prepare. A communicator libnfcoll did not see made
    (mpi4py's comm.Dup() or Split() without the preload) is set up at its
    first blocking allreduce; until then its allreduce_async calls are
    MPI's own exact sums (stats: fallback "setup"). The world is set up when
    nfcoll starts MPI. Call it once after making such a communicator, or
    let a blocking allreduce come first. RuntimeError when the library
    predates it."""
    _check("NF_Comm_prepare", _lib.later("NF_Comm_prepare")(_comm(comm)))


def _residuals(name, prefix, comm):
    """NF_Residuals_save or _load with prefix (str, bytes or os.PathLike).
    A bad prefix on one rank must not leave the others waiting in the
    collective call: the library is called with NULL there, which every
    rank's call then returns as MPI_ERR_ARG, and this rank raises the
    reason (TypeError, or ValueError for an embedded NUL)."""
    fn = _lib.later(name)
    bad = None
    try:
        path = os.fsencode(prefix)
        if b"\0" in path:
            bad = ValueError("nfcoll: %s: prefix %r holds a NUL character" % (name, prefix))
    except TypeError:
        bad = TypeError("nfcoll: %s: prefix must be a str, bytes or os.PathLike, got %s"
                        % (name, type(prefix).__name__))
    rc = fn(_comm(comm), None if bad else path)
    if bad:
        raise bad
    _check(name, rc, "(%r)" % os.fsdecode(path))


def save_residuals(prefix, comm=None):
    """Write this communicator's error-feedback residuals to files named by
    prefix (collective): NF_Residuals_save. For checkpoints. prefix: str,
    bytes or os.PathLike; anything else is a TypeError on that rank (and an
    nfcoll.Error with MPI_ERR_ARG on the others, which called it too)."""
    _residuals("NF_Residuals_save", prefix, comm)


def load_residuals(prefix, comm=None):
    """Read residuals written by save_residuals (collective): NF_Residuals_load.
    prefix as for save_residuals."""
    _residuals("NF_Residuals_load", prefix, comm)
