#!/bin/sh
# make check-cxl (and make check-full): prove CXL placement.
#  1. On this machine: if it has no CXL node, NFCOLL_CXL=require must fail
#     with a clear message.
#  2. In a QEMU guest with an emulated CXL node (tests/cxl/cxl-vm.sh):
#     tests/cxl/guest.sh.
# Run from the top build directory. Exit 77 (SKIP) when qemu, a Debian
# kernel package or busybox-static is missing; the reason is printed.
srcdir=${srcdir:-$(dirname "$0")/../..}
builddir=$(pwd)
cache=${NFCOLL_CXL_CACHE:-$builddir/tests/cxl/cache}
. "$srcdir/tests/mpi_common.sh"
nf_ompi_only "Open MPI in the guest (Debian's) and mpirun --mca here"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fails=0

for p in tools/nfcoll_info tests/cxl/cxl_run; do
    [ -x "$p" ] || { echo "FAIL: $builddir/$p is not built"; exit 99; }
done

if tools/nfcoll_info --json 2>/dev/null | grep -q '"cxl_node": null'; then
    # Own session directory: other tests may start mpirun at the same time.
    session=$(mktemp -d "${TMPDIR:-/tmp}/nfcoll-mpi.XXXXXX")
    out=$(OMPI_MCA_orte_tmpdir_base=$session NFCOLL_CXL=require \
          mpirun -np 2 --mca btl self,vader tests/cxl/cxl_run fp32 2>&1); rc=$?
    rm -rf "$session"
    if [ $rc != 0 ] && echo "$out" | grep -q 'NFCOLL_CXL=require but there is no usable CXL memory node'; then
        echo "PASS: NFCOLL_CXL=require fails on this machine (no CXL node): $(echo "$out" | grep -m1 'error:')"
    else
        echo "FAIL: NFCOLL_CXL=require on this machine (no CXL node): rc $rc"
        echo "$out" | sed 's/^/  /'
        fails=1
    fi
else
    echo "SKIP: this machine has a CXL node, so NFCOLL_CXL=require cannot be shown to fail here"
fi

if ! command -v "${QEMU:-qemu-system-x86_64}" >/dev/null; then
    echo "SKIP: ${QEMU:-qemu-system-x86_64} not found (Debian: apt-get install qemu-system-x86)"
    [ $fails = 0 ] && exit 77
    exit 1
fi
mkdir -p "$cache"
out=$(sh "$srcdir/tests/cxl/cxl-vm.sh" prepare "$cache"); rc=$?
if [ $rc = 77 ]; then
    echo "$out"
    [ $fails = 0 ] && exit 77
    exit 1
fi
[ $rc = 0 ] || { echo "$out"; echo "FAIL: cannot prepare the guest"; exit 99; }
sh "$srcdir/tests/cxl/cxl-vm.sh" run "$cache" "$srcdir/tests/cxl/guest.sh" "$builddir"
rc=$?
[ $rc = 0 ] || fails=1
[ $fails = 0 ] && echo "PASS: check-cxl" || echo "FAIL: check-cxl"
exit $fails
