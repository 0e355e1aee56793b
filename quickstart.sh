#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# libnfcoll quickstart for a fresh Debian 12 machine (run as root).
#   ./quickstart.sh          install packages, build, run the 2-rank demo
#   ./quickstart.sh check    install packages, build, run the whole test suite
#                            (make check-full: both tiers, see HACKING)
# Builds in ./build. Set NF_NO_APT=1 to skip the package install.
set -eu
cmd=${1:-demo}
case $cmd in
  demo|check) ;;
  -h|--help) sed -n '3,7p' "$0"; exit 0 ;;
  *) echo "usage: $0 [demo|check]" >&2; exit 2 ;;
esac
top=$(cd "$(dirname "$0")" && pwd)

# Everything the build, the tests, make check-cxl and the Python package
# with its training check (make train-check) need, from Debian. MPICH is
# for the second build CI makes (.ci/run); Open MPI stays the default mpicc.
packages="build-essential autoconf automake libtool pkg-config
  openmpi-bin libopenmpi-dev libmpich-dev mpich libhwloc-dev hwloc libnuma-dev numactl
  check libinih-dev libxxhash-dev iproute2 gfortran
  qemu-system-x86 busybox-static cpio kmod ndctl daxctl
  clang libclang-rt-14-dev
  debhelper dh-python lintian autopkgtest
  python3-torch libopenblas0-serial python3-mpi4py python3-numpy python3-matplotlib dataset-fashion-mnist
  python3-venv python3-wheel python3-setuptools
  wordnet-base"

if [ "${NF_NO_APT:-0}" != 1 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "quickstart: run as root to install packages (or set NF_NO_APT=1)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  # shellcheck disable=SC2086
  apt-get install -y -q --no-install-recommends $packages
fi

cd "$top"
autoreconf -fi
mkdir -p build
cd build
[ -f Makefile ] || ../configure --enable-werror
make -j"$(nproc)"

# Open MPI refuses root without these; make check exports them itself.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Let the emulated-CXL check fetch its Debian kernel package (apt-get download).
export NFCOLL_CXL_FETCH=1
if [ "$cmd" = demo ]; then
  make demo
else
  make -j2 check-full
fi
