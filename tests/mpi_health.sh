#!/bin/sh
# Health monitoring (tests/mpi/test_health.c): a NaN, a repeated NaN, a loss
# spike and error-feedback growth each send the buffer to fp32 for its
# cool-down on every rank in the same call, then back to binary; a repeat
# doubles the cool-down. The routes per step, the stats and the trace say so.
# Then losses that are negative or change sign: only a real spike counts.
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
  sig=$(awk '!/^#/ && $NF != "-" {print $NF}' "$tmp/t.$np.0" | sort | uniq -c | tr -s ' ' | tr '\n' ';')
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
# Two equal-size gaps of a fused buffer are two segments to health.
run 2 NFCOLL_POLICY=$pol ./tests/mpi/test_health --gaps
finish
