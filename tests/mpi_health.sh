#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Health monitoring (tests/mpi/test_health.c): a NaN, a repeated NaN, a loss
# spike and error-feedback growth each send the buffer to fp32 for its
# cool-down on every rank in the same call, then back to binary; a repeat
# doubles the cool-down. The routes per step, the stats and the trace say so.
# Then losses that are negative or change sign: only a real spike counts.
# Then re-entry after a divergence (--reentry), and the record of why each
# region ran where it ran (--record).
. "${srcdir:-.}/tests/mpi_common.sh"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
pol=$srcdir/tests/policy_shim/health.policy
# step 4: NaN, fp32, then 3 cooling; step 10: NaN again within a cool-down's
# length: 1 + 6 (doubled); step 20 reports a spike: 6 from step 21 (a repeat
# again, capped at 6); step 30's gradient is 1e6 smaller than its residual:
# ef_growth, 6 more, the residual starts over, binary again.
# step:  0123456789012345678901234567890123456789
want="bbbbffffbbfffffffbbbbffffffbbbbffffffbbb"
for np in 2 3; do
  nf_tier $np || continue
  out "$tmp/o.$np" $np NFCOLL_POLICY=$pol NFCOLL_STATS=$tmp/s.$np.json NFCOLL_TRACE=$tmp/t.$np.%r \
    ./tests/mpi/test_health
  got=$(sed -n 's/^routes //p' "$tmp/o.$np")
  echo "$np ranks: routes $got"
  [ "$got" = "$want" ] || { echo "FAIL - $np ranks: routes per step, want $want"; nf_failed=1; }
  ev=$(python3 -c "import json; h=json.load(open('$tmp/s.$np.json'))['health']
print(' '.join('%s=%d' % (k, sum(v[k] for v in h.values())) for k in ('nonfinite', 'ef_growth', 'loss_spike')))")
  echo "$np ranks: health events $ev"
  case $ev in
    "nonfinite=$((2 * np)) ef_growth="[1-9]*" loss_spike=$np") echo "ok - $np ranks: events counted" ;;
    *) echo "FAIL - $np ranks: health events '$ev'"; nf_failed=1 ;;
  esac
  sig=$(awk '!/^#/ && $(NF-2) != "-" {print $(NF-2)}' "$tmp/t.$np.0" | sort | uniq -c | tr -s ' ' | tr '\n' ';')
  echo "$np ranks: trace records cooling by signal: $sig"
  grep -q 'nonfinite' "$tmp/t.$np.0" && grep -q 'loss_spike' "$tmp/t.$np.0" &&
    grep -q 'ef_growth' "$tmp/t.$np.0" || { echo "FAIL - the trace does not name every signal"; nf_failed=1; }
done
# The same with binary's scale_block (8 blocks of 512): health's ef ratio
# reads the blocked residual (one a_i per block) and fires at step 30 alike.
out "$tmp/ob" 2 NFCOLL_POLICY=$pol NFCOLL_SCALE_BLOCK=512 ./tests/mpi/test_health
got=$(sed -n 's/^routes //p' "$tmp/ob")
[ "$got" = "$want" ] && echo "ok - scale_block 512: routes per step $got" ||
  { echo "FAIL - scale_block 512: routes per step $got, want $want"; nf_failed=1; }
# The same on int4 (policy version 4): health watches the integer routes'
# Q-form residual (its ef ratio rebuilt from y and the block maxes) and
# sends the segment to fp32 and back at the same steps.
sed -e 's/^version = 1$/version = 4/' -e 's/^route = binary$/route = int4/' "$pol" > "$tmp/int4.policy"
out "$tmp/oi" 2 NFCOLL_POLICY=$tmp/int4.policy NFCOLL_STATS=$tmp/si.json ./tests/mpi/test_health
got=$(sed -n 's/^routes //p' "$tmp/oi")
calls=$(python3 -c "import json; print(json.load(open('$tmp/si.json'))['routes']['int4']['calls'])")
[ "$got" = "$want" ] && [ "${calls:-0}" -gt 0 ] && echo "ok - int4: routes per step $got ($calls int4 calls)" ||
  { echo "FAIL - int4: routes per step $got, want $want ('$calls' int4 calls)"; nf_failed=1; }
