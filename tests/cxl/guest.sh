#!/bin/sh
# Runs inside the emulated CXL machine (tests/cxl/cxl-vm.sh): node 1 is the
# CPU-less CXL node. Prints one PASS/FAIL line per check; exits 1 on any FAIL.
#   guest.sh BUILDDIR
cd "$1" || { echo "FAIL: no build tree $1 in the guest"; exit 1; }
export HOME=/tmp OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="mpirun -np 2 --mca btl self,vader"
fails=0
check() { # NAME STATUS DETAIL
    if [ "$2" = 0 ]; then echo "PASS: $1"; else echo "FAIL: $1${3:+ ($3)}"; fails=$((fails + 1)); fi
}

numactl -H 2>/dev/null | sed 's/^/  guest: /'
out=$(tools/nfcoll_info --json 2>/dev/null)
echo "$out" | grep -q '"cxl_node": 1,' ; check 'nfcoll_info --json reports "cxl_node": 1' $? \
    "$(echo "$out" | grep cxl_)"

for route in binary fp32; do
    out=$($MPIRUN tests/cxl/cxl_run "$route" -e 1 2>&1); rc=$?
    echo "$out" | sed 's/^/  /'
    [ $rc = 0 ] && [ "$(echo "$out" | grep -c '^PASS cxl_run')" = 2 ]
    check "2-rank $route NF_Allreduce: correct, buffer and residual pages 100 % on node 1" $? "rc $rc"
done

out=$(NFCOLL_CXL=require $MPIRUN tests/cxl/cxl_run binary -e 1 2>&1); rc=$?
echo "$out" | sed 's/^/  /'
check "NFCOLL_CXL=require succeeds on the emulated CXL machine" $rc

exit $((fails != 0))
