#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# nfcoll_policy check: the layout and profile a policy names are loaded
# with their file:line problems, counted, and fail the check when they do
# not load or lose lines; relative paths are taken from the policy's
# directory, whatever the working directory.
fix=$(cd "${srcdir:-.}/tests/policy" && pwd) || exit 99
tool=$PWD/tools/nfcoll_policy
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
failed=0

# expect EXIT POLICY PATTERN...: run check, want EXIT and each grep -F
# PATTERN in stdout + stderr.
expect() {
  want=$1 policy=$2; shift 2
  (cd / && "$tool" check "$policy") > "$tmp/out" 2>&1
  got=$?
  if [ "$got" != "$want" ]; then
    echo "FAIL - check $policy: exit $got, expected $want"; cat "$tmp/out"; failed=1; return
  fi
  for pat in "$@"; do
    if ! grep -qF -- "$pat" "$tmp/out"; then
      echo "FAIL - check $policy: no '$pat' in:"; cat "$tmp/out"; failed=1
    fi
  done
}

expect 0 "$fix/model.policy" \
  "regions $fix/model.layout: ok: 6 entries, 0 lines dropped, hash " \
  "profile $fix/model.profile: ok: 7 entries (3 binary, 1 ternary, 0 int4, 0 int3, 0 int2, 3 fp32; ef_decay: 0 whole, 0 cut, 7 the settings'), hash " \
  "calibrate $fix/calibrated/model.profile: written by a calibration run (10 calls per segment, admit_cosine 0.8)"

# Relative to the policy's directory: copies next to a policy in $tmp.
mkdir "$tmp/conf" && cp "$fix/model.layout" "$fix/bad.layout" "$fix/model.profile" "$fix/dup.profile" "$tmp/conf/"
printf '[policy]\nversion = 1\nregions = model.layout\nprofile = model.profile\n' > "$tmp/conf/rel.policy"
expect 0 "$tmp/conf/rel.policy" "regions $tmp/conf/model.layout: ok: 6 entries" \
  "profile $tmp/conf/model.profile: ok: 7 entries"

printf '[policy]\nversion = 1\nregions = bad.layout\n' > "$tmp/conf/bad.policy"
expect 1 "$tmp/conf/bad.policy" \
  "$tmp/conf/bad.layout:3: warning: 'b' [256, 768) overlaps 'a' [0, 512) of line 2 in 4096-byte calls; entry dropped" \
  "$tmp/conf/bad.layout:7: warning: expected BYTES NAME OFFSET COUNT, found 3 fields" \
  "regions $tmp/conf/bad.layout: loads with problems: 2 entries, 5 lines dropped"

printf '[policy]\nversion = 1\nprofile = dup.profile\n[default]\nroute = auto\n' > "$tmp/conf/dup.policy"
expect 1 "$tmp/conf/dup.policy" \
  "$tmp/conf/dup.profile:6: error: duplicate segment 'fc1.weight' (first at line 3)" \
  "profile $tmp/conf/dup.profile: does not load: route = auto would take fp32 everywhere"

printf '[policy]\nversion = 1\nregions = none.layout\nprofile = none.profile\n' > "$tmp/conf/missing.policy"
expect 1 "$tmp/conf/missing.policy" \
  "$tmp/conf/none.layout: error: cannot open layout file: No such file or directory" \
  "regions $tmp/conf/none.layout: does not load" \
  "$tmp/conf/none.profile: error: cannot open profile: No such file or directory" \
  "profile $tmp/conf/none.profile: does not load"

printf '[policy]\nversion = 1\nregions = .\n' > "$tmp/conf/dir.policy"
expect 1 "$tmp/conf/dir.policy" "$tmp/conf/.: error: cannot read layout file: not a regular file"

# A version 2 profile: check counts the decays calibration chose, and
# explain prints a region's entry and which decay runs (the rule's wins).
printf '# libnfcoll profile v2\na 100 20 0.9 0.9 0.3 0.3 binary -0.2 1\nb 100 20 0.9 0.9 0.3 0.3 binary 0.15 0.25\nc 100 20 0.9 0.9 0.3 0.3 ternary - -\n' > "$tmp/conf/v2.profile"
printf '[policy]\nversion = 2\nprofile = v2.profile\n[rule b]\nregion = b\nroute = auto\nef_decay = 0.5\n[rule all]\nroute = auto\n' > "$tmp/conf/v2.policy"
expect 0 "$tmp/conf/v2.policy" "profile $tmp/conf/v2.profile: ok: 3 entries (2 binary, 1 ternary, 0 int4, 0 int3, 0 int2, 0 fp32; ef_decay: 1 whole, 1 cut, 1 the settings')"
explain() {
  "$tool" explain "$tmp/conf/v2.policy" --bytes 400 --comm-size 2 --region "$1" > "$tmp/out" 2>&1
  if ! grep -qF -- "$2" "$tmp/out"; then echo "FAIL - explain $1: no '$2' in:"; cat "$tmp/out"; failed=1; fi
}
explain a "v2.profile:2: a: route binary (cos_binary 0.9000, cos_ternary 0.9000 over 20 calls), lag_cosine -0.2000: ef_decay 1 from the profile"
explain b "lag_cosine 0.1500: ef_decay 0.5 from the rule (the profile's choice is not used)"
explain c "lag_cosine not measured: ef_decay the settings' (NFCOLL_EF_DECAY)"
explain d "v2.profile: no entry for d: fp32"
"$tool" explain "$tmp/conf/v2.policy" --bytes 800 --comm-size 2 --region a > "$tmp/out" 2>&1
grep -qF "v2.profile:2: a was measured on 100 elements, this call has 200: a stale entry, fp32 (and no decay from it)" "$tmp/out" ||
  { echo "FAIL - explain of a stale entry:"; cat "$tmp/out"; failed=1; }

