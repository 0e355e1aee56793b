#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Boot an emulated CXL machine under QEMU (TCG) and run one command inside it.
#
#   cxl-vm.sh prepare CACHE              build CACHE/vmlinuz and CACHE/initrd.gz
#   cxl-vm.sh run CACHE MACHINE SCRIPT [ARG...]
#       boot MACHINE (hmat, cxl or cxl2: see machine_args), run
#       "sh SCRIPT ARG..." in the guest, copy its output here, exit with its
#       status
#
# Every guest has 2 CPUs and 2 GiB. Its root is this machine's root, read-only over 9p under a
# tmpfs overlay, so the build tree and Open MPI run unchanged.
#
# The kernel comes from a Debian linux-image package: NFCOLL_CXL_KERNEL_DEB,
# else CACHE/linux-image-*.deb, else apt's archive cache; with
# NFCOLL_CXL_FETCH=1 it is fetched with apt-get download. busybox must be the
# static one (busybox-static). Exit 77 (automake SKIP) when something is
# missing, with the reason on stdout.
set -eu

NF_SELF=$0
skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }

# Modules for 9p over virtio-pci and overlayfs, then the CXL driver stack
# down to kmem (the persistent-memory path: cxl_pmem, nd_pmem, dax_pmem);
# their dependencies are added in load order from modprobe --show-depends
# (-C /dev/null: the ndctl package's modprobe.d "install" rule for
# libnvdimm would otherwise hide that module from the list).
NF_MODS="virtio_pci 9pnet_virtio 9p overlay cxl_acpi cxl_pci cxl_mem cxl_pmem nd_pmem dax_pmem device_dax kmem"

find_deb() {
    if [ -n "${NFCOLL_CXL_KERNEL_DEB:-}" ]; then
        [ -r "$NFCOLL_CXL_KERNEL_DEB" ] || skip "NFCOLL_CXL_KERNEL_DEB=$NFCOLL_CXL_KERNEL_DEB is not readable"
        echo "$NFCOLL_CXL_KERNEL_DEB"; return
    fi
    for d in "$1"/linux-image-*-amd64_*.deb /var/cache/apt/archives/linux-image-*-amd64_*.deb; do
        case $d in *dbg*|*unsigned*) continue ;; esac
        [ -r "$d" ] && { echo "$d"; return; }
    done
    if [ "${NFCOLL_CXL_FETCH:-0}" = 1 ] && command -v apt-get >/dev/null; then
        pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
              sed -n 's/.*Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -n 1)
        [ -n "$pkg" ] || return 0
        (cd "$1" && apt-get download "$pkg" >&2) || return 0
        for d in "$1"/"$pkg"_*.deb; do [ -r "$d" ] && { echo "$d"; return; }; done
    fi
}

write_init() {
    cat >"$1" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules.list); do insmod /mods/$m.ko || echo "nfcxl: insmod $m failed"; done
mkdir -p /lower /rw /root
if ! mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 hostroot /lower; then
    echo "NFCXL-BEGIN"; echo "nfcxl: cannot mount the host root over 9p"; echo "NFCXL-RC=98"; poweroff -f
fi
mount -t tmpfs -o size=768m tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work /root
for d in proc sys dev; do mount --move /$d /root/$d; done
mkdir -p /root/dev/shm && mount -t tmpfs tmpfs /root/dev/shm
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
hostname nfcxl
cmd=$(sed -n 's/.*nfcxl.cmd=\([^ ]*\).*/\1/p' /root/proc/cmdline)
echo "NFCXL-BEGIN"
chroot /root /bin/sh -c "cd /tmp && exec /bin/sh $(echo "$cmd" | tr ',' ' ')" 2>&1
echo "NFCXL-RC=$?"
poweroff -f
INIT
    chmod +x "$1"
}