# Losses below zero or changing sign: a constant -2.0 and +-0.1 in turn
# engage no cool-down; a jump from -2.0 to +5.0 at step 20 does. A mean loss
# that overflows to +Inf (step 10) is a spike and leaves the window able to
# see the next one (step 17).
for np in 2 3; do
  nf_tier $np || continue
  for mode in negative alternating overflow; do
    out "$tmp/$mode.$np" $np NFCOLL_POLICY=$pol NFCOLL_STATS=$tmp/$mode.$np.json \
      ./tests/mpi/test_health --$mode
    got=$(sed -n 's/^routes //p' "$tmp/$mode.$np")
    case $mode in
      negative) want="bbbbbbbbbbbbbbbbbbbbbfffbbbbbbbbbbbbbbbb" ;;
      overflow) want="bbbbbbbbbbbfffbbbbfffbbbbbbbbbbbbbbbbbbb" ;;
      *) want="bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" ;;
    esac
    if [ "$got" = "$want" ]; then
      echo "ok - $np ranks, $mode losses: routes $got"
    else
      echo "FAIL - $np ranks, $mode losses: routes $got, want $want"; nf_failed=1
    fi
  done
done
# Re-entry after a divergence (issue 15 item 2): gradients x1000 and a loss
# spike at step 10, 3 calls cool down, step 14 re-enters and stays binary.
# The residual step 10 left was kept through the cool-down and read as
# ef_growth at once: bbbbbbbbbbbfffbffffffbbb before it started over.
# "nodes": the same across 2 one-rank pretend nodes, where health's values
# ride with the counts (the scales' exchange is folded into the counts').
for np in 2 3 nodes; do
  case $np in
    nodes) n=2 what="2 one-rank nodes" env=NFCOLL_RANKS_PER_NODE=1 ;;
    *) nf_tier $np || continue; n=$np what="$np ranks" env= ;;
  esac
  out "$tmp/re.$np" $n $env NFCOLL_POLICY=$pol ./tests/mpi/test_health --reentry
  got=$(sed -n 's/^reentry //p' "$tmp/re.$np")
  if [ "$got" = "bbbbbbbbbbbfffbbbbbbbbbb" ]; then
    echo "ok - $what: re-entry after a divergence stays binary: $got"
  else
    echo "FAIL - $what: re-entry after a divergence: $got, want bbbbbbbbbbbfffbbbbbbbbbb"
    nf_failed=1
  fi
done
# Two equal-size gaps of a fused buffer are two segments to health.
run 2 NFCOLL_POLICY=$pol ./tests/mpi/test_health --gaps
# The record of why each region ran where it ran (issue 15 item 4), from a
# loaded profile: the stats' "admission" object names rec.head's rule with
# its file:line, rec.body's profile entry with its figures (the decay it
# chose runs: the rule names none; fp32 regions have no decay), its cool-down
# (signal, call) and re-entry, and its nonfinite fallback; rec.tail has no
# entry, rec.old a stale one. The trace says the same per call.
rec=$srcdir/tests/policy_shim/record.policy
out "$tmp/rec" 2 NFCOLL_POLICY=$rec NFCOLL_STATS=$tmp/rec.json NFCOLL_TRACE=$tmp/rec.%r \
  ./tests/mpi/test_health --record
if python3 - "$tmp/rec.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["admission"]
def want(region, **kv):
    got = {k: a.get(region, {}).get(k) for k in kv}
    if got != kv:
        sys.exit("%s: %s, want %s" % (region, got, kv))
want("rec.head", route="fp32", by="rule", rule="head", entry=None, cooldowns=0,
     lag_cosine=None, ef_decay=None, ef_decay_by=None, scale_block=None,
     scale_block_by=None)
