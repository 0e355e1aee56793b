#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Calibration measures every low-bit route in shadow (tests/mpi/test_calib.c):
# a calibration run returns exact sums and writes a profile (v3) whose every
# route is the one its measured int4 cosine calls for: int4 where it reaches
# admit_cosine, else fp32, never a cheaper route (binary, ternary, int3,
# int2), even where the cheaper route's cosine reaches it too; the other
# cosines are written as evidence. At 0.5 both regions take int4 (dense,
# though binary's cosine reaches 0.5 too; spiky, whose binary cosine is
# far below it); at admit_cosine = the higher int4 cosine (>= admits) the
# other region is refused. A run with route = auto and that profile takes
# those routes (stats per region, with the cosine that admitted each, and
# the trace's why). Then calls that do not measure low-bit (a NaN or Inf,
# ranks' layouts that differ, a region bound late on one rank) are skipped
# and listed, and an unwritable profile path is reported at MPI_Init on
# every rank.
. "${srcdir:-.}/tests/mpi_common.sh"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
pol=$srcdir/tests/policy_shim/calib.policy
col() { awk -v r="$2" -v c="$3" '$1 == r {print $c}' "$1"; }
# Every entry line of a v3 profile, checked against the rule at admit
# cosine $2: 16 fields, the cosines (4, 5, 11-13) numbers from -1 to 1 and
# the errors (6, 7, 14-16) numbers >= 0 as written (%.4f), calls $3 == 6,
# route int4 if cos_int4 >= admit else fp32, and no decay on an int4
# entry. Prints the lines that break it, with why.
badlines() { # PROFILE ADMIT
  awk -v admit="$2" '!/^#/ && NF {
      why = ""
      if (NF != 16) why = why " fields " NF
      for (i = 4; i <= 16; i++) {
        if (i >= 8 && i <= 10) continue
        if ($i !~ /^-?[0-9]+\.[0-9][0-9][0-9][0-9]$/) { why = why " column " i " not a number"; continue }
        iscos = (i <= 5 || (i >= 11 && i <= 13))
        if (iscos && ($i + 0 < -1 || $i + 0 > 1)) why = why " cosine " i " out of [-1, 1]"
        if (!iscos && $i + 0 < 0) why = why " error " i " below 0"
      }
      want = ($11 + 0 >= admit + 0) ? "int4" : "fp32"
      if ($8 != want) why = why " route " $8 ", want " want
      if ($8 == "int4" && $10 != "-") why = why " decay " $10 " on int4"
      if ($3 != 6) why = why " calls " $3
      if (why != "") print $0 ":" why }' "$1" || echo "awk failed on $1"
}
regions() { # STATS: region:route,... sorted
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['regions'];
print(' '.join(sorted(k+':'+','.join(sorted(v)) for k,v in r.items())))" "$1"
}
for np in 2 3; do
  nf_tier $np || continue
  prof=$tmp/p.$np
  run $np NFCOLL_POLICY=$pol NFCOLL_CALIBRATE=$prof ./tests/mpi/test_calib --calibrate 8
  if [ ! -f "$prof" ]; then echo "FAIL - $np ranks: no profile written"; nf_failed=1; continue; fi
  head -1 "$prof" | grep -qx '# libnfcoll profile v3' || { echo "FAIL - bad header"; nf_failed=1; }
  perm=$(stat -c %a "$prof")
  [ "$perm" = 600 ] || { echo "FAIL - profile mode $perm, not 600"; nf_failed=1; }
  # route follows int4's cosine and the threshold 0.5, on every line; dense's
  # binary cosine reaches 0.5 too, spiky's does not: neither takes binary
  bad=$(badlines "$prof" 0.5)
  dense=$(col "$prof" dense 8); spiky=$(col "$prof" spiky 8)
  if [ -z "$bad" ] && [ "$dense" = int4 ] && [ "$spiky" = int4 ] &&
     awk -v b="$(col "$prof" dense 4)" -v s="$(col "$prof" spiky 4)" 'BEGIN {exit !(b >= 0.5 && s < 0.5)}'; then
    echo "ok - $np ranks: profile admits dense and spiky on int4, dense not on binary"; cat "$prof"
  else
    echo "FAIL - $np ranks: dense '$dense' spiky '$spiky', inconsistent lines: $bad"
    cat "$prof"; nf_failed=1
  fi
  printf '[policy]\nversion = 1\nprofile = %s\n[rule all]\ndatatype = float\nop = sum\nroute = auto\n' \
    "$prof" > "$tmp/auto.policy"
  run $np NFCOLL_POLICY=$tmp/auto.policy NFCOLL_STATS=$tmp/s.json NFCOLL_TRACE=$tmp/t.$np.%r \
    ./tests/mpi/test_calib --auto 4
  got=$(regions "$tmp/s.json")
  if [ "$got" = "dense:int4 spiky:int4" ]; then
    echo "ok - $np ranks: route = auto takes the profile's routes ($got)"
  else
    echo "FAIL - $np ranks: route = auto gave '$got'"; nf_failed=1
  fi
  # The evidence beside the decision: the stats' admission record and the
  # trace's why carry the cosine that admitted int4; the integer route
  # takes the whole residual (the settings' decay, 1: none named).
  c4=$(col "$prof" dense 11)
  if python3 - "$tmp/s.json" "$c4" "$(col "$prof" dense 4)" <<'PY' &&
