#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The nfcoll package on 2+ ranks: routes against numpy references, torch
tensors, errors as exceptions, stats, bound regions under a region policy,
and the functions newer libraries add (residual files, health, bf16).

    test_nfcoll.py api          no policy
    test_nfcoll.py regions      NFCOLL_POLICY=tests/python/regions.policy
    test_nfcoll.py later DIR    NFCOLL_POLICY=tests/python/health.policy; DIR for files
    test_nfcoll.py fail         LD_PRELOAD=tests/.libs/libnf_fail_pmpi.so (PMPI
                                stand-ins that fail once armed): allreduce_async's
                                failures raise from wait(), on every rank, no hang
"""

import os
import sys
import time
import zlib

import nfcoll  # first: it starts MPI through libnfcoll's MPI_Init_thread
import numpy as np
from mpi4py import MPI

import nfref

comm = MPI.COMM_WORLD
rank, n = comm.Get_rank(), comm.Get_size()
t = nfref.Tap(comm)


def delta(before, route, key="calls"):
    return nfcoll.stats()["routes"][route][key] - before["routes"][route][key]


def test_library():
    lib = nfcoll.library()
    t.ok(nfcoll.version().count(".") == 2 and nfcoll.__version__ == nfcoll.version(),
         "version %s, the package's %s, from %s" % (nfcoll.version(), nfcoll.__version__, lib))
    t.ok(nfcoll.routes()[:4] == ["pmpi", "fp32", "binary", "ternary"],
         "routes %s" % ",".join(nfcoll.routes()))
    # the integer routes (issue 56) by name, as the library's table maps them;
    # only the mapping: no call runs them here
    ints = [nfcoll._route(r) for r in ("int4", "int3", "int2")]
    t.ok(ints == [5, 6, 7] and nfcoll.routes()[5:8] == ["int4", "int3", "int2"],
         "route names int4, int3, int2 map to %s" % ints)
    # a preloaded libnfcoll is the one in use: one file mapped, not two copies
    # (by file name: make distcheck builds under a directory named libnfcoll-VERSION)
    maps = {line.split()[-1] for line in open("/proc/self/maps")
            if os.path.basename(line.split()[-1]).startswith("libnfcoll")}
    want = any(os.path.basename(p).startswith("libnfcoll")
               for p in os.environ.get("LD_PRELOAD", "").replace(":", " ").split())
    t.ok(nfcoll.preloaded == want and len(maps) == 1,
         "preloaded=%s, one libnfcoll mapped (%s)" % (nfcoll.preloaded, ", ".join(maps)))
    # the tree's package and the tree's build (NFCOLL_LIBRARY, tests/python_common.sh),
    # never a libnfcoll installed elsewhere (the configured libdir, the loader's path)
    asked = os.environ.get("NFCOLL_LIBRARY", "")
    built = bool(asked) and all(os.path.exists(m) and os.path.samefile(m, asked)
                                for m in maps | {lib.path})
    tree = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    pkg = os.path.dirname(os.path.realpath(nfcoll.__file__))
    t.ok(built and lib.how == ("preloaded" if want else "NFCOLL_LIBRARY")
         and pkg == os.path.join(tree, "python", "nfcoll"),
         "the tree's build %s (%s), the tree's package %s" % (lib.path, lib.how, pkg))


def test_routes():
    """Each route on a few sizes; EF residuals carried over a second call."""
    for route, ref, sizes in (("fp32", "fp32", (1, 7, 130, 4099, 70001)),
                              ("pmpi", "fp32", (3, 515)),
                              ("binary", nfref.binary, (1, 17, 513, 4101, 70003)),
                              ("ternary", nfref.ternary, (2, 19, 514, 4102, 70005)),
                              ("int4", nfref.int4, (1, 33, 515, 4103, 70007))):
        for m in sizes:
            seed = zlib.crc32(("%s %d" % (route, m)).encode())
            xs = nfref.inputs(n, m, seed)
            x = xs[rank].copy()
            if ref == "fp32":
                nfcoll.allreduce(x, route=route)
                t.ok(np.array_equal(x, nfref.fp32(xs)), "%s %d floats: exact sum" % (route, m))
                continue
            es = np.zeros_like(xs)
            same = True
            for call in range(2):  # the second call uses the residual of the first
                xs = nfref.inputs(n, m, seed, call)
                x[:] = xs[rank]
                nfcoll.allreduce(x, route=route)
                same &= np.array_equal(x, ref(xs, es))
            t.ok(same, "%s %d floats, 2 calls with error feedback: bit-exact" % (route, m))


def test_admission_and_stats():
    before = nfcoll.stats()
    x = nfref.inputs(n, 100, 5)[rank].copy()
    nfcoll.allreduce(x)  # no policy: pmpi
    t.ok(delta(before, "pmpi") == 1 and delta(before, "pmpi", "bytes") == 400,
         "route None without a policy takes pmpi (stats: +1 call, +400 bytes)")
    y = x.copy()
    nfcoll.allreduce(y, route="fp32", comm=MPI.COMM_SELF)
    t.ok(np.array_equal(x, y), "fp32 on MPI_COMM_SELF: the input unchanged")
    nfcoll.stats_reset()
    t.ok(nfcoll.stats()["routes"]["pmpi"]["calls"] == 0, "stats_reset zeroes the counters")
    y = np.ones((4, 3), dtype=np.float32, order="F")
    nfcoll.allreduce(y, route="fp32")
    t.ok((y == n).all(), "a 2-d Fortran-order array is reduced whole")
    z = np.ones(0, dtype=np.float32)
    t.ok(nfcoll.allreduce(z, route="binary") is z, "0 elements; allreduce returns its argument")


def test_torch():
    try:
        import torch
    except ImportError:
        t.skip("torch tensors", "no torch for %s (apt-get install python3-torch)" % sys.executable)
        return
    xs = nfref.inputs(n, 1000, 9)
    x = torch.from_numpy(xs[rank].copy()).reshape(10, 100)
    nfcoll.allreduce(x, route="fp32")
    t.ok(np.array_equal(x.numpy().ravel(), nfref.fp32(xs)), "torch tensor, fp32: exact sum")
    t.raises(ValueError, lambda: nfcoll.allreduce(x[:, ::2]), "strided tensor")
    t.raises(TypeError, lambda: nfcoll.allreduce(x.double()), "float64 tensor")


def test_errors():
    x = np.zeros(64, dtype=np.float32)
    is_arg = lambda e: e.code == MPI.ERR_ARG and "MPI_ERR_ARG" in str(e)  # noqa: E731
    t.raises(nfcoll.Error, lambda: nfcoll.allreduce(x, route=9), "route 9", is_arg)
    t.raises(ValueError, lambda: nfcoll.allreduce(x, route="quaternary"), "route 'quaternary'")
    t.raises(nfcoll.Error, lambda: nfcoll.allreduce(x, comm=MPI.COMM_NULL), "MPI_COMM_NULL",
             lambda e: e.code == MPI.ERR_COMM)
    t.raises(nfcoll.Error, lambda: nfcoll.bind(x, "two words"), "region name with a space",
             is_arg)
    nfcoll.bind(x[:32], "a.weight")
    t.raises(nfcoll.Error, lambda: nfcoll.bind(x[16:48], "b.weight"), "overlapping region",
             is_arg)
    nfcoll.unbind(x[:32])
    t.raises(nfcoll.Error, lambda: nfcoll.unbind(x[:32]), "unbind where nothing is bound",
             is_arg)
    t.raises(TypeError, lambda: nfcoll.allreduce(x.astype(np.float64)), "float64 array")
    t.raises(TypeError, lambda: nfcoll.allreduce([1.0, 2.0]), "a list")
    t.raises(ValueError, lambda: nfcoll.allreduce(x[::2]), "strided array")
    ro = x.copy()
    ro.flags.writeable = False
    t.raises(ValueError, lambda: nfcoll.allreduce(ro), "read-only array")


def test_autograd():
    """Issue 18, item 9: a tensor that requires grad is refused while grad
    mode is on; written tensors get their version bumped, so autograd
    refuses a backward pass over values libnfcoll replaced."""
    try:
        import torch
    except ImportError:
        t.skip("autograd", "no torch for %s (apt-get install python3-torch)" % sys.executable)
        return
    xs = nfref.inputs(n, 100, 12)
    w = torch.from_numpy(xs[rank].copy()).requires_grad_()
    y = w * 3.0
    before, v0 = y.detach().clone(), y._version
    t.raises(ValueError, lambda: nfcoll.allreduce(y, route="fp32"), "non-leaf requiring grad",
             lambda e: "requires grad" in str(e))
    t.raises(ValueError, lambda: nfcoll.allreduce(w, route="fp32"), "leaf requiring grad",
             lambda e: "requires grad" in str(e))
    t.ok(torch.equal(y.detach(), before) and y._version == v0,
         "refused: the tensor and its version unchanged")
    z = (y * y).sum()  # saves y for backward
    with torch.no_grad():
        nfcoll.allreduce(y, route="fp32")
    t.ok(y._version > v0 and np.array_equal(y.detach().numpy(), nfref.fp32(xs * np.float32(3.0))),
         "under no_grad: reduced, version %d -> %d" % (v0, y._version))
    t.raises(RuntimeError, z.backward, "backward over a tensor libnfcoll wrote",
             lambda e: "inplace" in str(e) or "in-place" in str(e))
    g = torch.zeros(100)
    v = g._version
    d = g.detach()  # shares the version counter
    nfcoll.allreduce(d, route="fp32")
    t.ok(g._version > v, "a detached alias: the shared version counter moved")


def test_async():
    """Issue 16, item 5: allreduce_async gives the blocking call's results bit
    for bit. The same calls, error feedback included, blocking on one
    duplicate of the world and nonblocking on another (the residuals of the
    two evolve alike), several in flight, completed in another order, by
    done() polling or wait(); then the guards of allreduce."""
    if not nfcoll._lib.has("NF_Iallreduce"):
        t.skip("allreduce_async", "the libnfcoll in use has no NF_Iallreduce")
        return
    cx, cy = comm.Dup(), comm.Dup()
    nfcoll.prepare(cy)  # mpi4py made it where libnfcoll may not have seen it
    same, polls, handles = True, 0, True
    for route in ("fp32", "binary", "ternary", "pmpi", None):
        sizes = (7, 4099, 70001)
        # one buffer per size and path for both calls: an unbound buffer's
        # residual is found by its address
        want = [np.empty(m, dtype=np.float32) for m in sizes]
        got = [np.empty(m, dtype=np.float32) for m in sizes]
        for call in range(2):
            for m, w, g in zip(sizes, want, got):
                w[:] = g[:] = nfref.inputs(n, m, zlib.crc32(str(route).encode()) + m, call)[rank]
            for w in want:
                nfcoll.allreduce(w, route=route, comm=cx)
            reqs = [nfcoll.allreduce_async(g, route=route, comm=cy) for g in got]
            if call == 0:  # the last first: the library still runs them in order
                while not reqs[2].done():
                    polls += 1
                    time.sleep(1e-4)
            handles &= all(r.wait() is g and r.done() for r, g in zip(reqs, got))
            same &= all(np.array_equal(w, g) for w, g in zip(want, got))
    t.ok(handles, "wait() returns its array, done() is True after it")
    t.ok(same, "allreduce_async on fp32, binary, ternary, pmpi and admission, 2 calls each "
         "with error feedback: bit for bit allreduce's (%d done() polls)" % polls)
    try:
        import torch
    except ImportError:
        t.skip("allreduce_async on tensors", "no torch for %s" % sys.executable)
        return
    xs = nfref.inputs(n, 1000, 91)
    x = torch.from_numpy(xs[rank].copy())
    v = x._version
    h = nfcoll.allreduce_async(x, route="fp32")
    h.wait()
    t.ok(np.array_equal(x.numpy(), nfref.fp32(xs)) and x._version > v,
         "torch tensor: exact sum, version %d -> %d" % (v, x._version))
    t.raises(ValueError, lambda: nfcoll.allreduce_async(x.reshape(10, 100)[:, ::2]),
             "allreduce_async: strided tensor")
    t.raises(TypeError, lambda: nfcoll.allreduce_async(x.double()), "allreduce_async: float64")
    w = torch.zeros(10, requires_grad=True)
    t.raises(ValueError, lambda: nfcoll.allreduce_async(w), "allreduce_async: requires grad",
             lambda e: "requires grad" in str(e))
    is_arg = lambda e: e.code == MPI.ERR_ARG and e.function == "NF_Iallreduce_route"  # noqa: E731
    t.raises(nfcoll.Error, lambda: nfcoll.allreduce_async(x, route=9), "allreduce_async: route 9",
             is_arg)
    t.raises(nfcoll.Error, lambda: nfcoll.allreduce_async(x, comm=MPI.COMM_NULL),
             "allreduce_async: MPI_COMM_NULL", lambda e: e.code == MPI.ERR_COMM)
    h = nfcoll.allreduce_async(x, route="binary")
    del h  # dropped unwaited: waited for, the array written
    t.ok(True, "a Request dropped unwaited: no hang")
    cx.Free()
    cy.Free()


def test_fail():
    """A call that fails on every rank (stand-in PMPI_Allreduce, or the
    verdict's PMPI_Allgather or PMPI_Sendrecv) raises nfcoll.Error from wait() with the stand-in's
    code, done() says finished, and the next call works."""
    import ctypes
    arm = ctypes.CDLL(None).nft_fail_next
    x = np.ones(1000, dtype=np.float32)
    # warm-up: without an NFCOLL_ request at MPI_Init the world is set up at
    # its first blocking call (before it, nonblocking calls are MPI's own)
    nfcoll.allreduce(x, route="pmpi")
    nfcoll.allreduce_async(x, route="fp32").wait()
    for route, what in (("pmpi", (1, 0)), ("fp32", (0, 1))):
        code = arm(*what)
        h = nfcoll.allreduce_async(x, route=route)
        t.raises(nfcoll.Error, h.wait, "%s: the failed call raises from wait()" % route,
                 lambda e: e.code == code and e.function == "NF_Iallreduce_route")
        t.ok(h.done(), "%s: done() after the failure" % route)
        t.raises(nfcoll.Error, h.wait, "%s: wait() again raises again" % route)
    x[:] = 1.0
    nfcoll.allreduce_async(x, route="fp32").wait()
    t.ok((x == n).all(), "the next call after the failures works")


def test_guards():
    """Issue 18, item 10: names and addresses C would misread."""
    x = np.zeros(64, dtype=np.float32)
    t.raises(ValueError, lambda: nfcoll.bind(x, "a\x00b"), "region name with a NUL",
             lambda e: "NUL" in str(e))
    nfcoll.bind(x, "a")  # nothing was bound at x: "a" binds
    nfcoll.unbind(x)
    t.raises(TypeError, lambda: nfcoll.bind(x, None), "region name None")
    t.raises(TypeError, lambda: nfcoll.bind(x, b"a"), "region name as bytes")
    for bad in (-1, 2**64):
        t.raises(ValueError, lambda: nfcoll.unbind(bad), "unbind(%d)" % bad,
                 lambda e: "0x-" not in str(e) and "not an address" in str(e))


def test_regions():
    """region = head.* fp32, the rest binary: a fused buffer of a bound
    body, a bound head and an unbound gap, each part on its own route with
    its own scale."""
    sizes = {"body.weight": 1000, "head.weight": 130, None: 50}
    m = sum(sizes.values())
    xs = nfref.inputs(n, m, 77)
    buf = xs[rank].copy()
    nfcoll.bind(buf[:1000], "body.weight")
    nfcoll.bind(buf[1000:1130], "head.weight")
    before = nfcoll.stats()
    nfcoll.allreduce(buf)
    t.ok(np.array_equal(buf[1000:1130], nfref.fp32(xs[:, 1000:1130])), "head region: fp32, exact")
    t.ok(np.array_equal(buf[:1000], nfref.binary(xs[:, :1000])), "body region: binary, own scale")
    t.ok(np.array_equal(buf[1130:], nfref.binary(xs[:, 1130:])), "unbound gap: binary, own scale")
    t.ok(delta(before, "fp32", "bytes") == 130 * 4 and delta(before, "binary", "bytes") == 1050 * 4,
         "stats: %d fp32 bytes, %d binary bytes" % (delta(before, "fp32", "bytes"),
                                                    delta(before, "binary", "bytes")))
    nfcoll.unbind(buf[:1000])
    nfcoll.unbind(buf[1000:1130])


def test_later(tmp):
    """Functions newer libraries add; each SKIPs only where the symbol is absent."""
    from nfcoll import _lib
    if _lib.has("NF_Residuals_save") and _lib.has("NF_Residuals_load"):
        prefix = os.path.join(tmp, "resid")
        x = np.zeros(3000, dtype=np.float32)
        nfcoll.bind(x, "saved.weight")
        xs = [nfref.inputs(n, 3000, 31, c) for c in range(2)]
        x[:] = xs[0][rank]
        nfcoll.allreduce(x)  # the policy's binary, residual kept by region name
        nfcoll.save_residuals(prefix)
        x[:] = xs[1][rank]
        r1 = nfcoll.allreduce(x).copy()
        nfcoll.load_residuals(prefix)
        x[:] = xs[1][rank]
        r2 = nfcoll.allreduce(x)
        t.ok(np.array_equal(r1, r2), "load_residuals restores what save_residuals wrote")
        nfcoll.unbind(x)
        prefixes(tmp)
    else:
        t.skip("save_residuals/load_residuals", "this libnfcoll has no NF_Residuals_save")
        t.raises(RuntimeError, lambda: nfcoll.save_residuals("x"), "too old",
                 lambda e: "too old" in str(e))
    if _lib.has("NF_Health_report"):
        x = np.zeros(3000, dtype=np.float32)
        for call, loss in enumerate((2.0, 1.5, 1.2)):
            x[:] = nfref.inputs(n, 3000, 51, call)[rank]
            nfcoll.allreduce(x)
            nfcoll.health_report(loss)
        t.ok(True, "health = on: health_report after each step of a falling loss")
    else:
        t.skip("health_report", "this libnfcoll has no NF_Health_report")
        t.raises(RuntimeError, lambda: nfcoll.health_report(1.0), "too old",
                 lambda e: "too old" in str(e))
    if "bf16" in nfcoll.routes():
        xs = nfref.inputs(n, 1000, 41)
        x = xs[rank].copy()
        nfcoll.allreduce(x, route="bf16")
        err = np.abs(x.astype(np.float64) - xs.astype(np.float64).sum(axis=0))
        bound = 2.0 ** -7 * np.abs(xs.astype(np.float64)).sum(axis=0)
        same = comm.allgather(x.tobytes())
        t.ok((err <= bound).all() and len(set(same)) == 1,
             "bf16: within 2^-7 of the sum, the same on every rank")
    else:
        t.skip("bf16 route", "this libnfcoll has no bf16 route")


def prefixes(tmp):
    """Issue 18, item 10: save_residuals(None) wrote None.RANK. Prefixes
    that are not str, bytes or os.PathLike, or hold a NUL, are refused;
    one rank's bad prefix fails every rank's call instead of hanging it."""
    import pathlib
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        for f in (nfcoll.save_residuals, nfcoll.load_residuals):
            for bad in (None, 12):
                t.raises(TypeError, lambda: f(bad), "%s(%r)" % (f.__name__, bad),
                         lambda e: "str, bytes or os.PathLike" in str(e))
            t.raises(ValueError, lambda: f("a\x00b"), "%s with a NUL" % f.__name__,
                     lambda e: "NUL" in str(e))
        t.ok(not any(p.startswith(("None", "12", "a")) for p in os.listdir(".")),
             "no file from a refused prefix: %s" % sorted(os.listdir(".")))
        nfcoll.save_residuals(pathlib.Path(tmp) / "path")
        nfcoll.load_residuals(os.fsencode(os.path.join(tmp, "path")))
        t.ok(os.path.exists(os.path.join(tmp, "path.%d" % rank)), "os.PathLike and bytes prefixes")
        mine = None if rank == 0 else os.path.join(tmp, "mixed")
        t.raises(TypeError if rank == 0 else nfcoll.Error, lambda: nfcoll.save_residuals(mine),
                 "rank 0's prefix None: every rank fails, none waits")
        t.ok(not os.path.exists(os.path.join(tmp, "mixed.%d" % rank)), "nothing written then")
    finally:
        os.chdir(cwd)


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "api"
    test_library()
    if mode == "api":
        test_routes()
        test_admission_and_stats()
        test_torch()
        test_autograd()
        test_errors()
        test_guards()
        test_async()
    elif mode == "fail":
        test_fail()
    elif mode == "regions":
        test_regions()
    else:
        test_later(sys.argv[2] if len(sys.argv) > 2 else ".")
    t.exit()