# route = auto without a profile: a warning, not a failure.
printf '[policy]\nversion = 1\n[rule a]\nroute = auto\n' > "$tmp/auto.policy"
expect 0 "$tmp/auto.policy" "$tmp/auto.policy:4: warning: route = auto without a profile: every segment takes fp32"

# The integer routes (policy version 4): a profile may name them, check
# counts them by the route table, explain prints a rule's block; in an
# older version the route and the key disable their rule, with file:line.
printf '# libnfcoll profile v2\na 100 20 0.9 0.9 0.3 0.3 int4 - -\nb 100 20 0.9 0.9 0.3 0.3 int2 - -\n' > "$tmp/conf/int.profile"
printf '[policy]\nversion = 4\nprofile = int.profile\n[rule a]\nregion = a\nroute = int4\nblock = 64\n[rule all]\nroute = auto\nblock = 256\n' > "$tmp/conf/int.policy"
expect 0 "$tmp/conf/int.policy" "profile $tmp/conf/int.profile: ok: 2 entries (0 binary, 0 ternary, 1 int4, 0 int3, 1 int2, 0 fp32;"
"$tool" explain "$tmp/conf/int.policy" --bytes 400 --comm-size 2 --region a > "$tmp/out" 2>&1
grep -qF "=> route int4 (ef inherit, ef_decay inherit, gamma inherit, segment inherit, block 64) from rule a ($tmp/conf/int.policy:4)" "$tmp/out" ||
  { echo "FAIL - explain of an int4 rule's block:"; cat "$tmp/out"; failed=1; }
"$tool" explain "$tmp/conf/int.policy" --bytes 400 --comm-size 2 --region b > "$tmp/out" 2>&1
grep -qF "int.profile:3: b: route int2 (cos_binary" "$tmp/out" ||
  { echo "FAIL - explain of an int2 profile entry:"; cat "$tmp/out"; failed=1; }
# A version 3 profile (what calibration writes): explain adds int4's
# cosine, the one that admitted it; the integer route takes the settings' decay.
printf '# libnfcoll profile v3\na 100 20 0.9 0.9 0.3 0.3 int4 0.1 - 0.99 0.98 0.9 0.1 0.2 0.4\n' > "$tmp/conf/v3.profile"
printf '[policy]\nversion = 4\nprofile = v3.profile\n[rule all]\nroute = auto\n' > "$tmp/conf/v3.policy"
expect 0 "$tmp/conf/v3.policy" "profile $tmp/conf/v3.profile: ok: 1 entry (0 binary, 0 ternary, 1 int4, 0 int3, 0 int2, 0 fp32;"
"$tool" explain "$tmp/conf/v3.policy" --bytes 400 --comm-size 2 --region a > "$tmp/out" 2>&1
grep -qF "v3.profile:2: a: route int4 (cos_binary 0.9000, cos_ternary 0.9000, cos_int4 0.9900 over 20 calls), lag_cosine 0.1000: ef_decay the settings' (NFCOLL_EF_DECAY)" "$tmp/out" ||
  { echo "FAIL - explain of a v3 profile entry:"; cat "$tmp/out"; failed=1; }
printf '[policy]\nversion = 3\n[rule a]\nroute = int4\n[rule b]\nroute = binary\nblock = 128\n' > "$tmp/conf/int3.policy"
expect 1 "$tmp/conf/int3.policy" \
  "$tmp/conf/int3.policy:4: warning: route int4 needs version = 4 in [policy] (this file says 3); rule 'a' disabled" \
  "$tmp/conf/int3.policy:7: warning: block needs version = 4 in [policy] (this file says 3); rule 'b' disabled"
printf '[policy]\nversion = 4\n[rule a]\nroute = int3\nblock = 100\n[rule b]\nroute = binary\nblock = 128\n' > "$tmp/conf/blk.policy"
expect 1 "$tmp/conf/blk.policy" \
  "$tmp/conf/blk.policy:5: warning: bad block '100' (expected a power of two from 32 to 4096); rule 'a' disabled" \
  "$tmp/conf/blk.policy:8: warning: block has no effect on route binary (only the integer routes have one)"

[ $failed = 0 ] && echo "PASS: nfcoll_policy check with layout and profile files"
exit $failed
