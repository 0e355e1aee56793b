#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The libnfcoll training check: Fashion-MNIST and a byte-level language
model under PyTorch DDP with nfcoll's comm hook, one mpirun per
configuration, then a table and a plot.

    bench/train/compare.py --np 2 --models cnn,mlp,vit,lm --epochs 3 --seeds 1,2 \
        --out train-check

Models and optimizers (train.py): the CNN and the MLP with SGD (momentum
0.9, weight decay 5e-4, lr 0.05, cosine), the Transformers (vit on
Fashion-MNIST, lm on WordNet's glosses) with AdamW (weight decay 0.05, lr
1e-3, 10 % warm-up, cosine); --optimizer, --lr, --momentum, --weight-decay
and --warmup override them for every model. Every configuration runs once
per seed; the table gives the mean final score (test accuracy; lm:
validation perplexity), its spread (half the range over the seeds), each
seed's, and the mean's distance from fp32's (points; lm: per cent).

Configurations (policies in bench/train/policies/, copied next to the
results); the default set is the first six (lm: the first five):

    fp32           no policy: every gradient through Open MPI's allreduce (pmpi)
    bf16-all       every parameter on the bf16 route
    binary-all     every parameter G-Binary, each with its own scale
    head-fp32      head.* exact (lm: also its embeddings wte and wpe), every
                   other parameter G-Binary
    auto           a calibration run (naming no parameter) writes
                   calib.profile; the run uses route = auto and nothing else:
                   each region's route and error-feedback decay are the
                   profile's (the decay chosen from the measured lag cosine)
    auto-health    auto with health = on, the loss reported every step
    binary-decay   binary-all with ef_decay = 0.5 (the residual halved on reuse)
    auto-warmup    auto-health with warmup = 120: each region's first 120
                   calls fp32 (8.5 % of a 3-epoch run at 2 ranks: what a 12 %
                   byte budget leaves beside binary)
    ternary-all    every parameter G-Ternary
    binary-block   binary-decay with one scale per 512 elements (scale_block)
    binary-health  binary-all with health = on, the loss reported every step

A configuration followed by +KEY=VALUE parts (any but fp32) is that one
with those rule keys (nfcoll-policy(5): not [policy] keys) set in every
rule of its policy (written as
policies/NAME.policy, version 4): auto+ef_decay=0,
ternary-all+ef_decay=0.25, auto+warmup=20 are docs/training.md's
section 12.

auto, auto-health and auto-warmup (and configurations derived from them)
of one model and seed share one calibration run. fp32 and auto (the headline, held to the targets of
TARGETS below) also run on --headline-seeds; the table ends each model
with the headline's margin to its targets.

A configuration the library in use cannot run (nfcoll_policy check drops a
setting or route it does not know) is skipped, with that reason.
Traffic is each run's libnfcoll stats (NFCOLL_STATS), summed over ranks,
as % of FP32: upstream bytes over the bytes of fp32 gradients reduced
(what libnfcoll's exact route sends up), total bytes over twice that (up
and back). binary-health's health events are the stats' "health" object:
cool-downs started, by signal and segment. --configs runs some; --merge
adds a previous run's summary.json for the rest (table, summary, plot).
--check asserts what make check-full asserts (tests/python_train.sh; check()).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = {  # name: (policy, train.py arguments, a function it needs)
    "fp32": (None, [], None),
    "bf16-all": ("bf16-all.policy", [], None),
    "binary-all": ("binary-all.policy", [], None),
    "head-fp32": ("head-fp32.policy", [], None),
    "auto": ("auto.policy", [], None),
    "auto-health": ("auto-health.policy", ["--health"], "NF_Health_report"),
    "binary-decay": ("binary-decay.policy", [], None),
    "binary-block": ("binary-block.policy", [], None),
    "ternary-all": ("ternary-all.policy", [], None),
    "binary-health": ("binary-health.policy", ["--health"], "NF_Health_report"),
    "auto-warmup": ("auto-warmup.policy", ["--health"], "NF_Health_report"),
}
DEFAULT_CONFIGS = ("fp32", "bf16-all", "binary-all", "head-fp32", "auto", "auto-health")
# What route = auto alone is to reach, per model: (distance from fp32's mean
# final score: accuracy points below, or per cent of perplexity above; upstream
# bytes as % of FP32's), docs/training.md. HEADLINE is the configuration held to it.
TARGETS = {"cnn": (0.3, 14.0), "mlp": (0.3, 14.0), "vit": (0.6, 14.0), "lm": (2.0, 14.0)}
HEADLINE = "auto"
MODEL_CONFIGS = {"lm": ("fp32", "bf16-all", "binary-all", "head-fp32", "auto")}  # else DEFAULT_
MODELS = ("cnn", "mlp", "vit", "lm")
CALIBRATED = ("auto", "auto-health", "auto-warmup")  # configurations that read calib.profile
CALIBRATION = ("calibrate.policy", "calib.profile")
LAG_CALLS = 100  # calibration's lag-cosine window ends here (NF_CALIB_LAG_TO)
# train.py settings compare.py passes on when given (else train.py's defaults)
TRAIN_SETTINGS = ("optimizer", "lr", "momentum", "weight_decay", "warmup", "schedule")