prepare() {
    cache=$1
    # Rebuilt when this script (which writes /init) changes.
    stamp=$(cksum <"$NF_SELF" | cut -d' ' -f1)
    [ -s "$cache/vmlinuz" ] && [ -s "$cache/initrd.gz" ] &&
        [ "$(cat "$cache/stamp" 2>/dev/null)" = "$stamp" ] && return 0
    for t in cpio gzip depmod modprobe dpkg-deb; do
        command -v $t >/dev/null || skip "$t not found (Debian: apt-get install cpio kmod dpkg)"
    done
    bb=$(command -v busybox || true)
    [ -n "$bb" ] || skip "busybox not found (Debian: apt-get install busybox-static)"
    ldd "$bb" >/dev/null 2>&1 && skip "$bb is dynamically linked (Debian: apt-get install busybox-static)"
    mkdir -p "$cache"
    deb=$(find_deb "$cache") || { rc=$?; echo "$deb"; exit "$rc"; } # a SKIP says why
    [ -n "$deb" ] || skip "no Debian kernel package (apt-get download linux-image-6.1.0-NN-amd64 into $cache, or set NFCOLL_CXL_KERNEL_DEB)"
    work="$cache/kroot.$$"
    rm -rf "$work"; mkdir -p "$work"
    dpkg-deb -x "$deb" "$work/pkg"
    kver=$(ls "$work/pkg/lib/modules" | head -n 1)
    depmod -b "$work/pkg" "$kver"
    mkdir -p "$work/init/bin" "$work/init/mods" "$work/init/proc" "$work/init/sys" "$work/init/dev"
    cp "$bb" "$work/init/bin/busybox"
    : >"$work/init/modules.list"
    for top in $NF_MODS; do
        modprobe -C /dev/null -d "$work/pkg" -S "$kver" --show-depends "$top" >"$work/deps" ||
            die "module $top is not in $deb"
        while read -r verb ko rest; do
            [ "$verb" = insmod ] || continue # builtin
            m=$(basename "$ko" .ko)
            grep -qx "$m" "$work/init/modules.list" && continue
            cp "$ko" "$work/init/mods/"
            echo "$m" >>"$work/init/modules.list"
        done <"$work/deps"
    done
    write_init "$work/init/init"
    (cd "$work/init" && find . | cpio -o -H newc --quiet | gzip -1) >"$cache/initrd.gz.tmp"
    cp "$work/pkg/boot/vmlinuz-$kver" "$cache/vmlinuz"
    mv "$cache/initrd.gz.tmp" "$cache/initrd.gz"
    echo "$deb" >"$cache/kernel-from"
    echo "$stamp" >"$cache/stamp"
    rm -rf "$work"
}

# QEMU's machine options for MACHINE (on stdout, one word per line):
#  hmat  2 CPUs on node 0 (1 GiB); node 1 = 1 GiB CPU-less, HMAT latency
#        100/250 and bandwidth 200G/60G from the CPUs: the stand-in for CXL
#        memory that NUMA attributes describe, and no CXL device.
#  cxl   the same two nodes plus a CXL type-3 memory device (512 MiB) behind
#        a CXL host bridge; onlined in the guest (tests/cxl/cxl-online.sh) it
#        becomes node 2, and node 1 is then CPU-less memory that is not CXL.
#  cxl2  two CPU nodes (CPU 0 on node 0, CPU 1 on node 1, 1 GiB each) and
#        the CXL device's host bridge on node 1: the device's memory is
#        node 2, nearest to CPU 1.
# QEMU 7.2 and kernel 6.1 traps, each seen here: the host bridge needs a
# second, empty root port (with one, kernel 6.1 leaves the bridge in
# pass-through while QEMU still decodes through it: every write to the
# device is lost and every setup step reports success); the 9p device must
# sit on pcie.0; the device's size is a multiple of 256 MiB. Only the
# persistent-memory path exists on these versions (volatile regions need
# QEMU 8 and kernel 6.3).
machine_args() {
    cxl_dev="-object memory-backend-file,id=cxlm,share=on,mem-path=$2/cxl-mem.raw,size=512M
        -object memory-backend-file,id=cxll,share=on,mem-path=$2/cxl-lsa.raw,size=1M
        -device cxl-rp,port=0,bus=cxl.1,id=rp0,chassis=0,slot=2
        -device cxl-rp,port=1,bus=cxl.1,id=rp1,chassis=0,slot=3
        -device cxl-type3,bus=rp0,memdev=cxlm,lsa=cxll,id=cxl-pmem0
        -M cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G"
    hmat_nodes="-numa node,nodeid=0,memdev=m0,cpus=0-1,initiator=0
        -numa node,nodeid=1,memdev=m1,initiator=0
        -numa hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-latency,latency=100
        -numa hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-bandwidth,bandwidth=200G
        -numa hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-latency,latency=250
        -numa hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-bandwidth,bandwidth=60G"
    case $1 in
    hmat) echo "-machine q35,hmat=on $hmat_nodes" ;;
    cxl) echo "-machine q35,cxl=on,hmat=on $hmat_nodes
        -device pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1 $cxl_dev" ;;
    cxl2) echo "-machine q35,cxl=on
        -numa node,nodeid=0,memdev=m0,cpus=0 -numa node,nodeid=1,memdev=m1,cpus=1
        -device pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1,numa_node=1 $cxl_dev" ;;
    *) die "unknown machine '$1' (hmat, cxl or cxl2)" ;;
    esac
}