import json, sys
a = json.load(open(sys.argv[1]))["admission"]["dense"]
want = dict(route="int4", by="profile", cos_int4=float(sys.argv[2]), cos_binary=float(sys.argv[3]),
            ef_decay=1.0, ef_decay_by="settings", block=128)
got = {k: a.get(k) for k in want}
sys.exit(0 if got == want else "admission record of dense: %s, want %s" % (got, want))
PY
     awk -v w="profile:cos_binary=$(col "$prof" dense 4),cos_ternary=$(col "$prof" dense 5),cos_int4=$c4" \
       '$11 == "dense" {n++; if ($16 != w) bad++} END {exit !(n > 0 && bad == 0)}' "$tmp/t.$np.0"; then
    echo "ok - $np ranks: the admission record and the trace's why give cos_int4 $c4, the decay the settings'"
  else
    echo "FAIL - $np ranks: the admission record or the trace's why:"
    sed -n '/"admission"/,$p' "$tmp/s.json"; awk '$11 == "dense"' "$tmp/t.$np.0" | head -3; nf_failed=1
  fi
  # admit_cosine at the higher of the two int4 cosines, as written: that
  # region is admitted (>=), the other refused (fp32), both measured as
  # before; route = auto then runs one of each.
  hi=$(awk '!/^#/ && NF && $11 + 0 > m + 0 {m = $11} END {print m}' "$prof")
  lo=$(awk -v hi="$hi" '!/^#/ && NF && $11 != hi {print $1}' "$prof")
  top=$(awk -v hi="$hi" '!/^#/ && NF && $11 == hi {print $1}' "$prof")
  sed "s/^admit_cosine = 0.5$/admit_cosine = $hi/" "$pol" > "$tmp/split.policy"
  run $np NFCOLL_POLICY=$tmp/split.policy NFCOLL_CALIBRATE=$tmp/split.$np ./tests/mpi/test_calib --calibrate 8
  sed "s|^profile = .*|profile = $tmp/split.$np|" "$tmp/auto.policy" > "$tmp/splitauto.policy"
  run $np NFCOLL_POLICY=$tmp/splitauto.policy NFCOLL_STATS=$tmp/s.json ./tests/mpi/test_calib --auto 4
  got=$(regions "$tmp/s.json")
  if [ -n "$lo" ] && [ -n "$top" ] && [ -z "$(badlines "$tmp/split.$np" "$hi")" ] &&
     [ "$(col "$tmp/split.$np" "$top" 8)" = int4 ] && [ "$(col "$tmp/split.$np" "$lo" 8)" = fp32 ] &&
     [ "$(grep -v '^#' "$tmp/split.$np" | cut -d' ' -f1-7,11-)" = "$(grep -v '^#' "$prof" | cut -d' ' -f1-7,11-)" ] &&
     [ "$got" = "$(printf '%s\n' "$lo:fp32" "$top:int4" | sort | tr '\n' ' ' | sed 's/ $//')" ]; then
    echo "ok - $np ranks: at admit_cosine $hi, $top takes int4 and $lo fp32 ($got)"
  else
    echo "FAIL - $np ranks: at admit_cosine '$hi' ($top over $lo): route = auto gave '$got'"
    badlines "$tmp/split.$np" "$hi"; cat "$prof" "$tmp/split.$np"; nf_failed=1
  fi
  # An entry measured on another element count is ignored, with a word.
  awk '$1 == "dense" {$2 = 100} {print}' "$prof" > "$tmp/other.$np"
  sed "s|^profile = .*|profile = $tmp/other.$np|" "$tmp/auto.policy" > "$tmp/other.policy"
  out "$tmp/o.$np" $np NFCOLL_POLICY=$tmp/other.policy NFCOLL_STATS=$tmp/s.json \
    ./tests/mpi/test_calib --auto 4
  got=$(regions "$tmp/s.json")
  if [ "$got" = "dense:fp32 spiky:int4" ] &&
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
# names a decay its binary and ternary shadows run at its own, 0.25, and its
# integer shadows take the whole residual (1): under ef_decay = 0.25 the
# binary and ternary columns are those without the key, the integer ones
# another route's; under ef_decay = 1 the integer columns are those without
# the key, and ef_decay = 1 in the rule and NFCOLL_EF_DECAY=1 (explicit too)
# measure one other binary route; under ef_decay = 0 no shadow adds its
# residual back.
for d in 0.25 1 0; do
  sed -e "s/^version = 1$/version = 2/" -e "s/^route = binary$/route = binary\nef_decay = $d/" \
    "$pol" > "$tmp/decay$d.policy"
  run 2 NFCOLL_POLICY=$tmp/decay$d.policy NFCOLL_CALIBRATE=$tmp/d$d ./tests/mpi/test_calib --calibrate 8