def runner_args(ap, timeout):
    """The arguments Runner reads, on an argparse parser."""
    ap.add_argument("--build", help="a build tree: its libnfcoll.so and nfcoll_policy")
    ap.add_argument("--src", help="a source tree: its python/ package")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--mpirun-args", default=os.environ.get("NF_MPIRUN_EXTRA", ""))
    ap.add_argument("--timeout", type=int, default=timeout, help="seconds per mpirun")


class Checks:
    """TAP lines for --check: ok(cond, what) prints one and counts it when
    it failed (failed)."""

    def __init__(self):
        self.failed = 0

    def ok(self, cond, what):
        print(("ok - " if cond else "not ok - ") + what, flush=True)
        self.failed += not cond


class Runner:
    """Runs train.py under mpirun with the library, tools and package chosen."""

    def __init__(self, a):
        self.a = a
        self.env = dict(os.environ)
        if os.geteuid() == 0:
            self.env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        self.pass_env = {}
        if a.build:
            self.pass_env["NFCOLL_LIBRARY"] = os.path.join(a.build, "lib", ".libs", "libnfcoll.so")
        elif os.environ.get("NFCOLL_LIBRARY"):
            self.pass_env["NFCOLL_LIBRARY"] = os.environ["NFCOLL_LIBRARY"]
        if a.src:
            self.pass_env["PYTHONPATH"] = os.path.join(a.src, "python")
        self.policy_tool = os.path.join(a.build, "tools", "nfcoll_policy") if a.build \
            else shutil.which("nfcoll_policy") or "nfcoll_policy"

    def lacks(self, symbol):
        """Why the library the runs load has no such function, or None."""
        import ctypes
        path = self.pass_env.get("NFCOLL_LIBRARY", "libnfcoll.so.0")
        try:
            if hasattr(ctypes.CDLL(path), symbol):
                return None
        except OSError as e:
            return "cannot load %s: %s" % (path, e)
        return "the libnfcoll in use (%s) has no %s" % (path, symbol)

    def unsupported(self, policy):
        """Why the library in use cannot run this policy, or None."""
        try:
            p = subprocess.run([self.policy_tool, "check", policy], capture_output=True,
                               text=True, env=self.env, timeout=60)
        except OSError as e:
            return "cannot run nfcoll_policy: %s" % e
        if p.returncode == 0:
            return None
        lines = [ln for ln in (p.stderr + p.stdout).splitlines() if "warning:" in ln
                 or "error:" in ln]
        why = re.sub(r"^.*?:\d+: (warning|error): ", "", lines[0]) if lines else "?"
        return "the libnfcoll in use drops a setting (nfcoll_policy check: %s)" % why

    def train(self, name, model, seed, policy, extra, out):
        """One mpirun; (results, stats, log text) or raises RuntimeError."""
        res, stats, log = (os.path.join(out, "%s.%s.s%d.%s" % (model, name, seed, x))
                           for x in ("json", "stats.json", "log"))
        env = dict(self.pass_env, NFCOLL_STATS=stats)
        if policy:
            env["NFCOLL_POLICY"] = policy
        session = tempfile.mkdtemp(prefix="nfcoll-train.")  # mpiruns side by side: own session dirs
        cmd = [self.a.mpirun, "--oversubscribe", "--bind-to", "none",
               "--mca", "orte_tmpdir_base", session] + self.a.mpirun_args.split()
        cmd += ["-np", str(self.a.np)]
        for k, v in env.items():
            cmd += ["-x", "%s=%s" % (k, v)]
        cmd += [self.a.python, os.path.join(HERE, "train.py"), "--model", model,
                "--epochs", str(self.a.epochs), "--train-subset", str(self.a.train_subset),
                "--seed", str(seed), "--out", res] + extra
        for k in TRAIN_SETTINGS:
            if getattr(self.a, k) is not None:
                cmd += ["--" + k.replace("_", "-"), str(getattr(self.a, k))]
        print("+ %s" % " ".join(cmd[:1] + cmd[cmd.index("-np"):]), file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            with open(log, "w") as f:
                rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=self.env,
                                    timeout=self.a.timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout after %d s" % self.a.timeout
        finally:
            shutil.rmtree(session, ignore_errors=True)
        text = open(log).read()
        if rc != 0 or not os.path.exists(res):
            raise RuntimeError("%s %s failed (%s); last lines of %s:\n%s"
                               % (model, name, rc, log, "\n".join(text.splitlines()[-15:])))
        r = json.load(open(res))
        r["mpirun_seconds"] = time.perf_counter() - t0
        s = json.load(open(stats)) if os.path.exists(stats) else {}
        return r, s, text


def traffic(stats):
    """Upstream and total bytes as % of FP32, and as % of an FP32 ring."""
    routes = stats.get("routes", {}).values()
    b, up, tot, ring = (sum(r[k] for r in routes) for k in
                        ("bytes", "upstream_bytes", "total_bytes", "fp32_ring_bytes"))
    pct = lambda x, y: 100.0 * x / y if y else None  # noqa: E731
    return {"bytes": b, "upstream_pct_fp32": pct(up, b), "total_pct_fp32": pct(tot, 2 * b),
            "upstream_pct_ring": pct(2 * up, ring), "total_pct_ring": pct(tot, ring),
            "routes": {k: v["calls"] for k, v in stats.get("routes", {}).items() if v["calls"]},
            "route_bytes": {k: v["bytes"] for k, v in stats.get("routes", {}).items() if v["calls"]}}


PROFILE_INT = ("cos_int4", "cos_int3", "cos_int2", "relerr_int4", "relerr_int3", "relerr_int2")


def read_profile(path):
    """The profile's entries: {segment: {elements, calls, cos_*, relerr_*, route,
    lag_cosine, ef_decay}} (versions 1-3; lag_cosine and ef_decay None where
    '-' or v1, the integer routes' columns only from v3)."""
    out = {}
    opt = lambda x: None if x == "-" else float(x)  # noqa: E731
    for line in open(path):
        f = line.split()
        if len(f) in (8, 10, 16) and not line.startswith("#"):
            out[f[0]] = dict(zip(("elements", "calls", "cos_binary", "cos_ternary",
                                  "relerr_binary", "relerr_ternary"),
                                 [int(f[1]), int(f[2])] + [float(x) for x in f[3:7]]),
                             route=f[7], lag_cosine=opt(f[8]) if len(f) >= 10 else None,
                             ef_decay=opt(f[9]) if len(f) >= 10 else None)
            if len(f) == 16:
                out[f[0]].update(zip(PROFILE_INT, [float(x) for x in f[10:16]]))
    return out


def policy_value(path, key, default):
    for line in open(path):
        m = re.match(r"\s*%s\s*[=:]\s*([^\s;#]+)" % key, line, re.I)
        if m:
            return m.group(1)
    return default


def health_events(stats, log):
    """What the health monitor reported: the stats' "health" entry ({segment:
    {signal: count}}, summed over ranks), else its log lines."""
    h = stats.get("health")
    if h is not None:
        return h
    return [ln for ln in log.splitlines() if ln.startswith("libnfcoll") and "health" in ln.lower()]


def health_counts(ev, ranks):
    """Cool-downs started, by signal, from the stats' health object. Every rank
    counts each agreed event, so the sums over ranks are divided by the ranks."""
    by = {}
    for sig in ev.values():
        for k, v in sig.items():
            by[k] = by.get(k, 0) + v
    return {k: v / ranks for k, v in by.items()}


def calibrate(runner, model, seed, out):
    """The calibration run of (model, seed): {profile, admit_cosine, seconds,
    path} or {skipped}. Its profile is kept as MODEL.sSEED.calib.profile and
    copied to policies/calib.profile, which the calibrated policies read."""
    calib = os.path.join(out, "policies", CALIBRATION[0])
    why = runner.unsupported(calib)
    if why:
        return {"skipped": "calibration: " + why}
    prof = os.path.join(out, "policies", CALIBRATION[1])
    if os.path.exists(prof):
        os.unlink(prof)
    calls = int(policy_value(calib, "calibrate_calls", 20))
    # the cosines take the first `calls` calls; the lag cosine that chooses
    # ef_decay takes calls 20-99 (docs/design.md, "Calibration")
    r, _, _ = runner.train("calibrate", model, seed, calib,
                           ["--steps", str(max(calls, LAG_CALLS) + 1)], out)
    if not os.path.exists(prof):
        raise RuntimeError("%s: the calibration run wrote no profile %s" % (model, prof))
    keep = os.path.join(out, "%s.s%d.calib.profile" % (model, seed))
    shutil.copy(prof, keep)
    return {"profile": read_profile(prof), "seconds": r["mpirun_seconds"], "path": keep,
            "admit_cosine": float(policy_value(calib, "admit_cosine", 0.5))}


def base_of(name):
    """The configuration a derived one ('BASE+KEY=VALUE[+KEY=VALUE...]') is
    made from; name itself when it is not derived."""
    return name.partition("+")[0]


def config(name):
    """CONFIGS' entry for name, or for a derived configuration its base's:
    the base's policy with every KEY = VALUE set in each of its rules. None
    when name is neither (an unknown base, a base without a policy, or a
    part that is not KEY=VALUE)."""
    base, plus, rest = name.partition("+")
    if base not in CONFIGS or (plus and CONFIGS[base][0] is None):
        return None
    if plus and not all(re.fullmatch(r"[a-z_]+=[A-Za-z0-9_.-]+", k) for k in rest.split("+")):
        return None
    return CONFIGS[base]


def derived_policy(out, name):
    """Write the policy of derived configuration name next to its base's in
    out/policies and return its path: each key replaces the rule's own or is
    added after the last setting of every [rule] section; [policy] says
    version 4, so that any key or route this tree knows is read (docs/training.md,
    section 12). Sections and keys are matched as the library reads them:
    any case, comments after # or ;, KEY = VALUE or KEY: VALUE."""
    base = os.path.join(out, "policies", CONFIGS[base_of(name)][0])
    keys = [k.split("=", 1) for k in name.split("+")[1:]]
    names = {k for k, _ in keys}
    lines, kind, last = [], None, 0  # last: where a rule's settings end in lines

    def close():
        if kind == "rule":
            lines[last:last] = ["%s = %s" % (k, v) for k, v in keys]
    for line in open(base).read().splitlines():
        head = re.split(r"[#;]", line, maxsplit=1)[0].strip()
        section = re.match(r"\[\s*(\w+)", head)
        key = re.split(r"[=:]", head, maxsplit=1)[0].strip().lower() if head else ""
        if section:
            close()
            kind = section.group(1).lower()
        elif kind == "policy" and key == "version":
            line = "version = 4"
        elif kind == "rule" and key in names:
            continue
        lines.append(line)
        if head:  # a setting or a section's header: the keys go after it
            last = len(lines)
    close()
    path = os.path.join(out, "policies", name + ".policy")
    with open(path, "w") as f:
        f.write("# %s, made by compare.py from %s\n%s\n" % (name, os.path.basename(base),
                                                           "\n".join(lines)))
    return path


def run_config(runner, name, model, seed, out, calibrations):
    policy, extra, needs = config(name)
    entry = {"config": name, "model": model, "seed": seed}
    why = needs and runner.lacks(needs)
    if why:
        return dict(entry, skipped=why)
    pol = os.path.join(out, "policies", policy) if policy else None
    if pol and name != base_of(name):
        pol = derived_policy(out, name)
    if base_of(name) in CALIBRATED:
        first = (model, seed) not in calibrations
        if first:
            calibrations[(model, seed)] = calibrate(runner, model, seed, out)
        c = calibrations[(model, seed)]
        if "skipped" in c:
            return dict(entry, skipped=c["skipped"])
        shutil.copy(c["path"], os.path.join(out, "policies", CALIBRATION[1]))
        if first:  # the run that paid for it shows its time
            entry["calibration_seconds"] = c["seconds"]
        entry["admit_cosine"], entry["profile"] = c["admit_cosine"], c["profile"]
    if pol:
        why = runner.unsupported(pol)
        if why:
            return dict(entry, skipped=why)
    r, s, log = runner.train(name, model, seed, pol, extra, out)
    entry.update(result=r, traffic=traffic(s),
                 regions={k: sorted(v) for k, v in s.get("regions", {}).items()})
    if "--health" in extra:
        entry["health"] = health_events(s, log)
    return entry


def fmt(x, f="%.1f"):
    return "-" if x is None else f % x


def label(e):
    """A row's name: the configuration, * when merged from an earlier run."""
    return e["config"] + "*" * ("merged_from" in e)


def mean(xs):
    return sum(xs) / len(xs) if xs else None


def spread(xs):
    """Half the range: the +- of a mean over seeds."""
    return (max(xs) - min(xs)) / 2.0 if xs else None


def scores(r):
    """A run's score per epoch: test accuracy (%), or validation perplexity."""
    return r["score"] if "score" in r else r["acc"]  # "score": train.py with lm


def final(r):
    return scores(r)[-1]


def perplexity(r):
    return r.get("metric") == "perplexity"


def versus(r, x, base):
    """x's distance from the fp32 score base: accuracy points, or perplexity
    in per cent of fp32's (positive: worse)."""
    return 100.0 * (x - base) / base if perplexity(r) else x - base


def groups(entries, model):
    """{configuration: [its entries over seeds]} for one model, in run order."""
    out = {}
    for e in entries:
        if e["model"] == model:
            out.setdefault(e["config"], []).append(e)
    return out


def setting_line(r):
    """The optimizer and schedule a run trained with, as the table states them."""
    if "optimizer" not in r:  # an earlier train.py: plain SGD at a fixed lr
        return "SGD lr %g momentum %g, constant lr" % (r["lr"], r.get("momentum") or 0)
    opt = "SGD momentum %g" % r["momentum"] if r["optimizer"] == "sgd" else "AdamW"
    sched = "%s%s" % ("warm-up %d steps, then " % r["warmup_steps"] if r["warmup_steps"] else "",
                      "cosine to 0" if r["schedule"] == "cosine" else "constant")
    return "%s, lr %g, weight decay %g, %s over %d steps" % (
        opt, r["lr"], r["weight_decay"], sched, r["total_steps"])


def table(entries, a):
    """The results as text: one row per configuration (mean over seeds), then
    calibration and health details."""
    lines = []
    for model in a.models:
        rows = groups(entries, model)
        first = next((e["result"] for es in rows.values() for e in es if "result" in e), None)
        if first is None:
            continue
        seeds = sorted({e["seed"] for es in rows.values() for e in es})
        ppl = perplexity(first)
        lines.append("%s (%d parameters), %d ranks, %d epoch%s of %s training %s, "
                     "batch %d per rank, seeds %s" % (
                         model, first["params"], first["ranks"], a.epochs, "s" * (a.epochs > 1),
                         first["train_images"], "windows of 257 bytes" if ppl else "images",
                         first["batch_per_rank"], ",".join(map(str, seeds))))
        lines.append(setting_line(first))
        base = {e["seed"]: final(e["result"]) for e in rows.get("fp32", []) if "result" in e}
        cw = max([14] + [len(label(e)) for es in rows.values() for e in es])
        lines.append("%-*s %-22s %7s %6s %8s %-20s %8s %8s %7s  %s" % (
            cw, "config", "mean ppl per epoch" if ppl else "mean acc % per epoch", "final", "+-",
            "vs fp32", "per seed", "up %fp32", "tot %fp32", "train s", "same weights"))
        for name, es in rows.items():
            done = [e for e in es if "result" in e]
            for e in es:
                if "skipped" in e:
                    lines.append("%-*s seed %d skipped: %s" % (cw, label(e), e["seed"],
                                                               e["skipped"]))
            if not done:
                continue
            accs = [scores(e["result"]) for e in done]
            per_epoch = [mean([x[i] for x in accs]) for i in range(min(map(len, accs)))]
            finals = [final(e["result"]) for e in done]
            paired = [versus(first, final(e["result"]), base[e["seed"]]) for e in done
                      if e["seed"] in base]
            vs = mean(paired) if paired else None
            up = [e["traffic"]["upstream_pct_fp32"] for e in done]
            tot = [e["traffic"]["total_pct_fp32"] for e in done]
            wall = fmt(mean([e["result"]["train_seconds"] for e in done]))
            cal = sum(e.get("calibration_seconds", 0) for e in done)
            if cal:  # the calibration mpiruns this configuration paid for, per seed
                wall += "+%s" % fmt(cal / len(done), "%.0f")
            lines.append("%-*s %-22s %7.2f %6.2f %8s %-20s %8s %8s %7s  %s" % (
                cw, label(done[0]), " ".join("%.2f" % x for x in per_epoch), mean(finals),
                spread(finals), fmt(vs, "%+.2f%%" if ppl else "%+.2f"),
                " ".join("%.2f" % x for x in finals),
                fmt(mean(up) if None not in up else None, "%.2f"),
                fmt(mean(tot) if None not in tot else None, "%.2f"), wall,
                "yes" if all(e["result"]["identical_weights"] for e in done) else "NO"))
        lines.append("final: mean over the seeds, +- half their range; vs fp32: the mean over "
                     "those seeds of the distance\nfrom fp32's run of the same seed (%s); "
                     "up/tot %%fp32: bytes each rank sent up / sent\nand read back, summed over "
                     "ranks (libnfcoll " % (
                         "per cent of its perplexity, + worse" if ppl else "accuracy points") +
                     "stats), over those of the exact fp32 route for the same\ngradients (the "
                     "fp32 row is Open MPI's ring: (n-1)/n each way); train s: training without "
                     "evaluation\n(+ the calibration run's whole mpirun for the first "
                     "calibrated configuration)")
        lines += target_lines(model, rows, base, ppl)
        merged = sorted({e["merged_from"] for es in rows.values() for e in es
                         if "merged_from" in e})
        if merged:
            lines.append("*: from an earlier run, %s (--merge)" % ", ".join(merged))
        shown = set()
        for es in rows.values():
            for e in es:
                if "profile" in e and e["seed"] not in shown:
                    shown.add(e["seed"])
                    lines += profile_lines(e, rows)
        for es in rows.values():
            for e in es:
                if "health" in e:
                    lines += health_lines(e)
        lines.append("")
    return "\n".join(lines)


def target_lines(model, rows, base, ppl):
    """HEADLINE's distance from fp32 and traffic against the model's TARGETS,
    with the margin (positive: met by that much)."""
    if model not in TARGETS:
        return []
    most, up_most = TARGETS[model]
    done = [e for e in rows.get(HEADLINE, []) if "result" in e and e["seed"] in base]
    if not done:
        return ["target (%s): no %s run beside fp32" % (model, HEADLINE)]
    d = [versus(e["result"], final(e["result"]), base[e["seed"]]) for e in done]
    up = [e["traffic"]["upstream_pct_fp32"] for e in done]
    worse = mean(d) if ppl else -mean(d)  # how much worse than fp32, in the target's unit
    unit, side = ("%", "above fp32's perplexity") if ppl else (" points", "below fp32")
    ok = lambda margin: "met by %.2f" % margin if margin >= 0 else \
        "MISSED by %.2f" % -margin  # noqa: E731
    return ["target for %s (%s, seeds %s): at most %g%s %s: %.2f%s %s (+- %.2f), %s; at most "
            "%g %% of FP32's upstream bytes: %.2f %%, %s" % (
                model, HEADLINE, ",".join(str(e["seed"]) for e in done), most, unit, side,
                abs(worse), unit, side.split()[0] if worse >= 0 else
                ("below fp32's perplexity" if ppl else "above fp32"), spread(d),
                ok(most - worse), up_most, mean(up), ok(up_most - mean(up)))]


def profile_lines(e, rows):
    """What calibration measured and admitted for e's seed, and what each
    calibrated configuration of that seed ran."""
    ran = {c: x.get("regions", {}) for c in rows if base_of(c) in CALIBRATED
           for x in rows[c] if x["seed"] == e["seed"] and "result" in x}
    out = ["calibration, seed %d: over the first %d calls, admit_cosine %.2f; what it measured "
           "and admitted, and what the runs took (%s):" % (
               e["seed"], max([p["calls"] for p in e["profile"].values()] or [0]),
               e["admit_cosine"], ", ".join(ran) or "none ran")]
    w = max([len(k) for k in e["profile"]] + [7])
    out.append("  %-*s %8s %8s %8s %8s %8s %8s %8s  %-8s %7s %5s %s" % (
        w, "segment", "elements", "cos bin", "cos ter", "cos int4", "rel bin", "rel ter",
        "rel int4", "admitted", "lag cos", "decay", "ran"))
    opt = lambda v, f: "-" if v is None else f % v  # noqa: E731
    for seg, p in e["profile"].items():
        out.append("  %-*s %8d %8.4f %8.4f %8s %8.4f %8.4f %8s  %-8s %7s %5s %s" % (
            w, seg, p["elements"], p["cos_binary"], p["cos_ternary"],
            opt(p.get("cos_int4"), "%.4f"), p["relerr_binary"], p["relerr_ternary"],
            opt(p.get("relerr_int4"), "%.4f"), p["route"], opt(p.get("lag_cosine"), "%+.3f"),
            opt(p.get("ef_decay"), "%.2f"),
            " ".join("%s:%s" % (c, ",".join(r.get(seg, ["-"]))) for c, r in ran.items())))
    return out


def health_lines(e):
    """The health events of a run: cool-downs by signal, then by segment."""
    ev, ranks = e["health"], e["result"]["ranks"]
    if isinstance(ev, list):  # a library without the stats' health object: its log lines
        return ["health (%s, seed %d): %d log line%s%s" % (e["config"], e["seed"], len(ev),
                                                           "s" * (len(ev) != 1),
                                                  "".join("\n  " + x for x in ev[:10]))]
    by = health_counts(ev, ranks)
    b = e["traffic"].get("route_bytes", {})
    out = ["health (%s, seed %d): %s; %s of the gradient bytes ran fp32" % (
        e["config"], e["seed"], "none fired" if not any(by.values()) else
        "segment cool-downs started " + ", ".join("%s %g" % (k, v)
                                                  for k, v in sorted(by.items()) if v),
        fmt(100.0 * b.get("fp32", 0) / sum(b.values()) if b else None, "%.2f %%"))]
    for seg, sig in sorted(ev.items()):  # a loss spike cools every low-bit segment down
        out.append("  %-14s %s" % (seg, " ".join("%s %g" % (k, v / ranks)
                                                 for k, v in sorted(sig.items()) if v)))
    return out


def plot(entries, a, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(a.models), figsize=(6 * len(a.models), 4.2), squeeze=False)
    for ax, model in zip(axes[0], a.models):
        for name, es in groups(entries, model).items():
            accs = [scores(e["result"]) for e in es if "result" in e]
            if not accs:
                continue
            acc = [mean([x[i] for x in accs]) for i in range(min(map(len, accs)))]
            dashed = base_of(name).endswith("-health")  # may lie on its base configuration's line
            ax.plot(range(1, len(acc) + 1), acc, marker="x" if dashed else "o",
                    linestyle="--" if dashed else "-", label="%s (%d)" % (name, len(accs)))
        ax.set_title("%s, %s, %d ranks (mean over (n) seeds)" % (
            "WordNet glosses" if model == "lm" else "Fashion-MNIST", model, a.np))
        ax.set_xlabel("epoch")
        ax.set_ylabel("validation perplexity" if model == "lm" else "test accuracy (%)")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def check(entries, a):
    """make check-full's assertions; returns the number that failed."""
    t = Checks()
    ok = t.ok
    for model, seed in ((m, x) for m in a.models for x in a.seeds):
        by = {e["config"]: e for e in entries if e["model"] == model and e["seed"] == seed}
        base = by.get("fp32", {}).get("result")
        for e in by.values():
            if "result" in e:
                ok(e["result"]["identical_weights"], "%s %s: identical weights on every rank "
                   "(sha256 %s...)" % (model, e["config"], e["result"]["weights_sha256"][:16]))
        for name in ("head-fp32", "auto", "auto-health"):
            e = by.get(name)
            if e is None:
                continue
            if "skipped" in e:
                print("ok - %s %s # SKIP %s" % (model, name, e["skipped"]), flush=True)
                continue
            if base is None:
                ok(False, "%s %s: no fp32 run to compare with" % (model, name))
                continue
            x, b = final(e["result"]), final(base)
            d = versus(base, x, b)
            if perplexity(base):
                # 16 steps: head-fp32 is +5.9 % here (2026-12-03); binary without
                # its residual or a wrong route is far beyond 10
                ok(d <= 10.0, "%s %s: validation perplexity %.4f, %+.2f %% of fp32's %.4f "
                   "(at most 10 %% above)" % (model, name, x, d, b))
            else:
                ok(d >= -2.0, "%s %s: final accuracy %.2f %%, %+.2f points from fp32's %.2f %% "
                   "(at most 2 below)" % (model, name, x, d, b))
        e = by.get("head-fp32")
        if e and "result" in e:
            up = e["traffic"]["upstream_pct_fp32"]
            most = 20.0 if model == "lm" else 6.0  # lm: wte, wpe and head are 14.2 % of it
            ok(up is not None and up <= most, "%s head-fp32: upstream traffic %s %% of FP32 "
               "(at most %g)" % (model, fmt(up, "%.2f"), most))
            heads = {k: v for k, v in e["regions"].items()  # head-fp32.policy's exact regions
                     if k.startswith(("head.", "wte.")) or k == "wpe"}
            ok(heads and all(v == ["fp32"] for v in heads.values()) and
               all(v == ["binary"] for k, v in e["regions"].items() if k not in heads),
               "%s head-fp32: regions ran %s" % (model, " ".join(
                   "%s:%s" % (k, ",".join(v)) for k, v in sorted(e["regions"].items()))))
        for name in ("auto", "auto-health"):
            e = by.get(name)
            if e and "result" in e:
                up = e["traffic"]["upstream_pct_fp32"]
                # int4 with blocks of 128: 4.25 bits of 32 (issue 56's target: 14)
                ok(up is not None and up <= 14.0, "%s %s: upstream traffic %s %% of FP32 "
                   "(at most 14)" % (model, name, fmt(up, "%.2f")))
        e = by.get("auto-health")
        if e and "result" in e:  # a healthy run: health may not hold it on fp32
            def fp32_share(x):
                b = x["traffic"].get("route_bytes", {}) if x and "result" in x else {}
                return 100.0 * b.get("fp32", 0) / sum(b.values()) if b else 0.0
            # what auto itself admitted to fp32 is not health's
            cool = max(0.0, fp32_share(e) - fp32_share(by.get("auto")))
            by_sig = health_counts(e.get("health", {}), e["result"]["ranks"]) \
                if isinstance(e.get("health"), dict) else {}
            ok(cool <= 5.0, "%s auto-health: %.2f %% of the gradient bytes ran fp32 (at most 5; "
               "cool-downs %s)" % (model, cool, ", ".join("%s %g" % kv for kv in
                                                           sorted(by_sig.items())) or "none"))
        e = by.get("auto")
        if e and "profile" in e:
            thr, bad = e["admit_cosine"], []
            for seg, p in e["profile"].items():
                if "cos_int4" in p:  # version 3: int4 or fp32 (nfcoll-policy(5))
                    want = "int4" if p["cos_int4"] >= thr else "fp32"
                else:
                    want = "binary" if p["cos_binary"] >= thr else \
                        "ternary" if p["cos_ternary"] >= thr else "fp32"
                ran = e["regions"].get(seg)
                if p["route"] != want or ran != [p["route"]]:
                    bad.append("%s: cos %.4f/%.4f/%.4f admitted %s ran %s" % (
                        seg, p["cos_binary"], p["cos_ternary"], p.get("cos_int4", float("nan")),
                        p["route"], ran))
            names = set(e["result"]["regions"])
            ok(not bad and set(e["profile"]) == names,
               "%s auto: admitted exactly the segments whose cosine reached %.2f, and ran them "
               "so (%s)%s" % (model, thr, ", ".join("%s %s" % (k, p["route"]) for k, p in
                                                    e["profile"].items()),
                              "; " + "; ".join(bad) if bad else ""))
    return t.failed


SETTINGS = ("np", "epochs", "train_subset") + TRAIN_SETTINGS


def merge(entries, a):
    """entries plus a previous run's (a.merge) for the (model, configuration)
    pairs and seeds not run now, in CONFIGS order; each marked merged_from."""
    prev = json.load(open(a.merge))
    if "seeds" not in prev:
        raise SystemExit("--merge %s: from a compare.py without seeds; run it again" % a.merge)
    differ = ["%s %s here, %s there" % (k, getattr(a, k), prev.get(k))
              for k in SETTINGS if prev.get(k) != getattr(a, k)]
    if differ:
        raise SystemExit("--merge %s: other settings (%s)" % (a.merge, "; ".join(differ)))
    have = {(e["model"], e["config"], e["seed"]) for e in entries}
    old = [dict(e, merged_from=os.path.abspath(a.merge)) for e in prev["runs"]
           if e["model"] in a.models and config(e["config"]) is not None
           and (e["model"], e["config"], e["seed"]) not in have]
    order = list(CONFIGS)
    return sorted(entries + old, key=lambda e: (a.models.index(e["model"]),
                                                order.index(base_of(e["config"])),
                                                e["config"], e["seed"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--models", default="cnn,mlp,vit,lm", help="some of %s" % ", ".join(MODELS))
    ap.add_argument("--configs", help="some of %s, for every model (default: the first six; "
                    "lm: %s); any but fp32 followed by +KEY=VALUE parts is that "
                    "configuration with those rule keys set in its policy's rules (e.g. "
                    "auto+ef_decay=0, ternary-all+ef_decay=0.25)"
                    % (", ".join(CONFIGS), ", ".join(MODEL_CONFIGS["lm"])))
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--train-subset", type=int, default=0)
    ap.add_argument("--seeds", default="1,2", help="every configuration runs once per seed")
    ap.add_argument("--seed", type=int, help="one seed (same as --seeds N)")
    ap.add_argument("--headline-seeds", help="fp32 and %s run on these seeds too (default: "
                    "--seeds; make train-check: 1,2,3,4)" % HEADLINE)
    ap.add_argument("--optimizer", choices=("sgd", "adamw"),
                    help="for every model (default: sgd for cnn and mlp, adamw for vit)")
    ap.add_argument("--lr", type=float, help="default: the optimizer's (train.py)")
    ap.add_argument("--momentum", type=float, help="sgd (default 0.9)")
    ap.add_argument("--weight-decay", type=float, help="default: the optimizer's")
    ap.add_argument("--warmup", type=float, help="fraction of the steps (default: the "
                    "optimizer's)")
    ap.add_argument("--schedule", choices=("cosine", "constant"), help="default cosine")
    ap.add_argument("--out", default="train-check")
    runner_args(ap, 1800)
    ap.add_argument("--check", action="store_true", help="assert make check-full's claims")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--merge", metavar="SUMMARY_JSON",
                    help="a previous run's summary.json: its runs of the models here that this "
                    "run does not repeat join the table, summary and plot (same settings)")
    a = ap.parse_args()
    a.models = a.models.split(",")
    bad = [m for m in a.models if m not in MODELS]
    if bad:
        ap.error("unknown model %s (known: %s)" % (bad, ", ".join(MODELS)))
    try:
        a.seeds = [a.seed] if a.seed is not None else [int(x) for x in a.seeds.split(",")]
    except ValueError:
        ap.error("--seeds: a comma-separated list of integers, not %r" % a.seeds)
    try:
        more = [int(x) for x in a.headline_seeds.split(",")] if a.headline_seeds else []
    except ValueError:
        ap.error("--headline-seeds: a comma-separated list of integers, not %r"
                 % a.headline_seeds)
    a.headline_seeds = a.seeds + [x for x in more if x not in a.seeds]
    names = {m: list(MODEL_CONFIGS.get(m, DEFAULT_CONFIGS)) if a.configs is None
             else a.configs.split(",") for m in a.models}
    unknown = sorted({c for n in names.values() for c in n if config(c) is None})
    if unknown:
        ap.error("unknown configuration %s (known: %s; or one of them but fp32 with "
                 "+KEY=VALUE parts, e.g. auto+ef_decay=0)" % (unknown, ", ".join(CONFIGS)))
    for n in names.values():
        if a.check and "fp32" not in n:
            n.insert(0, "fp32")
    a.build = a.build and os.path.abspath(a.build)
    a.src = a.src and os.path.abspath(a.src)
    os.makedirs(os.path.join(a.out, "policies"), exist_ok=True)
    for f in os.listdir(os.path.join(HERE, "policies")):
        shutil.copy(os.path.join(HERE, "policies", f), os.path.join(a.out, "policies", f))
    runner = Runner(a)
    entries, calibrations, start = [], {}, time.perf_counter()
    for model in a.models:
        for name in names[model]:
            for seed in a.headline_seeds if name in ("fp32", HEADLINE) else a.seeds:
                entries.append(run_config(runner, name, model, seed, a.out, calibrations))
                e = entries[-1]
                r = e.get("result")
                print("%s %s seed %d: %s" % (
                    model, name, seed, e["skipped"] if r is None else
                    "validation perplexity %.4f" % final(r) if perplexity(r) else
                    "final accuracy %.2f %%" % final(r)), file=sys.stderr, flush=True)
    if a.merge:
        entries = merge(entries, a)
    text = table(entries, a)
    text += "all runs: %.0f s\n" % (time.perf_counter() - start)
    print(text)
    with open(os.path.join(a.out, "table.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(dict({k: getattr(a, k) for k in SETTINGS}, seeds=a.seeds,
                       headline_seeds=a.headline_seeds, runs=entries),
                  f, indent=1)
    if not a.no_plot:
        plot(entries, a, os.path.join(a.out, "accuracy.png"))
        print("plot: %s" % os.path.join(a.out, "accuracy.png"))
    if a.check:
        raise SystemExit(1 if check(entries, a) else 0)


if __name__ == "__main__":
    main()
