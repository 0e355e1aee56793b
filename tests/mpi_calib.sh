#!/bin/sh
# Calibration finds which region low-bit serves (tests/mpi/test_calib.c):
# a calibration run returns exact sums and writes a profile that admits the
# dense shared signal and refuses the sparse private spikes, with every
# route the one its measured cosines call for; a run with route = auto and
# that profile takes those routes (stats per region).
. "${srcdir:-.}/tests/mpi_common.sh"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
pol=$srcdir/tests/policy_shim/calib.policy
for np in 2 3; do
  prof=$tmp/p.$np
  run $np NFCOLL_POLICY=$pol NFCOLL_CALIBRATE=$prof ./tests/mpi/test_calib --calibrate 8
  if [ ! -f "$prof" ]; then echo "FAIL - $np ranks: no profile written"; nf_failed=1; continue; fi
  head -1 "$prof" | grep -qx '# libnfcoll profile v1' || { echo "FAIL - bad header"; nf_failed=1; }
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
done
# Calibration measures the route as the rule runs it: under ef_decay = 1 the
# profile is the one without the key, byte for byte; under ef_decay = 0 the
# binary shadow adds no residual back and its cosines change.
for d in 1 0; do
  sed -e "s/^version = 1$/version = 2/" -e "s/^route = binary$/route = binary\nef_decay = $d/" \
    "$pol" > "$tmp/decay$d.policy"
  run 2 NFCOLL_POLICY=$tmp/decay$d.policy NFCOLL_CALIBRATE=$tmp/d$d ./tests/mpi/test_calib --calibrate 8
done
if cmp -s "$tmp/p.2" "$tmp/d1" && ! cmp -s "$tmp/p.2" "$tmp/d0" &&
   [ "$(awk '$1 == "dense" {print $4}' "$tmp/p.2")" != "$(awk '$1 == "dense" {print $4}' "$tmp/d0")" ]; then
  echo "ok - calibration under ef_decay: 1 as without the key, 0 measures another binary route"
else
  echo "FAIL - calibration under ef_decay:"; cat "$tmp/p.2" "$tmp/d1" "$tmp/d0"; nf_failed=1
fi
finish
