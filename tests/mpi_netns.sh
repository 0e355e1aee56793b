#!/bin/sh
# Real multi-node runs: two pretend hosts in network namespaces, joined by
# a bridge, with Open MPI over TCP between them (an rsh agent enters each
# namespace with its own hostname). MPI_COMM_TYPE_SHARED then splits the
# ranks by host, so node leaders exchange counts and sums across a real
# transport. Needs root and iproute2; SKIPs, saying why, otherwise.
. "${srcdir:-.}/tests/mpi_common.sh"
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
command -v ip >/dev/null 2>&1 || skip "no ip command (Debian: apt-get install iproute2)"
command -v unshare >/dev/null 2>&1 || skip "no unshare (util-linux)"

id=$$; net=10.77.$((id % 250 + 1))
br=nfbr$id; ns1=nfh${id}a; ns2=nfh${id}b
tmp=$(mktemp -d) || exit 99
cleanup() {
  ip netns del "$ns1" 2>/dev/null; ip netns del "$ns2" 2>/dev/null
  ip link del "$br" 2>/dev/null; rm -rf "$tmp"
}
trap cleanup EXIT
ip link add "$br" type bridge 2>/dev/null || skip "cannot create a bridge here (no CAP_NET_ADMIN?)"
ip addr add "$net.254/24" dev "$br" && ip link set "$br" up || skip "cannot configure the bridge"
for h in 1 2; do
  ns=$ns1; [ $h = 2 ] && ns=$ns2
  ip netns add "$ns" || skip "ip netns add failed"
  ip link add "nfv$id$h" type veth peer name eth0 netns "$ns" &&
  ip link set "nfv$id$h" master "$br" up &&
  ip netns exec "$ns" ip addr add "$net.$h/24" dev eth0 &&
  ip netns exec "$ns" ip link set eth0 up &&
  ip netns exec "$ns" ip link set lo up || skip "cannot wire namespace $ns"
done
cat > "$tmp/nsrsh" <<AGENT
#!/bin/sh
h=\$1; shift
case \${h##*.} in 1) ns=$ns1 ;; *) ns=$ns2 ;; esac
exec ip netns exec \$ns unshare --uts /bin/sh -c "hostname \$ns; \$*"
AGENT
chmod +x "$tmp/nsrsh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_orte_tmpdir_base="$tmp"
hosts() { # hosts SLOTS1 SLOTS2 NP [MPIRUN ARGS]... PROG ARGS
  s1=$1; s2=$2; np=$3; shift 3
  timeout -k 10 300 mpirun --mca plm_rsh_agent "$tmp/nsrsh" --mca btl tcp,self,vader \
    --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include "$net.0/24" \
    -x ASAN_OPTIONS=detect_leaks=0 --host "$net.1:$s1,$net.2:$s2" -np "$np" "$@"
}
# The launch itself must work before any result can mean something.
names=$(hosts 1 1 2 hostname 2>&1 | sort -u | tr '\n' ' ')
[ "$names" = "$ns1 $ns2 " ] || skip "mpirun cannot launch across the namespaces here: $names"

prog=$PWD/tests/mpi
check() {
  echo "+ $*"
  hosts "$@" > "$tmp/out" 2>&1; rc=$?
  grep -E '^(PASS|FAIL)' "$tmp/out"
  [ $rc = 0 ] || { echo "FAILED (exit $rc): $*"; cat "$tmp/out"; nf_failed=1; }
}
check 2 2 4 "$prog/test_routes" -c 1 -c 513 -c 300007                 # 2 + 2, ranks by host
check 2 2 4 --map-by node "$prog/test_routes" -c 7 -c 513 -c 300007    # 0,2 | 1,3
check 2 1 3 --map-by node -x NFCOLL_EF=off "$prog/test_routes" -c 513 -c 70001
check 2 1 3 --map-by node "$prog/test_misc"
finish
