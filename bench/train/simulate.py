#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The low-bit routes' formulas, simulated in one process on the training
check's models and optimizers: a quick way to try an error-feedback rule
before building it into libnfcoll (docs/training.md, "Methods tried").

    bench/train/simulate.py --model cnn --rule binary --decay 0.5 --epochs 2

Each of --ranks ranks computes its gradient on its share of the batch (as
train.py's DDP ranks do); per parameter tensor, G-Binary as NF_Allreduce(3)
states it: y_i = x_i + decay * e_i, a_i = mean |y_i|, the sign counts, the
result a * (n - 2c) / n (the mean), e_i = y_i - a_i s_i; G-Ternary with
gamma 1: t_i = a_i, b_i = the mean |y_i| over the gated-in elements, the
result b * (P - M) / n, e_i = y_i - b_i q_i. Scales are per tensor, sums in
float64 rather than the library's lane order: the numbers are the formula's,
not the library's bits. Prints the test accuracy after every epoch and,
every --every steps, the residual ratio ||e|| / ||x|| over all compressed
tensors and the mean cosine of each compressed mean to the exact one.
"""

import argparse
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import DEFAULT_OPTIMIZER, MODELS, OPTIMIZERS, load_data, lr_factor  # noqa: E402


def blocked(y, block):
    """y's scale per block of `block` elements (the last block shorter),
    expanded to y's shape: mean |y| over the block."""
    f = y.flatten().abs().double()
    k = (f.numel() + block - 1) // block
    pad = torch.zeros(k * block, dtype=f.dtype)
    pad[:f.numel()] = f
    cnt = torch.full((k,), float(block), dtype=f.dtype)
    cnt[-1] = f.numel() - (k - 1) * block
    s = pad.view(k, block).sum(1) / cnt
    return s.repeat_interleave(block)[:f.numel()].view_as(y).float()


def compress(rule, ys, block=0):
    """The mean the route returns for the ranks' ys, and each rank's new
    residual. block > 0: one binary scale per block of that many elements."""
    n = len(ys)
    if rule == "binary" and block > 0:
        # as the per-tensor route, per block: the ranks' mean scale times
        # the sign counts; each rank's residual against its own scale
        neg = [torch.signbit(y) for y in ys]
        sc = [blocked(y, block) for y in ys]
        c = sum(s.float() for s in neg)
        out = sum(sc) / n * (n - 2 * c) / n
        return out, [y - torch.where(s, -ai, ai) for y, ai, s in zip(ys, sc, neg)]
    a = [float(y.abs().double().mean()) for y in ys]
    if rule == "binary":
        neg = [torch.signbit(y) for y in ys]  # -0.0 counts as -1, as the library's sign bit
        c = sum(s.float() for s in neg)
        out = (sum(a) / n * (n - 2 * c) / n).float()
        return out, [y - ai * torch.where(s, -1.0, 1.0) for y, ai, s in zip(ys, a, neg)]
    qs = [torch.where(y > ai, 1.0, torch.where(y < -ai, -1.0, 0.0)) for y, ai in zip(ys, a)]
    b = [float(y.abs()[q != 0].double().mean()) if bool((q != 0).any()) else 0.0
         for y, q in zip(ys, qs)]
    out = (sum(b) / n * sum(qs) / n).float()
    return out, [y - bi * q for y, bi, q in zip(ys, b, qs)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=tuple(MODELS), default="cnn")
    ap.add_argument("--rule", choices=("fp32", "binary", "ternary", "ef21", "shift"), default="binary",
                    help="ef21: each rank sends its gradient's change from its last estimate "
                    "g_i in binary, g_i += a_i s_i, and the result is the running mean of the "
                    "estimates G += the binary mean (EF21; --decay unused); shift: one estimate G "
                    "shared by the ranks, each sends x_i - decay G, G = decay G + the binary mean")
    ap.add_argument("--decay", type=float, default=1.0, help="y = x + decay * e (1: binary)")
    ap.add_argument("--exact-below", type=int, default=0,
                    help="tensors of fewer elements are averaged exactly")
    ap.add_argument("--exact", default="", help="comma-separated name prefixes kept exact")
    ap.add_argument("--block", type=int, default=0,
                    help="binary: one scale per block of this many elements (0: per tensor)")
    ap.add_argument("--exact-steps", type=int, default=0,
                    help="the first steps average every tensor exactly (a warm-up)")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64, help="per rank")
    ap.add_argument("--train-subset", type=int, default=0)
    ap.add_argument("--every", type=int, default=50, help="steps between signal samples")
    a = ap.parse_args()
    torch.set_num_threads(1)
    xtr, ytr, xte, yte = load_data(a.train_subset)
    torch.manual_seed(a.seed)
    model = MODELS[a.model]()
    opt_name = DEFAULT_OPTIMIZER[a.model]
    lr, wd, warm = OPTIMIZERS[opt_name]
    if opt_name == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=wd)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=wd)
    per_step = a.ranks * a.batch
    total = a.epochs * (len(ytr) // per_step)
    warmup = int(round(warm * total))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: lr_factor(k, total, warmup, "cosine"))
    params = list(model.named_parameters())
    exact = tuple(p for p in a.exact.split(",") if p)
    res = {k: [torch.zeros_like(p) for _ in range(a.ranks)] for k, p in params}
    est = {k: torch.zeros_like(p) for k, p in params}  # ef21: G, the same on every rank
    print("%s %s decay %g block %d, %s, %d ranks, seed %d" % (
        a.model, a.rule, a.decay, a.block, opt_name, a.ranks, a.seed), flush=True)
    step = 0
    for epoch in range(a.epochs):
        order = torch.from_numpy(np.random.default_rng([a.seed, epoch]).permutation(len(ytr)))
        order = order[:len(order) // per_step * per_step]
        for b in range(0, len(order), per_step):
            grads = []
            for r in range(a.ranks):
                i = order[b:b + per_step][r::a.ranks]
                model.zero_grad()
                F.cross_entropy(model(xtr[i]), ytr[i]).backward()
                grads.append({k: p.grad.detach().clone() for k, p in params})
            en = xn = 0.0
            cos = []
            for k, p in params:
                mean = sum(g[k] for g in grads) / a.ranks
                if (a.rule == "fp32" or p.numel() < a.exact_below or k.startswith(exact)
                        or step < a.exact_steps):
                    p.grad = mean
                    continue
                if a.rule == "ef21":
                    # res holds each rank's estimate g_i; compress's residual
                    # of the change d_i is d_i - a_i s_i, so the new g_i is
                    # x_i minus it
                    ds = [grads[r][k] - res[k][r] for r in range(a.ranks)]
                    out, left = compress("binary", ds, a.block)
                    est[k] = est[k] + out
                    res[k] = [grads[r][k] - left[r] for r in range(a.ranks)]
                    p.grad = est[k].clone()
                    en += sum(float(e.norm()) for e in left)
                elif a.rule == "shift":
                    # one shared estimate G (the last result): each rank
                    # sends x_i - G in binary, G += the binary mean
                    ds = [grads[r][k] - a.decay * est[k] for r in range(a.ranks)]
                    out, left = compress("binary", ds, a.block)
                    est[k] = a.decay * est[k] + out
                    p.grad = est[k].clone()
                    en += sum(float(e.norm()) for e in left)
                else:
                    ys = [grads[r][k] + a.decay * res[k][r] for r in range(a.ranks)]
                    p.grad, res[k] = compress(a.rule, ys, a.block)
                    en += sum(float(e.norm()) for e in res[k])
                xn += sum(float(g[k].norm()) for g in grads)
                cos.append(float(F.cosine_similarity(p.grad.flatten(), mean.flatten(), dim=0)))
            opt.step()
            sched.step()
            step += 1
            if cos and step % a.every == 0:
                print("step %d: residual ratio %.2f, cosine %.3f" % (
                    step, en / max(xn, 1e-30), sum(cos) / len(cos)), flush=True)
        model.eval()
        with torch.no_grad():
            acc = 100.0 * float((model(xte).argmax(1) == yte).float().mean())
        model.train()
        print("epoch %d: test accuracy %.2f %%" % (epoch + 1, acc), flush=True)


if __name__ == "__main__":
    main()
