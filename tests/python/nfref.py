# SPDX-License-Identifier: BSD-3-Clause
"""numpy versions of tests/mpi/nf_ref.h (docs/design.md, "Routes") for the
Python tests: every rank rebuilds all ranks' inputs and computes the
expected result itself. All ranks on one node (no NFCOLL_RANKS_PER_NODE)."""

import numpy as np


def inputs(n, m, seed, call=0):
    """Rank i's input for a call: n x m float32, gradient-like, no zeros."""
    out = np.empty((n, m), dtype=np.float32)
    for i in range(n):
        rng = np.random.default_rng([seed, i, call])
        x = rng.standard_normal(m) * 2.0 ** rng.integers(0, 8, m)
        x[x == 0] = 1.0
        out[i] = x.astype(np.float32)
    return out


def fp32(xs):
    """The exact route: the sum in rank order, in float32."""
    acc = xs[0].copy()
    for x in xs[1:]:
        acc += x
    return acc


def lane_sum(y, take=None):
    """sum |y| in double over 16 lanes (element k in lane k % 16, each lane
    in element order), folded pairwise: the kernels' order."""
    a = np.abs(y.astype(np.float64))
    if take is not None:
        a = np.where(take, a, 0.0)
    a = np.concatenate([a, np.zeros(-len(a) % 16)]).reshape(-1, 16)
    lane = np.add.accumulate(a, axis=0)[-1] if len(a) else np.zeros(16)
    lane = [float(v) for v in lane]
    w = 8
    while w >= 1:
        for i in range(w):
            lane[i] += lane[i + w]
        w //= 2
    return lane[0]


def binary(xs, es=None):
    """G-Binary; updates es (n x m residuals) in place when given."""
    n, m = xs.shape
    ys = xs + es if es is not None else xs.copy()
    ai = [lane_sum(y) / m for y in ys]
    a = 0.0
    for v in ai:
        a += v
    a /= n
    c = (~np.signbit(ys)).sum(axis=0)
    r = (a * (2.0 * c - n)).astype(np.float32)
    if es is not None:
        for i in range(n):
            af = np.float32(ai[i])
            es[i] = np.where(~np.signbit(ys[i]), ys[i] - af, ys[i] + af)
    return r


def ternary(xs, es=None, gamma=1.0):
    """G-Ternary; updates es in place when given."""
    n, m = xs.shape
    ys = xs + es if es is not None else xs.copy()
    qs, bi = [], []
    for y in ys:
        t = np.float32(gamma * (lane_sum(y) / m))
        q = np.where(y > t, 1, np.where(y < -t, -1, 0))
        nin = int((q != 0).sum())
        bi.append(lane_sum(y, q != 0) / nin if nin else 0.0)
        qs.append(q)
    b = 0.0
    for v in bi:
        b += v
    b /= n
    r = (b * np.sum(qs, axis=0).astype(np.float64)).astype(np.float32)
    if es is not None:
        for i in range(n):
            bf = np.float32(bi[i])
            es[i] = np.where(qs[i] > 0, ys[i] - bf, np.where(qs[i] < 0, ys[i] + bf, ys[i]))
    return r


class Tap:
    """ok/not ok lines from rank 0 (every rank checks; a failure anywhere fails)."""

    def __init__(self, comm):
        self.comm, self.failed, self.skipped = comm, 0, 0

    def ok(self, cond, what):
        flags = self.comm.allgather(bool(cond))
        if self.comm.Get_rank() == 0:
            bad = [i for i, f in enumerate(flags) if not f]
            print(("ok - %s" % what) if not bad else ("not ok - %s (ranks %s)" % (what, bad)),
                  flush=True)
        self.failed += not all(flags)
        return all(flags)

    def skip(self, what, why):
        if self.comm.Get_rank() == 0:
            print("ok - %s # SKIP %s" % (what, why), flush=True)
        self.skipped += 1

    def raises(self, exc, fn, what, check=None):
        try:
            fn()
        except exc as e:
            return self.ok(check is None or check(e), "%s: %s" % (what, e))
        except Exception as e:  # noqa: BLE001 - reported as the failure it is
            return self.ok(False, "%s: raised %s: %s" % (what, type(e).__name__, e))
        return self.ok(False, "%s: no exception" % what)

    def exit(self):
        raise SystemExit(1 if self.failed else 0)


def intk(xs, es=None, kb=4, block=128):
    """The integer routes (NF_Allreduce(3)): per block of `block` elements
    the max |y| over ranks M, s = M / L and inv = L / M in float32 (0 and 0
    when M < 2^-120), q = clip(rint(y * inv), -L, L) per rank (rint: ties to
    even), r = float32(double(s) * sum q); es becomes y - s * q."""
    n, m = xs.shape
    L = np.float32(2 ** (kb - 1) - 1)
    ys = xs + es if es is not None else xs.copy()
    r = np.empty(m, dtype=np.float32)
    for o in range(0, m, block):
        y = ys[:, o:o + block]
        M = np.float32(np.abs(y).max())
        s = inv = np.float32(0.0)
        if M >= np.float32(2.0 ** -120):
            s, inv = np.float32(M / L), np.float32(L / M)
        q = np.clip(np.rint((y * inv).astype(np.float32)), -L, L).astype(np.float32)
        r[o:o + block] = (np.float64(s) * q.sum(axis=0, dtype=np.float64)).astype(np.float32)
        if es is not None:
            es[:, o:o + block] = y - (s * q).astype(np.float32)
    return r


def int4(xs, es=None):
    return intk(xs, es, 4)
