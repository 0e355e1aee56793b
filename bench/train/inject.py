#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Does libnfcoll's health monitor catch a run made to diverge, and let it
back? The CNN under SGD (momentum 0.9 unless --momentum) on 2 ranks, run
as a user runs it: a calibration run (policies/calibrate.policy, naming no
parameter), then route = auto with health on and nothing else
(policies/auto-health.policy: the routes and decays calibration chose,
0.25 under momentum). Three runs with train.py: healthy, with the learning
rate x50 for one step (--inject lr50:60:1; at auto's decay x20 for one
step leaves the loss under 0.83, no divergence: docs/training.md, section
15), and with one rank's gradients x10 plus noise for 5 steps (--inject
corrupt:1:60:5:10). --config binary-decay-health runs section 3's
experiment instead: every gradient binary at ef_decay 0.5, health on, no
calibration, --lr-inject lr20:60:1 (its --check as before, but the healthy
run held to --healthy-max, 1 %, not 5 %).
Per run, from the stats' "admission" record and the rank-0 trace (NFCOLL_TRACE):

  - the share of the gradient bytes that ran fp32, overall and between the
    injection and the last re-entry;
  - the step of the first cool-down and its signal, the step of the last
    re-entry, and the share of the bytes on a low-bit route after it;
  - the final test accuracy.