done
run 2 NFCOLL_POLICY=$pol NFCOLL_EF_DECAY=1 NFCOLL_CALIBRATE=$tmp/env1 ./tests/mpi/test_calib --calibrate 8
cols() { grep -v '^#' "$1" | cut -d' ' -f"$2"; } # PROFILE FIELDS: the entries' columns
if [ "$(cols "$tmp/p.2" 1-7)" = "$(cols "$tmp/d0.25" 1-7)" ] &&
   [ "$(cols "$tmp/p.2" 11-)" != "$(cols "$tmp/d0.25" 11-)" ] &&
   [ "$(cols "$tmp/p.2" 11-)" = "$(cols "$tmp/d1" 11-)" ] &&
   [ "$(cols "$tmp/p.2" 11-)" != "$(cols "$tmp/d0" 11-)" ] &&
   cmp -s "$tmp/d1" "$tmp/env1" && ! cmp -s "$tmp/p.2" "$tmp/d1" &&
   [ "$(col "$tmp/p.2" dense 4)" != "$(col "$tmp/d0" dense 4)" ] &&
   [ "$(col "$tmp/p.2" dense 4)" != "$(col "$tmp/d1" dense 4)" ]; then
  echo "ok - calibration's shadows: 0.25 (binary, ternary) and 1 (integer) where nothing names a decay; the rule's or NFCOLL_EF_DECAY's where named"
else
  echo "FAIL - calibration under ef_decay:"; cat "$tmp/p.2" "$tmp/d0.25" "$tmp/d1" "$tmp/env1" "$tmp/d0"; nf_failed=1
fi
# Likewise scale_block: 0 is the profile without the key; 512 (8 blocks of
# each 4096-float region) measures the blocked binary route, and the
# ternary and integer shadows, which have no such blocks (theirs is the
# `block` key), measure the same.
for b in 0 512; do
  sed -e "s/^version = 1$/version = 3/" -e "s/^route = binary$/route = binary\nscale_block = $b/" \
    "$pol" > "$tmp/block$b.policy"
  run 2 NFCOLL_POLICY=$tmp/block$b.policy NFCOLL_CALIBRATE=$tmp/b$b ./tests/mpi/test_calib --calibrate 8
done
# The error-feedback decay: 110 calls fill the lag cosine's window (calls
# 21-100), and every entry has a lag, kept as evidence; an int4 entry has
# no decay ('-': the integer routes take the whole residual), an fp32 one
# (admit_cosine 1 refuses int4) the decay the rule gives (1 below 0, 0.25
# from 0). 25 calls measure a lag on too few calls: an int4 entry misses
# no decay, so rank 0 says nothing (the warning is for binary and ternary
# entries, which route = auto's profile no longer chooses), and an fp32
# one has '-' and no word either. With the settings' error feedback off
# nothing is measured and the shadows stop after 20 calls as before (the
# skips of a mismatched layout stop at 2K = 12).
sed "s/^admit_cosine = 0.5$/admit_cosine = 1/" "$pol" > "$tmp/strict.policy"
lagbad() { # PROFILE: entries without a lag, or with a decay the rule does not give
  awk '!/^#/ && NF { want = $8 ~ /^int/ ? "-" : ($9 + 0 < 0) ? "1.0000" : "0.2500"
                     if (NF != 16 || $9 == "-" || $10 != want) print }' "$1"
}
out "$tmp/lag" 2 NFCOLL_POLICY=$pol NFCOLL_CALIBRATE=$tmp/lag.profile ./tests/mpi/test_calib --calibrate 110
out "$tmp/slag" 2 NFCOLL_POLICY=$tmp/strict.policy NFCOLL_CALIBRATE=$tmp/slag.profile \
  ./tests/mpi/test_calib --calibrate 110
