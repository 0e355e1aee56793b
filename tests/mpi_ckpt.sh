#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Residual checkpoints (tests/mpi/test_ckpt.c): in one process on 2 and 3
# ranks; saved by one run and resumed by another (also with scale_block,
# inside a warm-up and inside a health cool-down);
# a checkpoint of 3 ranks refused on 2; nfcoll_info --checkpoint on a good and a corrupted file.
. "${srcdir:-.}/tests/mpi_common.sh"
pol=$srcdir/tests/policy_shim/ckpt.policy
tmp=$(mktemp -d "${TMPDIR:-/tmp}/nfcoll-ckpt.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
for np in 2 3; do
  nf_tier $np || continue
  d=$tmp/in$np; mkdir "$d"
  run $np NFCOLL_POLICY=$pol ./tests/mpi/test_ckpt inproc "$d"
  d=$tmp/re$np; mkdir "$d"
  run $np NFCOLL_POLICY=$pol ./tests/mpi/test_ckpt save "$d"
  run $np NFCOLL_POLICY=$pol ./tests/mpi/test_ckpt resume "$d"
done
# binary with one scale per 512 elements (scale_block), decayed: a blocked
# Y form is saved as its e (E form) and resumes to the same bits
d=$tmp/blk; mkdir "$d"
run 2 NFCOLL_SCALE_BLOCK=512 NFCOLL_EF_DECAY=0.5 NFCOLL_POLICY=$pol ./tests/mpi/test_ckpt inproc "$d"
d=$tmp/reblk; mkdir "$d"
run 2 NFCOLL_SCALE_BLOCK=512 NFCOLL_EF_DECAY=0.5 NFCOLL_POLICY=$pol ./tests/mpi/test_ckpt save "$d"
run 2 NFCOLL_SCALE_BLOCK=512 NFCOLL_EF_DECAY=0.5 NFCOLL_POLICY=$pol ./tests/mpi/test_ckpt resume "$d"
if ! ./tools/nfcoll_info --checkpoint "$d/ck.0" | grep -q "region 'wb' .* form E"; then
  echo "FAILED: the blocked binary region wb is not saved in E form:"
  ./tools/nfcoll_info --checkpoint "$d/ck.0"; nf_failed=1
fi
# The integer routes (tests/policy_shim/ckpt_int.policy): Q-form residuals
# with several block sizes are saved as E form and resume to the same bits.
d=$tmp/int; mkdir "$d"
run 2 NFCOLL_POLICY=$srcdir/tests/policy_shim/ckpt_int.policy ./tests/mpi/test_ckpt inproc "$d"
d=$tmp/reint; mkdir "$d"
run 2 NFCOLL_POLICY=$srcdir/tests/policy_shim/ckpt_int.policy ./tests/mpi/test_ckpt save "$d"
run 2 NFCOLL_POLICY=$srcdir/tests/policy_shim/ckpt_int.policy ./tests/mpi/test_ckpt resume "$d"
if ! ./tools/nfcoll_info --checkpoint "$d/ck.0" | grep -q "region 'wb' .* form E"; then
  echo "FAILED: the int4 region wb is not saved in E form:"
  ./tools/nfcoll_info --checkpoint "$d/ck.0"; nf_failed=1
fi
# Saved inside a warm-up (tests/policy_shim/ckpt_warmup.policy, saved
# after 3 steps): the resumed run finishes the warm-up as the
# uninterrupted run did, bit for bit. Saved inside a health cool-down (a
# loss spike at step 2): the resumed run gives the uninterrupted run's
# results bit for bit, and takes its route, with the same reason, on every
# segment of every call (the traces from call 12 on). The two unbound
# buffers of one count share a health record, so one re-enters while the
# other still cools: the cooling one must adopt its own loaded residual
# (docs/design.md, "Checkpoints").
for np in 2 3; do
  nf_tier $np || continue
  d=$tmp/warmup$np; mkdir "$d"
  pol=$srcdir/tests/policy_shim/ckpt_warmup.policy
  run $np NFCOLL_POLICY=$pol ./tests/mpi/test_ckpt save "$d"
  run $np NFCOLL_POLICY=$pol ./tests/mpi/test_ckpt resume "$d"
  d=$tmp/health$np; mkdir "$d"
  pol=$srcdir/tests/policy_shim/ckpt_health.policy
  run $np NF_TEST_LOSS=1 NFCOLL_TRACE=$d/save NFCOLL_POLICY=$pol ./tests/mpi/test_ckpt save "$d"
  run $np NF_TEST_LOSS=1 NFCOLL_TRACE=$d/resume NFCOLL_POLICY=$pol \
    ./tests/mpi/test_ckpt resume "$d"
  # each run's lines of its calls 12-23 (steps 3-5 on the checkpointed
  # communicator: 4 calls per step): call, region, offset, elements, route
  # that ran, health reason
  for w in save resume; do
    awk '!/^#/ && $2 >= 12 && $2 < 24 && $14 != "pmpi" {print $2, $11, $12, $13, $14, $15}' \
      "$d/$w.0" > "$d/$w.routes"
  done
  if [ -s "$d/save.routes" ] && grep -q loss_spike "$d/save.routes" &&
     cmp -s "$d/save.routes" "$d/resume.routes"; then
    echo "ok - $np ranks: resumed inside a cool-down, bit for bit, the same routes and reasons ($(grep -c loss_spike "$d/save.routes") segments cooling)"
  else
    echo "FAILED: $np ranks: the resumed run's routes differ from the uninterrupted run's:"
    diff "$d/save.routes" "$d/resume.routes"; nf_failed=1
  fi
done
if ! ./tools/nfcoll_info --checkpoint "$tmp/warmup2/ck.0" | grep -q "the layers' state .*: [1-9][0-9]* bytes"; then
  echo "FAILED: nfcoll_info --checkpoint does not show the layers' state:"
  ./tools/nfcoll_info --checkpoint "$tmp/warmup2/ck.0"; nf_failed=1
fi

# wrongsize reads the 3-rank checkpoint
nf_tier 3 && run 2 NFCOLL_POLICY=$pol ./tests/mpi/test_ckpt wrongsize "$tmp/re3"

# The file describes itself; a flipped byte is named.
if ./tools/nfcoll_info --checkpoint "$tmp/re2/ck.1" > "$tmp/info.txt"; then
  grep -q "rank 1 of 2" "$tmp/info.txt" && grep -q "region 'wt'" "$tmp/info.txt" &&
    grep -q "unbound #1" "$tmp/info.txt" ||
    { echo "FAILED: nfcoll_info --checkpoint output:"; cat "$tmp/info.txt"; nf_failed=1; }
else
  echo "FAILED: nfcoll_info --checkpoint on a good file"; nf_failed=1
fi
cp "$tmp/re2/ck.1" "$tmp/bad.1"
old=$(od -An -tu1 -j200 -N1 "$tmp/bad.1" | tr -d ' ')
if [ "$old" = 88 ]; then new=Y; else new=X; fi
printf '%s' "$new" | dd of="$tmp/bad.1" bs=1 seek=200 conv=notrunc 2>/dev/null
if ./tools/nfcoll_info --checkpoint "$tmp/bad.1" > "$tmp/bad.txt" 2>&1; then
  echo "FAILED: nfcoll_info --checkpoint accepted a corrupted file"; nf_failed=1
elif ! grep -q "corrupted" "$tmp/bad.txt"; then
  echo "FAILED: nfcoll_info --checkpoint did not say why:"; cat "$tmp/bad.txt"; nf_failed=1
fi
finish