assert a["rec.head"]["where"].endswith("record.policy:14"), a["rec.head"]["where"]
want("rec.body", route="binary", by="profile", rule="auto", entry_elements=2000,
     cos_binary=0.9, cos_ternary=0.95, admit_cosine=0.5, cooldowns=2,
     last_signal="nonfinite", first_cooldown_call=4, last_cooldown_call=4, reentries=2,
     last_reentry_call=8, fallbacks={"nonfinite": 2}, lag_cosine=0.1234, ef_decay=0.25,
     ef_decay_by="profile", scale_block=0, scale_block_by="settings")
assert a["rec.body"]["entry"].endswith("record.profile:3"), a["rec.body"]["entry"]
want("rec.tail", route="fp32", by="no-entry", entry=None, cooldowns=0, reentries=0)
want("rec.old", route="fp32", by="stale-entry", entry_elements=999, lag_cosine=None,
     ef_decay=None, ef_decay_by=None)
PY
then
  echo "ok - the stats' admission record: a rule, a profile entry, a cool-down, re-entry"
else
  echo "FAIL - the stats' admission record"; sed -n '/"admission"/,$p' "$tmp/rec.json"; nf_failed=1
fi
# rec.body per call (call ran health why fallback): the NaN's call falls
# back, 3 calls cool down (nonfinite), call 8 re-enters binary.
got=$(awk '$11 == "rec.body" && $2 >= 3 && $2 <= 9 {print $2, $14, $15, $17}' "$tmp/rec.0" | tr '\n' ';')
want="3 binary - -;4 fp32 - nonfinite;5 fp32 nonfinite -;6 fp32 nonfinite -;7 fp32 nonfinite -;8 binary reentry -;9 binary - -;"
whys=$(awk '$2 == 0 {print $11, $16}' "$tmp/rec.0" | tr '\n' ';')
wantw="rec.head rule;rec.body profile:cos_binary=0.9000,cos_ternary=0.9500;rec.tail no-entry;rec.old stale-entry:elements=999;"
if [ "$got" = "$want" ] && [ "$whys" = "$wantw" ]; then
  echo "ok - the trace's health, why and fallback columns"
else
  echo "FAIL - the trace: rec.body '$got', want '$want'; why '$whys', want '$wantw'"; nf_failed=1
fi
# warmup = N: the first N calls of each segment fp32, then its route; the
# trace names the warm-up, and the stats' admission record counts it (summed
# over ranks) with the call it last ran: the whole buffer calls 0-2, w.a
# (warmup 2) calls 6-7, the gap between (rule all, warmup 3) calls 6-8.
for np in 2 3; do
  nf_tier $np || continue
  out "$tmp/w.$np" $np NFCOLL_POLICY=$srcdir/tests/policy_shim/warmup.policy \
    NFCOLL_TRACE=$tmp/wt.$np.%r NFCOLL_STATS=$tmp/w.$np.json ./tests/mpi/test_health --warmup
  if python3 - "$tmp/w.$np.json" $np <<'PY'
import json, sys
a, n = json.load(open(sys.argv[1]))["admission"], int(sys.argv[2])
got = {r: (a[r].get("warmup"), a[r]["warmup_calls"], a[r]["last_warmup_call"])
       for r in ("buffer:12000", "w.a", "buffer:2000", "w.b") if r in a}
want = {"buffer:12000": (None, 3 * n, 2), "w.a": (2, 2 * n, 7), "buffer:2000": (None, 3 * n, 8),
        "w.b": (0, 0, None)}
if got != want:
    sys.exit("got %s, want %s" % (got, want))
PY
  then
    echo "ok - $np ranks: the stats' admission record counts each segment's warm-up"
  else
    echo "FAIL - $np ranks: the stats' admission record of the warm-up"; nf_failed=1
  fi
  w=$(awk '!/^#/ && $(NF - 2) == "warmup"' "$tmp/wt.$np.0" | wc -l)
  if [ "$w" -eq 8 ]; then
    echo "ok - $np ranks: the trace names 8 warm-up segments"
  else
    echo "FAIL - $np ranks: the trace names $w warm-up segments, want 8 (3 + 2 + 3)"; nf_failed=1
  fi
done
finish