run() {
    cache=$1 machine=$2; shift 2
    qemu=${QEMU:-qemu-system-x86_64}
    command -v "$qemu" >/dev/null || skip "$qemu not found (Debian: apt-get install qemu-system-x86)"
    prepare "$cache"
    margs=$(machine_args "$machine" "$cache") || { echo "$margs"; exit 1; }
    case $machine in cxl*)
        for t in cxl ndctl daxctl; do # the guest onlines the device with them
            command -v $t >/dev/null || skip "$t not found (Debian: apt-get install ndctl daxctl)"
        done ;;
    esac
    script=$(cd "$(dirname "$1")" && pwd)/$(basename "$1"); shift
    cmd=$script
    for a in "$@"; do
        case $a in *[!A-Za-z0-9_./=:+-]*) die "guest argument '$a' has characters the kernel command line cannot carry" ;; esac
        cmd="$cmd,$a"
    done
    log="$cache/console-$machine.log"
    rm -f "$cache/cxl-mem.raw" "$cache/cxl-lsa.raw" # a fresh device every boot
    # shellcheck disable=SC2086 # margs is a list of words
    timeout "${NFCOLL_CXL_TIMEOUT:-900}" "$qemu" -accel tcg,thread=multi -cpu max -smp 2 -m 2G \
        -nographic -no-reboot -nic none \
        -object memory-backend-ram,size=1G,id=m0 \
        -object memory-backend-ram,size=1G,id=m1 \
        $margs \
        -fsdev local,id=r,path=/,security_model=none,readonly=on,multidevs=remap \
        -device virtio-9p-pci,fsdev=r,mount_tag=hostroot,bus=pcie.0 \
        -kernel "$cache/vmlinuz" -initrd "$cache/initrd.gz" \
        -append "console=ttyS0 quiet panic=-1 nfcxl.cmd=$cmd" </dev/null >"$log" 2>&1 || true
    rm -f "$cache/cxl-mem.raw" "$cache/cxl-lsa.raw"
    tr -d '\r' <"$log" | sed -n '/NFCXL-BEGIN$/,/^NFCXL-RC=/p' | sed '1d;/^NFCXL-RC=/d'
    rc=$(tr -d '\r' <"$log" | sed -n 's/^NFCXL-RC=\([0-9]*\)$/\1/p' | tail -n 1)
    [ -n "$rc" ] || { echo "FAIL: the guest did not finish; console in $log:"; tail -n 30 "$log"; exit 99; }
    exit "$rc"
}

case ${1:-} in
prepare) [ $# -eq 2 ] || die "usage: $0 prepare CACHE"; prepare "$2" ;;
run) [ $# -ge 4 ] || die "usage: $0 run CACHE MACHINE SCRIPT [ARG...]"; shift; run "$@" ;;
*) die "usage: $0 prepare CACHE | run CACHE MACHINE SCRIPT [ARG...]" ;;
esac
