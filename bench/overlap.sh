#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# overlap: nonblocking allreduce against computation (issue 16), one node
# and across pretend hosts: bench/nfcoll_overlap (osu_iallreduce's columns for
# MPI's own Iallreduce and libnfcoll's routes), OSU's own osu_iallreduce
# plain and preloaded with a float-sum binary policy when given, and the
# DDP step times of bench/ddp_step.py.
#
#   bench/overlap.sh [-H HOSTS] [-b RATE] [-m SIZES] [-i ITERS] [-R REPEATS]
#                    [-o OSU_IALLREDUCE] [-s] [-d] [-D DDP_ARGS] [BUILDDIR]
#
#   -H HOSTS   0: one node, 2 ranks (default); N: N pretend hosts x 1 rank
#              (network namespaces; needs root, iproute2 and tc)
#   -b RATE    link rate across hosts, tc syntax (default 1gbit)
#   -m SIZES   nfcoll_overlap -m (default 16M:16M)
#   -i ITERS   iterations per size (default 10); -R repeats, median (default 3)
#   -o PATH    an osu_iallreduce built outside this tree (OSU 7.4: configure
#              CC=mpicc CXX=mpicxx); run with -T mpi_float at the largest size,
#              plain and preloaded with bench/float_binary.policy
#   -s         nfcoll_overlap once more with a compute phase that sleeps (the
#              core left to the progress engine)
#   -d         also bench/ddp_step.py (python3 with torch and mpi4py)
#   -D ARGS    its arguments (default "--routes binary,fp32 --repeats 5")
# Timing is only meaningful on an otherwise idle machine; on 2 cores the
# progress thread shares a core with its rank's computation.
set -u
hosts=0 rate=1gbit sizes=16M:16M iters=10 reps=3 osu="" ddp=0 sleep=0
ddp_args="--routes binary,fp32 --repeats 5"
while getopts H:b:m:i:R:o:sdD:h o; do
  case $o in
    H) hosts=$OPTARG ;; b) rate=$OPTARG ;; m) sizes=$OPTARG ;; i) iters=$OPTARG ;;
    R) reps=$OPTARG ;; o) osu=$OPTARG ;; s) sleep=1 ;; d) ddp=1 ;; D) ddp_args=$OPTARG ;;
    *) sed -n '3,/^# Timing/p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
b=$(cd "${1:-.}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
bench=$b/bench/nfcoll_overlap lib=$b/lib/.libs/libnfcoll.so pol=$src/bench/float_binary.policy
[ -x "$bench" ] || { echo "overlap: no $bench (give the build directory)"; exit 2; }
[ -z "$osu" ] || [ -x "$osu" ] || { echo "overlap: no osu_iallreduce at $osu"; exit 2; }
max=${sizes#*:}
case $max in # OSU's -m takes bytes
  *[kK]) max=$((${max%?} * 1024)) ;; *[mM]) max=$((${max%?} * 1048576)) ;;
esac

if [ "$hosts" -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "overlap: network namespaces need root"; exit 2; }
  . "$src/bench/netns.sh"
  trap nf_hosts_down EXIT INT TERM
  nf_hosts_up "$hosts" "$rate" || { echo "overlap: cannot set up the hosts"; exit 1; }
  slots=""; h=0
  while [ $h -lt "$hosts" ]; do slots="$slots 1"; h=$((h + 1)); done
  hl=$(nf_hosts_list $slots)
  np=$hosts where="$hosts pretend hosts x 1 rank, links $rate"
  launch() { nf_hosts_mpirun "$hl" "$np" -x MASTER_ADDR="$NF_NET.1" -x GLOO_SOCKET_IFNAME=eth0 "$@"; }
else
  np=2 where="one node, 2 ranks"
  launch() {
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -k 10 1800 \
      mpirun --mca mpi_yield_when_idle 1 -np "$np" "$@"
  }
fi

echo "== $where: $bench -r mpi,fp32,binary -m $sizes -i $iters -x 2 -R $reps"
launch "$bench" -r mpi,fp32,binary -m "$sizes" -i "$iters" -x 2 -R "$reps"
if [ $sleep = 1 ]; then
  echo "== $where: $bench -r mpi,fp32,binary -m $sizes -i $iters -x 2 -R $reps -s (compute sleeps)"
  launch "$bench" -r mpi,fp32,binary -m "$sizes" -i "$iters" -x 2 -R "$reps" -s
fi
if [ -n "$osu" ]; then
  for how in plain preloaded; do
    echo "== $where: osu_iallreduce -T mpi_float -m $max:$max -i $iters -x 2, $how"
    set -- "$osu" -T mpi_float -m "$max:$max" -i "$iters" -x 2
    [ $how = preloaded ] && set -- -x LD_PRELOAD="$lib" -x NFCOLL_POLICY="$pol" "$@"
    launch "$@"
  done
fi
if [ $ddp = 1 ]; then
  echo "== $where: bench/ddp_step.py $ddp_args"
  # shellcheck disable=SC2086 # word splitting of the arguments is intended
  launch -x PYTHONPATH="$src/python" -x NFCOLL_LIBRARY="$lib" /usr/bin/python3 \
    "$src/bench/ddp_step.py" $ddp_args
fi