bad=$(lagbad "$tmp/lag.profile")$(lagbad "$tmp/slag.profile")
if [ -s "$tmp/lag.profile" ] && [ -z "$bad" ] && [ "$(entries "$tmp/lag.profile")" = 2 ] &&
   [ "$(cols "$tmp/lag.profile" 8 | sort -u)" = int4 ] &&
   [ "$(entries "$tmp/slag.profile")" = 2 ] && [ "$(cols "$tmp/slag.profile" 8 | sort -u)" = fp32 ]; then
  echo "ok - 110 calls: a lag cosine on every entry, no decay on int4, the decay the lag calls for on fp32"
  cat "$tmp/lag.profile" "$tmp/slag.profile"
else
  echo "FAIL - 110 calls: entries without a lag or with the wrong decay: $bad"
  cat "$tmp/lag.profile" "$tmp/slag.profile"; nf_failed=1
fi
out "$tmp/short" 2 NFCOLL_POLICY=$pol NFCOLL_CALIBRATE=$tmp/short.profile ./tests/mpi/test_calib --calibrate 25
out "$tmp/sshort" 2 NFCOLL_POLICY=$tmp/strict.policy NFCOLL_CALIBRATE=$tmp/sshort.profile \
  ./tests/mpi/test_calib --calibrate 25
if [ "$(col "$tmp/short.profile" dense 8)" = int4 ] && [ "$(col "$tmp/short.profile" dense 10)" = - ] &&
   [ "$(col "$tmp/short.profile" dense 9)" != - ] &&
   [ "$(col "$tmp/sshort.profile" dense 8)" = fp32 ] && [ "$(col "$tmp/sshort.profile" dense 10)" = - ] &&
   [ "$(col "$tmp/sshort.profile" dense 9)" != - ] &&
   ! grep -q "lag cosine's window" "$tmp/short.err" "$tmp/sshort.err"; then
  echo "ok - 25 calls: a lag on too few calls chooses no decay; no word, since no binary or ternary entry misses one"
else
  echo "FAIL - 25 calls:"; cat "$tmp/short.profile" "$tmp/short.err" "$tmp/sshort.profile" "$tmp/sshort.err"
  nf_failed=1
fi
out "$tmp/noef" 2 NFCOLL_EF=off NFCOLL_POLICY=$pol NFCOLL_CALIBRATE=$tmp/noef.profile ./tests/mpi/test_calib --calibrate 30
out "$tmp/mm" 2 NFCOLL_POLICY=$pol NFCOLL_CALIBRATE=$tmp/mm.profile ./tests/mpi/test_calib --mismatch 120
if [ -s "$tmp/noef.profile" ] && [ "$(entries "$tmp/noef.profile")" = 2 ] &&
   [ -z "$(awk '!/^#/ && NF && ($9 != "-" || $10 != "-")' "$tmp/noef.profile")" ] &&
   ! grep -q "lag cosine" "$tmp/noef.err" &&
   grep -q "^# skipped dense: 0 calls with a NaN or Inf, 12 that ran a fallback" "$tmp/mm.profile"; then
  echo "ok - no error feedback: no lag, no word; a layout mismatch stops after 12 skipped calls"
else
  echo "FAIL - lag without error feedback or mismatched:"; cat "$tmp/noef.profile" "$tmp/noef.err" "$tmp/mm.profile"; nf_failed=1
fi
if cmp -s "$tmp/p.2" "$tmp/b0" && ! cmp -s "$tmp/p.2" "$tmp/b512" &&
   [ "$(col "$tmp/p.2" dense 4)" != "$(col "$tmp/b512" dense 4)" ] &&
   [ "$(col "$tmp/p.2" dense 5)" = "$(col "$tmp/b512" dense 5)" ] &&
   [ "$(cols "$tmp/p.2" 11-)" = "$(cols "$tmp/b512" 11-)" ]; then
  echo "ok - calibration under scale_block: 0 as without the key, 512 measures blocked binary, ternary and integer alike"
else
  echo "FAIL - calibration under scale_block:"; cat "$tmp/p.2" "$tmp/b0" "$tmp/b512"; nf_failed=1
fi
finish
