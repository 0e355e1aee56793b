#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Calibration finds which region low-bit serves (tests/mpi/test_calib.c):
# a calibration run returns exact sums and writes a profile that admits the
# dense shared signal and refuses the sparse private spikes, with every
# route the one its measured cosines call for; a run with route = auto and
# that profile takes those routes (stats per region). Then calls that do not
# measure low-bit (a NaN or Inf, ranks' layouts that differ, a region bound
# late on one rank) are skipped and listed, and an unwritable profile path is
# reported at MPI_Init on every rank.
. "${srcdir:-.}/tests/mpi_common.sh"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
pol=$srcdir/tests/policy_shim/calib.policy
for np in 2 3; do
  nf_tier $np || continue
  prof=$tmp/p.$np
  run $np NFCOLL_POLICY=$pol NFCOLL_CALIBRATE=$prof ./tests/mpi/test_calib --calibrate 8
  if [ ! -f "$prof" ]; then echo "FAIL - $np ranks: no profile written"; nf_failed=1; continue; fi
  head -1 "$prof" | grep -qx '# libnfcoll profile v2' || { echo "FAIL - bad header"; nf_failed=1; }
  perm=$(stat -c %a "$prof")
  [ "$perm" = 600 ] || { echo "FAIL - profile mode $perm, not 600"; nf_failed=1; }
  # route follows the cosines and the threshold 0.5, on every line
  bad=$(awk '!/^#/ && NF {
      want = $4 >= 0.5 ? "binary" : ($5 >= 0.5 ? "ternary" : "fp32")
      if ($8 != want || $3 != 6) print }' "$prof")
  dense=$(awk '$1 == "dense" {print $8}' "$prof"); spiky=$(awk '$1 == "spiky" {print $8}' "$prof")
  if [ -z "$bad" ] && [ "$dense" = binary ] && [ "$spiky" = fp32 ]; then
    echo "ok - $np ranks: profile admits dense (binary), refuses spiky (fp32)"; cat "$prof"
  else
    echo "FAIL - $np ranks: dense '$dense' spiky '$spiky', inconsistent lines: $bad"
    cat "$prof"; nf_failed=1
  fi
  printf '[policy]\nversion = 1\nprofile = %s\n[rule all]\ndatatype = float\nop = sum\nroute = auto\n' \
    "$prof" > "$tmp/auto.policy"
  run $np NFCOLL_POLICY=$tmp/auto.policy NFCOLL_STATS=$tmp/s.json ./tests/mpi/test_calib --auto 4
  got=$(python3 -c "import json,sys; r=json.load(open('$tmp/s.json'))['regions'];
print(' '.join(sorted(k+':'+','.join(sorted(v)) for k,v in r.items())))")
  if [ "$got" = "dense:binary spiky:fp32" ]; then
    echo "ok - $np ranks: route = auto takes the profile's routes ($got)"
  else
    echo "FAIL - $np ranks: route = auto gave '$got'"; nf_failed=1
  fi
  # An entry measured on another element count is ignored, with a word.
  awk '$1 == "dense" {$2 = 100} {print}' "$prof" > "$tmp/other.$np"
  sed "s|^profile = .*|profile = $tmp/other.$np|" "$tmp/auto.policy" > "$tmp/other.policy"
  out "$tmp/o.$np" $np NFCOLL_POLICY=$tmp/other.policy NFCOLL_STATS=$tmp/s.json \
    ./tests/mpi/test_calib --auto 4
  got=$(python3 -c "import json,sys; r=json.load(open('$tmp/s.json'))['regions'];
print(' '.join(sorted(k+':'+','.join(sorted(v)) for k,v in r.items())))")
  if [ "$got" = "dense:fp32 spiky:fp32" ] &&
     grep -q "entry for dense measured 100 elements, the segment has 4096" "$tmp/o.$np.err"; then
    echo "ok - $np ranks: an entry for 100 elements does not admit a 4096-element region"
  else
    echo "FAIL - $np ranks: entry of another count: '$got'"; cat "$tmp/o.$np.err"; nf_failed=1
  fi
done
# What is not a measurement stays out of the profile, and nothing hangs
# (these hung on main: a shorter timeout).
export NF_TEST_TIMEOUT=${NF_TEST_TIMEOUT:-120}
entries() { grep -v '^#' "$1" | grep -c .; }
expect() { # expect WHAT COND: ok or FAIL with the profile
  if eval "$2"; then echo "ok - $1"; else echo "FAIL - $1"; cat "$prof"; nf_failed=1; fi
}
for np in 2 3; do
  nf_tier $np || continue
  prof=$tmp/nonfinite.$np
  run $np NFCOLL_POLICY=$pol NFCOLL_CALIBRATE=$prof ./tests/mpi/test_calib --nonfinite 8
  expect "$np ranks: an Inf and a NaN skipped, not measured (dense 6 of 8 calls, no NaN)" \
    '[ -f "$prof" ] && ! grep -v "^#" "$prof" | grep -qi nan && [ "$(awk '"'"'$1 == "dense" {print $3}'"'"' "$prof")" = 6 ] &&
     grep -q "^# skipped dense: 2 calls with a NaN or Inf, 0 that ran a fallback" "$prof"'
  prof=$tmp/late.$np
  run $np NFCOLL_POLICY=$pol NFCOLL_CALIBRATE=$prof ./tests/mpi/test_calib --late 10
  expect "$np ranks: a region bound late on one rank: no hang, 6 calls per segment" \
    '[ -f "$prof" ] && [ "$(entries "$prof")" = 3 ] && [ -z "$(awk '"'"'!/^#/ && $3 != 6'"'"' "$prof")" ]'
  prof=$tmp/mismatch.$np
  run $np NFCOLL_POLICY=$pol NFCOLL_CALIBRATE=$prof ./tests/mpi/test_calib --mismatch 8
  expect "$np ranks: layouts differ: no call measured, each skip listed" \
    '[ -f "$prof" ] && [ "$(entries "$prof")" = 0 ] &&
     grep -q "^# skipped dense: 0 calls with a NaN or Inf, 8 that ran a fallback" "$prof"'
  # A path that cannot be written: said on every rank by the end of MPI_Init.
  run $np NFCOLL_POLICY=$pol NFCOLL_CALIBRATE=$tmp/no/such/dir/p ./tests/mpi/test_calib \
    --unwritable 2
done
left=$(ls "$tmp" | grep '\.tmp\.')
[ -z "$left" ] || { echo "FAIL - temporary files left: $left"; nf_failed=1; }
# Calibration measures the route as the rule runs it, and where nothing
# names a decay its shadows run at its own, 0.25: under ef_decay = 0.25 the
# profile is the one without the key, byte for byte; ef_decay = 1 in the
# rule and NFCOLL_EF_DECAY=1 (explicit too) measure one other binary route;
# under ef_decay = 0 the binary shadow adds no residual back.
for d in 0.25 1 0; do
  sed -e "s/^version = 1$/version = 2/" -e "s/^route = binary$/route = binary\nef_decay = $d/" \
    "$pol" > "$tmp/decay$d.policy"
  run 2 NFCOLL_POLICY=$tmp/decay$d.policy NFCOLL_CALIBRATE=$tmp/d$d ./tests/mpi/test_calib --calibrate 8
done
run 2 NFCOLL_POLICY=$pol NFCOLL_EF_DECAY=1 NFCOLL_CALIBRATE=$tmp/env1 ./tests/mpi/test_calib --calibrate 8
dense() { awk '$1 == "dense" {print $4}' "$1"; }
if cmp -s "$tmp/p.2" "$tmp/d0.25" && cmp -s "$tmp/d1" "$tmp/env1" && ! cmp -s "$tmp/p.2" "$tmp/d1" &&
   [ "$(dense "$tmp/p.2")" != "$(dense "$tmp/d0")" ] &&
   [ "$(dense "$tmp/p.2")" != "$(dense "$tmp/d1")" ]; then
  echo "ok - calibration's shadows: 0.25 where nothing names a decay; the rule's or NFCOLL_EF_DECAY's where named"
else
  echo "FAIL - calibration under ef_decay:"; cat "$tmp/p.2" "$tmp/d0.25" "$tmp/d1" "$tmp/env1" "$tmp/d0"; nf_failed=1
fi
# Likewise scale_block: 0 is the profile without the key; 512 (8 blocks of
# each 4096-float region) measures the blocked binary route, and the
# ternary shadow, which has no blocks, measures the same.
for b in 0 512; do
  sed -e "s/^version = 1$/version = 3/" -e "s/^route = binary$/route = binary\nscale_block = $b/" \
    "$pol" > "$tmp/block$b.policy"
  run 2 NFCOLL_POLICY=$tmp/block$b.policy NFCOLL_CALIBRATE=$tmp/b$b ./tests/mpi/test_calib --calibrate 8
done
col() { awk -v r="$2" -v c="$3" '$1 == r {print $c}' "$1"; }
# The error-feedback decay (profile v2): 110 calls fill the lag cosine's
# window (calls 21-100), every entry has a lag and the decay the rule gives
# (1 below 0, 0.25 from 0); 25 calls measure a lag on too few calls, so the
# decay is '-' and rank 0 says so; with the settings' error feedback off
# nothing is measured and the shadows stop after 20 calls as before (the
# skips of a mismatched layout stop at 2K = 12).
out "$tmp/lag" 2 NFCOLL_POLICY=$pol NFCOLL_CALIBRATE=$tmp/lag.profile ./tests/mpi/test_calib --calibrate 110
bad=$(awk '!/^#/ && NF { want = ($9 + 0 < 0) ? "1.0000" : "0.2500"
                         if (NF != 10 || $9 == "-" || $10 != want) print }' "$tmp/lag.profile")
if [ -s "$tmp/lag.profile" ] && [ -z "$bad" ] && [ "$(entries "$tmp/lag.profile")" = 2 ]; then
  echo "ok - 110 calls: a lag cosine and the decay it calls for on every entry"; cat "$tmp/lag.profile"
else
  echo "FAIL - 110 calls: entries without a lag or with the wrong decay: $bad"; cat "$tmp/lag.profile"; nf_failed=1
fi
out "$tmp/short" 2 NFCOLL_POLICY=$pol NFCOLL_CALIBRATE=$tmp/short.profile ./tests/mpi/test_calib --calibrate 25
if [ "$(col "$tmp/short.profile" dense 10)" = - ] && [ "$(col "$tmp/short.profile" dense 9)" != - ] &&
   grep -q "measured fewer than 10 calls of the lag cosine's window" "$tmp/short.err"; then
  echo "ok - 25 calls: a lag on too few calls chooses no decay, and says so"
else
  echo "FAIL - 25 calls:"; cat "$tmp/short.profile" "$tmp/short.err"; nf_failed=1
fi
out "$tmp/noef" 2 NFCOLL_EF=off NFCOLL_POLICY=$pol NFCOLL_CALIBRATE=$tmp/noef.profile ./tests/mpi/test_calib --calibrate 30
out "$tmp/mm" 2 NFCOLL_POLICY=$pol NFCOLL_CALIBRATE=$tmp/mm.profile ./tests/mpi/test_calib --mismatch 120
if [ -z "$(awk '!/^#/ && NF && ($9 != "-" || $10 != "-")' "$tmp/noef.profile")" ] &&
   ! grep -q "lag cosine" "$tmp/noef.err" &&
   grep -q "^# skipped dense: 0 calls with a NaN or Inf, 12 that ran a fallback" "$tmp/mm.profile"; then
  echo "ok - no error feedback: no lag, no word; a layout mismatch stops after 12 skipped calls"
else
  echo "FAIL - lag without error feedback or mismatched:"; cat "$tmp/noef.profile" "$tmp/noef.err" "$tmp/mm.profile"; nf_failed=1
fi
if cmp -s "$tmp/p.2" "$tmp/b0" && ! cmp -s "$tmp/p.2" "$tmp/b512" &&
   [ "$(col "$tmp/p.2" dense 4)" != "$(col "$tmp/b512" dense 4)" ] &&
   [ "$(col "$tmp/p.2" dense 5)" = "$(col "$tmp/b512" dense 5)" ]; then
  echo "ok - calibration under scale_block: 0 as without the key, 512 measures blocked binary, ternary alike"
else
  echo "FAIL - calibration under scale_block:"; cat "$tmp/p.2" "$tmp/b0" "$tmp/b512"; nf_failed=1
fi
finish
