#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The training check, shortened (bench/train/compare.py --check): the CNN on
# 2 ranks, a subset of Fashion-MNIST, one epoch, fixed seed, twice.
# 1. Plain SGD (lr 0.1): fp32, head-fp32 and auto (a calibration run, then
#    route = auto). Asserts identical weights on every rank, head-fp32 and
#    auto at most 2 points below fp32, head-fp32's upstream traffic at most
#    6 % of FP32, and that the profile admitted exactly the segments whose
#    measured cosine reached the threshold, which then ran so.
# 2. The users' setting, SGD momentum 0.9 with a cosine schedule: fp32, auto
#    and auto-health (no parameter named: calibration's). Asserts auto and auto-health
#    at most 2 points below fp32 at most 14 % of FP32's upstream bytes, and
#    health holding at most 5 % of the gradient bytes on fp32 in this
#    healthy run.
# 3. Health against a run made to diverge (bench/train/inject.py --check):
#    the CNN, momentum SGD, 2 epochs of 12000 images, a calibration run and
#    then route = auto with health on (no parameter named), run healthy,
#    with the learning rate x50 for one step at step 60, and with rank 1's
#    gradients x10 plus noise for steps 60-64. Asserts the healthy run holds
#    under 1 % of the bytes on fp32, and that each injected run starts a
#    cool-down within 6 steps of the injection, names its signal, and
#    re-enters low-bit with at least 90 % of the bytes after its last
#    re-entry on a low-bit route (NF_INJECT_CHECK_ARGS: more inject.py
#    options). On auto's int4 the corrupted run needs no cool-down (int4
#    carries the gradients as they are) and must end at most 2 points below
#    the healthy run; the same three runs on binary at ef_decay 0.5 with
#    health on (--config binary-decay-health) assert the cool-down there.
# 4. Held-back models as an unmodified program (bench/train/heldback.py:
#    one fused buffer, mpi4py's Allreduce, libnfcoll preloaded, a layout
#    file), 40 steps each of mlp2 and cnn2: fp32, a calibration run and
#    route = auto run; asserts identical weights, a profile entry per
#    layout region, every region decided by its entry (int4 or fp32; int4
#    with the whole residual and blocks of 128), some on int4, and auto's
#    upstream bytes at most 14 % of FP32 when every region is int4.
# 5. The byte-level language model (lm) on WordNet's glosses, AdamW, 256
#    training windows (16 steps), fp32 and head-fp32: asserts identical
#    weights, head-fp32's validation perplexity at most 10 % above fp32's,
#    its head and embeddings (head.*, wte.*, wpe) exact and every other
#    parameter binary, upstream at most 20 % of FP32 (the exact regions are
#    14.2 % of the parameters). SKIPs without wordnet-base.
# auto SKIPs (in the output) where the library cannot calibrate.
. "${srcdir:-.}/tests/mpi_common.sh"
. "$srcdir/tests/python_common.sh"
py_need numpy mpi4py torch
nf_ompi_only "Open MPI's mpirun (bench/train/compare.py passes --oversubscribe, --mca)"
data=${NF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
  echo "SKIP: no Fashion-MNIST in $data (Debian: apt-get install dataset-fashion-mnist)"; exit 77
fi
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
# make check (NF_TIER=fast) runs 2. alone; make check-full all five.
rc=0
if [ "${NF_TIER:-full}" != fast ]; then
  timeout -k 10 "${NF_TEST_TIMEOUT:-300}" "$py" "$top/bench/train/compare.py" --check --no-plot \
    --build "$PWD" --src "$top" --python "$py" --out "$tmp" --np 2 --models cnn \
    --configs fp32,head-fp32,auto --epochs 1 --train-subset 12000 --seed 1 \
    --optimizer sgd --momentum 0 --lr 0.1 --weight-decay 0 --schedule constant \
    --mpirun-args "--mca btl self,vader" $NF_TRAIN_CHECK_ARGS
  rc=$?
  [ $rc -eq 0 ] || echo "FAILED (exit $rc): plain SGD"
else
  echo "# plain SGD and the fault injection: make check-full"
fi
timeout -k 10 "${NF_TEST_TIMEOUT:-300}" "$py" "$top/bench/train/compare.py" --check --no-plot \
  --build "$PWD" --src "$top" --python "$py" --out "$tmp/momentum" --np 2 --models cnn \
  --configs fp32,auto,auto-health --epochs 1 --train-subset 12000 --seed 1 \
  --mpirun-args "--mca btl self,vader" $NF_TRAIN_CHECK_ARGS
rc2=$?
[ $rc2 -eq 0 ] || echo "FAILED (exit $rc2): momentum SGD"
[ $rc -eq 0 ] && rc=$rc2
[ "${NF_TIER:-full}" = fast ] && exit $rc
timeout -k 10 "${NF_TEST_TIMEOUT:-600}" "$py" "$top/bench/train/inject.py" --check \
  --build "$PWD" --src "$top" --python "$py" --out "$tmp/inject" \
  --mpirun-args "--mca btl self,vader" $NF_INJECT_CHECK_ARGS
rc3=$?
[ $rc3 -eq 0 ] || echo "FAILED (exit $rc3): fault injection"
[ $rc -eq 0 ] && rc=$rc3
# The same injections on a sign route (binary at ef_decay 0.5, health on):
# there the corrupted gradients grow the residual and health cools down.
timeout -k 10 "${NF_TEST_TIMEOUT:-600}" "$py" "$top/bench/train/inject.py" --check \
  --config binary-decay-health --build "$PWD" --src "$top" --python "$py" \
  --out "$tmp/inject-binary" --mpirun-args "--mca btl self,vader" $NF_INJECT_CHECK_ARGS
rc4=$?
[ $rc4 -eq 0 ] || echo "FAILED (exit $rc4): fault injection, binary"
[ $rc -eq 0 ] && rc=$rc4
timeout -k 10 "${NF_TEST_TIMEOUT:-300}" "$py" "$top/bench/train/heldback.py" --build "$PWD" \
  --models mlp2,cnn2 --seeds 1 --steps 40 --out-dir "$tmp/heldback" --python "$py" \
  --mpirun-args "--mca btl self,vader" > "$tmp/heldback.out" 2>&1 &&
  "$py" - "$tmp/heldback" <<'PY'
import json, sys
d = sys.argv[1]
for m in ("mlp2", "cnn2"):
    regions = [l.split()[1] for l in open("%s/%s.layout" % (d, m))]
    lines = [l.split() for l in open("%s/%s.s1.profile" % (d, m)) if not l.startswith("#")]
    assert sorted(l[0] for l in lines) == sorted(regions), (m, lines, regions)
    st = json.load(open("%s/%s.s1.auto.stats.json" % (d, m)))
    adm = st["admission"]
    ran = {l[0]: l[7] for l in lines}
    bad = [r for r in regions if adm.get(r, {}).get("by") != "profile" or
           adm[r].get("route") != ran[r] or ran[r] not in ("int4", "fp32") or
           (ran[r] == "int4" and (adm[r].get("ef_decay") != 1.0 or
                                  adm[r].get("block") != 128))]
    assert not bad, (m, "not decided by the profile, or not as int4 runs", bad)
    up = sum(r["upstream_bytes"] for r in st["routes"].values())
    fp = sum(r["fp32_ring_bytes"] for r in st["routes"].values())
    low = sum(adm[r].get("route") == "int4" for r in regions)
    # int4 with blocks of 128: 4.25 bits of 32, 13.3 %, where every region is int4
    assert low > 0 and 0 < up <= (0.14 if low == len(regions) else 1.0) * fp, (m, up, fp, low)
    print("ok - held-back %s as an unmodified program: %d regions from the profile, up %.2f %%"
          % (m, len(regions), 100.0 * up / fp))
PY
rc5=$?
[ $rc5 -eq 0 ] || { echo "FAILED (exit $rc5): held-back models"; cat "$tmp/heldback.out"; }
[ $rc -eq 0 ] && rc=$rc5
text=${NF_WORDNET:-/usr/share/wordnet}
if [ ! -f "$text/data.noun" ]; then
  echo "ok - lm # SKIP no WordNet in $text (Debian: apt-get install wordnet-base)"
  exit $rc
fi
timeout -k 10 "${NF_TEST_TIMEOUT:-300}" "$py" "$top/bench/train/compare.py" --check --no-plot \
  --build "$PWD" --src "$top" --python "$py" --out "$tmp/lm" --np 2 --models lm \
  --configs fp32,head-fp32 --epochs 1 --train-subset 256 --seed 1 \
  --mpirun-args "--mca btl self,vader" $NF_TRAIN_CHECK_ARGS
rc4=$?
[ $rc4 -eq 0 ] || echo "FAILED (exit $rc4): language model"
[ $rc -eq 0 ] && rc=$rc4
exit $rc
