# SPDX-License-Identifier: BSD-3-Clause
# Pretend hosts in network namespaces, joined by a bridge, for Open MPI over
# TCP between them. Sourced (POSIX sh) by bench/multihost.sh,
# bench/overlap.sh, bench/predict.sh and tests/mpi_netns.sh. Needs root and
# iproute2 (tc from iproute2 for -b).
#
#   nf_hosts_up N [RATE]   N namespaces (hosts 1..N at $NF_NET.1..N), each
#                          veth end shaped to RATE (tc tbf, e.g. 1gbit) when
#                          given; returns non-zero, saying why, when it cannot
#   nf_hosts_list S1 S2 ...  "$NF_NET.1:S1,$NF_NET.2:S2,..." for --host
#   nf_hosts_mpirun HOSTLIST NP [MPIRUN ARGS]... PROG [ARGS]
#   nf_hosts_down          removes everything nf_hosts_up made
#
# Addresses are 10.77.X.0/24 inside namespaces this shell created, X from
# the shell's pid or the next that no interface here has (a setup left
# behind by a killed run on the same X took the OOB's and TCP's routes: Open
# MPI hung there for minutes); nothing leaves the machine. On 2 cores,
# busy-polling ranks starve the softirq that moves veth packets, hence
# mpi_yield_when_idle in nf_hosts_mpirun.
nf_id=$$
NF_NET=10.77.$((nf_id % 250 + 1))
nf_br=nfbr$nf_id
nf_tmp=""
nf_nhosts=0

nf_ns() { echo "nfh${nf_id}h$1"; }

# The first 10.77.X from this shell's that no interface here uses.
nf_free_net() {
  i=0
  while [ "$i" -lt 250 ]; do
    x=$(((nf_id + i) % 250 + 1))
    ip -4 -o addr show | grep -q " 10\.77\.$x\." || { echo "10.77.$x"; return 0; }
    i=$((i + 1))
  done
  return 1
}

nf_hosts_down() {
  h=1
  while [ "$h" -le "$nf_nhosts" ]; do
    ip netns del "$(nf_ns "$h")" 2>/dev/null
    h=$((h + 1))
  done
  ip link del "$nf_br" 2>/dev/null
  [ -n "$nf_tmp" ] && rm -rf "$nf_tmp"
  nf_nhosts=0
}

# The token bucket: 128 KB shapes a call of a few hundred KB (4 MB let a
# whole 16 MiB binary call through at veth speed and overstated its
# speed-up: 4.2 ms against 7.2 ms at 1 Gbit/s); smaller bursts cannot
# sustain 10 Gbit/s here. NF_NET_BURST overrides it; NF_NET_QUEUE the
# longest a packet waits in the bucket's queue (tbf's latency, 50ms).
nf_shape() { # DEV RATE [netns]
  burst=${NF_NET_BURST:-128kb} queue=${NF_NET_QUEUE:-50ms}
  if [ -n "${3:-}" ]; then
    ip netns exec "$3" tc qdisc replace dev "$1" root tbf rate "$2" burst "$burst" latency "$queue"
  else
    tc qdisc replace dev "$1" root tbf rate "$2" burst "$burst" latency "$queue"
  fi
}

nf_hosts_up() {
  n=$1; rate=${2:-}
  NF_NET=$(nf_free_net) || { echo "every 10.77.X.0/24 is in use here (ip -4 addr)"; return 1; }
  nf_tmp=$(mktemp -d) || return 1
  ip link add "$nf_br" type bridge 2>/dev/null || { echo "cannot create a bridge (no CAP_NET_ADMIN?)"; return 1; }
  ip addr add "$NF_NET.254/24" dev "$nf_br" && ip link set "$nf_br" up || { echo "cannot configure the bridge"; return 1; }
  h=1
  while [ "$h" -le "$n" ]; do
    ns=$(nf_ns "$h"); v=nfv${nf_id}h$h
    ip netns add "$ns" || { echo "ip netns add failed"; return 1; }
    nf_nhosts=$h
    ip link add "$v" type veth peer name eth0 netns "$ns" &&
      ip link set "$v" master "$nf_br" up &&
      ip netns exec "$ns" ip addr add "$NF_NET.$h/24" dev eth0 &&
      ip netns exec "$ns" ip link set eth0 up &&
      ip netns exec "$ns" ip link set lo up || { echo "cannot wire namespace $ns"; return 1; }
    if [ -n "$rate" ]; then
      nf_shape "$v" "$rate" && nf_shape eth0 "$rate" "$ns" || { echo "tc cannot shape $v to $rate"; return 1; }
    fi
    h=$((h + 1))
  done
  # Each host its own share of the CPUs this shell may use, as real hosts
  # have: host h gets the h-th of N equal slices of them (of C CPUs, one each,
  # round robin, when N > C). Without it every host's mpirun daemon binds its
  # first rank to core 0, and all ranks share one core while the others idle.
  cpus=$(awk '/^Cpus_allowed_list/ {
      n = split($2, r, ",")
      for (i = 1; i <= n; i++) {
        if (split(r[i], ab, "-") == 2) { for (c = ab[1]; c <= ab[2]; c++) printf "%d ", c }
        else printf "%d ", r[i]
      } }' /proc/self/status)
  set -- $cpus
  c=$#
  [ "$c" -gt 0 ] || { echo "cannot read this process's CPUs"; return 1; }
  h=1; slices=""
  while [ "$h" -le "$n" ]; do
    if [ "$n" -le "$c" ]; then lo=$(( (h - 1) * c / n )); hi=$(( h * c / n - 1 ))
    else lo=$(( (h - 1) % c )); hi=$lo; fi
    l=""; k=0
    for cpu in $cpus; do
      [ $k -ge $lo ] && [ $k -le $hi ] && l="$l${l:+,}$cpu"
      k=$((k + 1))
    done
    slices="$slices  $h) cpus=$l ;;
"
    h=$((h + 1))
  done
  cat > "$nf_tmp/nsrsh" <<AGENT
#!/bin/sh
h=\$1; shift
i=\${h##*.}
ns=nfh${nf_id}h\$i
case \$i in
$slices  *) exit 1 ;;
esac
exec taskset -c \$cpus ip netns exec \$ns unshare --uts /bin/sh -c "hostname \$ns; \$*"
AGENT
  chmod +x "$nf_tmp/nsrsh"
}

nf_hosts_list() {
  l=""; h=1
  for s in "$@"; do
    l="$l${l:+,}$NF_NET.$h:$s"
    h=$((h + 1))
  done
  echo "$l"
}

nf_hosts_mpirun() {
  hl=$1; np=$2; shift 2
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_orte_tmpdir_base="$nf_tmp" \
    timeout -k 10 "${NF_HOSTS_TIMEOUT:-600}" mpirun --mca plm_rsh_agent "$nf_tmp/nsrsh" \
    --mca btl tcp,self,vader --mca btl_tcp_if_include "$NF_NET.0/24" \
    --mca oob_tcp_if_include "$NF_NET.0/24" --mca mpi_yield_when_idle 1 --bind-to none \
    -x ASAN_OPTIONS=detect_leaks=0 --host "$hl" -np "$np" "$@"
}