--check asserts (tests/python_train.sh, make check-full): the healthy run
holds under --healthy-max % (1, issue 26's bound) of the bytes on fp32;
each injected run starts a cool-down within --within steps of the
injection's first step, names its signal, and re-enters low-bit
afterwards with at least 90 % of the bytes after the last re-entry on a
low-bit route (binary, ternary, int4, int3, int2). Except the corrupted
run on the integer routes alone (auto's int4): one rank's gradients x10
are that rank's gradients, which an integer route carries as fp32 would,
so no signal fires and none need; there the run must end at most 2 points
below the healthy one (--config binary-decay-health keeps the cool-down's
check on a sign route).

    bench/train/inject.py --build build --src . --python /usr/bin/python3 \\
        --epochs 2 --train-subset 12000 --check
"""

import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import (CALIBRATION, HERE, TRAIN_SETTINGS, Checks, Runner, calibrate,  # noqa: E402
                     runner_args)

LOWBIT = ("binary", "ternary", "int4", "int3", "int2")  # nf_route_lowbit

CONFIGS = {  # --config: (policy, calibrated, the lr injection's default)
    "auto-health": ("auto-health.policy", True, "lr50:60:1"),
    "binary-decay-health": ("binary-decay-health.policy", False, "lr20:60:1"),
}


def trace_records(path):
    """The rank-0 trace's records: (call, region, bytes, ran, health)."""
    out = []
    for line in open(path):
        if line.startswith("#"):
            continue
        f = line.split()
        # ... bytes route rule where region offset elements ran health why fallback
        out.append((int(f[1]), f[-7], 4 * int(f[-5]), f[-4], f[-3]))
    return out


def step_of(call, step_calls):
    """The training step that made hook call `call` (train.py's step_calls:
    the hook's calls before each step)."""
    s = 0
    while s + 1 < len(step_calls) and step_calls[s + 1] <= call:
        s += 1
    return s


def summarize(name, r, s, recs, inject):
    """What one run shows: bytes on fp32, cool-down and re-entry steps."""
    total = sum(b for _, _, b, _, _ in recs) or 1
    fp32 = sum(b for _, _, b, ran, _ in recs if ran == "fp32")
    adm = s.get("admission", {})
    firsts = [v["first_cooldown_call"] for v in adm.values() if v.get("first_cooldown_call")
              is not None]
    backs = [v["last_reentry_call"] for v in adm.values() if v.get("last_reentry_call")
             is not None]
    first_sig = None
    if firsts:
        c0 = min(firsts)  # the signal of the first cool-down, from the trace
        sigs = sorted({h for c, _, _, ran, h in recs if c == c0 + 1 and h not in ("-", "reentry")})
        first_sig = ",".join(sigs) or None
    out = {"config": name, "inject": inject, "final_acc": r["final_acc"], "acc": r["acc"],
           "steps": r["steps"], "fp32_pct": 100.0 * fp32 / total,
           "cooldown_step": step_of(min(firsts), r["step_calls"]) if firsts else None,
           "signal": first_sig,
           "signals": sorted({v["last_signal"] for v in adm.values() if v.get("last_signal")}),
           "reentry_step": step_of(max(backs), r["step_calls"]) if backs else None,
           # the share of the bytes on a sign route (binary, ternary), the rest of
           # the low-bit bytes being on an integer route
           "sign_pct": 100.0 * sum(b for _, _, b, ran, _ in recs
                                   if ran in ("binary", "ternary")) / total}
    if backs:
        after = [(b, ran) for c, _, b, ran, _ in recs if c >= max(backs)]
        low = sum(b for b, ran in after if ran in LOWBIT)
        out["lowbit_pct_after"] = 100.0 * low / (sum(b for b, _ in after) or 1)
    if firsts:
        span = [(b, ran) for c, _, b, ran, _ in recs if min(firsts) < c < (max(backs) if backs
                                                                          else 1 << 62)]
        out["fp32_pct_cooling"] = 100.0 * sum(b for b, ran in span if ran == "fp32") / \
            (sum(b for b, _ in span) or 1)
    return out


def run(runner, name, inject, a):
    trace = os.path.join(a.out, "%s.trace" % name)
    runner.pass_env["NFCOLL_TRACE"] = trace
    extra = ["--health"] + (["--inject", inject] if inject else [])
    r, s, _ = runner.train(name, "cnn", a.seed, os.path.join(a.out, "policies",
                                                             CONFIGS[a.config][0]), extra, a.out)
    return summarize(name, r, s, trace_records(trace + ".0"), inject)


def line(e):
    f = lambda v, p="%.2f": "-" if v is None else p % v  # noqa: E731
    return ("%-8s %-22s acc %6s  fp32 %6s %%  first cool-down step %4s (%s)  last re-entry "
            "step %4s  low-bit after %6s %%  fp32 while cooling %6s %%" % (
                e["config"], e["inject"] or "-", f(e["final_acc"]), f(e["fp32_pct"]),
                f(e["cooldown_step"], "%d"), e["signal"] or "-", f(e["reentry_step"], "%d"),
                f(e.get("lowbit_pct_after")), f(e.get("fp32_pct_cooling"))))


def check(runs, a):
    t = Checks()
    ok = t.ok
    h = runs["healthy"]
    ok(h["fp32_pct"] < a.healthy_max, "healthy: %.2f %% of the gradient bytes on fp32 "
       "(under %g)" % (h["fp32_pct"], a.healthy_max))
    for name in ("lr", "corrupt"):
        e = runs[name]
        at = int(e["inject"].split(":")[1 if name == "lr" else 2])  # its first step
        if name == "corrupt" and e["cooldown_step"] is None and e["sign_pct"] == 0.0:
            # One rank's gradients x10 is what that rank computed: an integer
            # route carries it as fp32 would (no error-feedback growth, no
            # spike), so health has no low-bit failure to take to fp32. What
            # must hold: the run is not hurt beyond the injection's own harm.
            ok(e["final_acc"] >= h["final_acc"] - 2.0,
               "%s (%s): no cool-down on the integer routes (the corruption is the "
               "gradient's, not the route's); final accuracy %.2f %%, healthy %.2f %% "
               "(at most 2 below)" % (name, e["inject"], e["final_acc"], h["final_acc"]))
            continue
        ok(e["cooldown_step"] is not None and at <= e["cooldown_step"] <= at + a.within,
           "%s (%s): a cool-down starts at step %s, within %d steps of %d, signal %s"
           % (name, e["inject"], e["cooldown_step"], a.within, at, e["signal"]))
        ok(e["reentry_step"] is not None and e.get("lowbit_pct_after", 0) >= 90.0,
           "%s: low-bit re-enters (step %s), %s %% of the bytes after it on a low-bit "
           "route (at least 90)" % (name, e["reentry_step"],
                                     "-" if e.get("lowbit_pct_after") is None
                                     else "%.2f" % e["lowbit_pct_after"]))
    return t.failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", choices=sorted(CONFIGS), default="auto-health",
                    help="what runs: a calibration run, then route = auto with health on "
                    "(default), or every gradient binary at ef_decay 0.5 with health on")
    ap.add_argument("--lr-inject", help="train.py --inject for the lr run (default lr50:60:1, "
                    "lr20:60:1 with --config binary-decay-health)")
    ap.add_argument("--corrupt-inject", default="corrupt:1:60:5:10",
                    help="train.py --inject for the corrupted run")
    ap.add_argument("--within", type=int, default=6, help="steps from the injection's first "
                    "step within which a cool-down must start (--check)")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--train-subset", type=int, default=12000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lr", type=float, help="train.py's learning rate (default its own, 0.05)")
    ap.add_argument("--momentum", type=float, help="train.py's SGD momentum (default its own, "
                    "0.9; 0 for plain SGD, where calibration keeps the whole residual)")
    ap.add_argument("--out", default="inject-check")
    runner_args(ap, 900)
    ap.add_argument("--healthy-max", type=float, default=1.0, help="the most of the gradient "
                    "bytes, in %%, the healthy run may hold on fp32 (--check; default 1)")
    ap.add_argument("--check", action="store_true", help="assert the claims above")
    a = ap.parse_args()
    for k in TRAIN_SETTINGS:
        if not hasattr(a, k):
            setattr(a, k, None)  # train.py's defaults: SGD, cosine
    policy, calibrated, lr_default = CONFIGS[a.config]
    a.lr_inject = a.lr_inject or lr_default
    os.makedirs(os.path.join(a.out, "policies"), exist_ok=True)
    for f in (policy,) + ((CALIBRATION[0],) if calibrated else ()):
        shutil.copy(os.path.join(HERE, "policies", f), os.path.join(a.out, "policies"))
    runner = Runner(a)
    runs = {}
    if calibrated:  # the profile auto-health.policy reads, from this model and seed
        c = calibrate(runner, "cnn", a.seed, a.out)
        if "skipped" in c:
            print("ok - fault injection # SKIP %s" % c["skipped"])
            return 0
        chose = ["%s %s decay %s" % (k, v["route"], v["ef_decay"])
                 for k, v in sorted(c["profile"].items())]
        print("calibration: %s" % ", ".join(chose), flush=True)
    why = runner.unsupported(os.path.join(a.out, "policies", policy))  # after its profile
    if why:
        print("ok - fault injection # SKIP %s" % why)
        return 0
    for name, inject in (("healthy", None), ("lr", a.lr_inject), ("corrupt", a.corrupt_inject)):
        runs[name] = run(runner, name, inject, a)
        print(line(runs[name]), flush=True)
    with open(os.path.join(a.out, "inject.json"), "w") as f:
        json.dump(runs, f, indent=1)
    return check(runs, a) if a.check else 0


if __name__ == "__main__":
    sys.exit(1 if main() else 0)
