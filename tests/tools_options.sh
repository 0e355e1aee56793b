#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Every installed program's command line (issue 59, item 5), from a table:
# -h/--help (usage on stdout, exit 0), -V/-v/--version (exit 0: "PROG
# (libnfcoll) VERSION", then "built with" the MPI family configure found),
# a bad option or argument (exit 2, nothing on stdout, the usage on
# stderr); each long option --help names is in the program's man page
# (section 1, listed for installation); the benchmarks' OSU long options
# (--message-size, --iterations, --warmup, --validation) and their short
# letters take effect on 1 rank; plain nfcoll_info times nothing.
# The programs are make's bin_PROGRAMS and the pages its dist_man_MANS
# (NF_BIN_PROGRAMS, NF_MAN_PAGES: tests/tools.am); run by hand from the
# build directory, the list below.
srcdir=${srcdir:-.}
. "$srcdir/tests/mpi_common.sh"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
failed=0 n=0
ok() { n=$((n + 1)); }
fail() { echo "FAIL - $*"; failed=1; }

progs=${NF_BIN_PROGRAMS:-tools/nfcoll_info tools/nfcoll_policy tools/nfcoll_replay \
bench/nfcoll_allreduce bench/nfcoll_overlap}
progs=$(for p in $progs; do echo "${p%.exe}"; done)
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' config.h 2>/dev/null)
[ -n "$version" ] || { echo "FAIL - no PACKAGE_VERSION in ./config.h (run from the build directory)"; exit 99; }
case $NF_MPI_FAMILY in
  openmpi) mpi="Open MPI" ;;
  mpich) mpi="MPICH" ;;
  *) mpi="" ;;
esac
policy=$(cd "$srcdir/tests/policy" && pwd)/model.policy

# The table. PROGRAM * is every installed program; EXPECT: help (exit 0,
# stdout starts "Usage:" naming the program, stderr empty), version (exit
# 0, the two lines above, stderr empty), usage (exit 2, stdout empty,
# stderr has the usage); ARGUMENTS "-" for none, POLICY a policy file.
table() {
  cat <<'EOF'
# PROGRAM               EXPECT   ARGUMENTS
*                       help     -h
*                       help     --help
*                       version  -V
*                       version  --version
*                       version  -v
*                       usage    --no-such-option
*                       usage    -Q
tools/nfcoll_info       usage    an-extra-argument
tools/nfcoll_info       usage    --checkpoint
tools/nfcoll_policy     usage    -
tools/nfcoll_policy     usage    frobnicate
tools/nfcoll_policy     help     check --help
tools/nfcoll_policy     usage    check
tools/nfcoll_policy     usage    check --no-such-option
tools/nfcoll_policy     version  explain --version
tools/nfcoll_policy     usage    explain POLICY --no-such-option
tools/nfcoll_replay     usage    -
tools/nfcoll_replay     usage    --policy POLICY
bench/nfcoll_allreduce  usage    -s 4K,8K
bench/nfcoll_allreduce  usage    --iterations 0
bench/nfcoll_allreduce  usage    --message-size 6,8
bench/nfcoll_allreduce  usage    --routes nonesuch
bench/nfcoll_allreduce  usage    an-extra-argument
bench/nfcoll_overlap    usage    --warmup=-1
bench/nfcoll_overlap    usage    -m 8:4
bench/nfcoll_overlap    usage    -r mpi,nonesuch
bench/nfcoll_overlap    usage    an-extra-argument
EOF
}

# expect PROG WHAT ARGS...: run PROG (no launcher) and check WHAT.
expect() {
  p=$1 what=$2 name=$(basename "$1"); shift 2
  "./$p" "$@" > "$tmp/out" 2> "$tmp/err" < /dev/null
  rc=$?
  case $what in
    help)
      if [ $rc -ne 0 ] || ! head -1 "$tmp/out" | grep -q "^Usage: .*$name" || [ -s "$tmp/err" ]; then
        fail "$name $*: exit $rc, want 0, usage on stdout, nothing on stderr"; cat "$tmp/out" "$tmp/err"; return
      fi ;;
    version)
      l1=$(sed -n 1p "$tmp/out") l2=$(sed -n 2p "$tmp/out")
      if [ $rc -ne 0 ] || [ "$l1" != "$name (libnfcoll) $version" ] ||
         ! printf '%s\n' "$l2" | grep -qF "built with $mpi" || [ -s "$tmp/err" ]; then
        fail "$name $*: exit $rc, want 0, '$name (libnfcoll) $version' and 'built with $mpi...'"
        cat "$tmp/out" "$tmp/err"; return
      fi ;;
    usage)
      if [ $rc -ne 2 ] || [ -s "$tmp/out" ] || ! grep -q "^Usage: .*$name" "$tmp/err"; then
        fail "$name $*: exit $rc, want 2, nothing on stdout, usage on stderr"; cat "$tmp/out" "$tmp/err"; return
      fi ;;
  esac
  ok
}

for p in $progs; do
  [ -x "./$p" ] || { fail "$p: not built (run from the build directory after make)"; continue; }
done
[ $failed = 0 ] || exit 1
table | grep -v '^#' | sed "s|POLICY|$policy|g" > "$tmp/table"
all=" $(echo $progs) "
while read -r who what args; do # a row for a program that is not installed
  case $who in '*') ;; *) case $all in *" $who "*) ;; *) fail "table row for $who: not installed" ;; esac ;; esac
done < "$tmp/table"
for p in $progs; do
  while read -r who what args; do
    [ "$who" = '*' ] || [ "$who" = "$p" ] || continue
    [ "$args" = - ] && args=
    # shellcheck disable=SC2086 # the arguments are words
    expect "$p" "$what" $args
  done < "$tmp/table"
done

# Each program's man page is installed, and names every long option its
# --help names.
for p in $progs; do
  name=$(basename "$p") page=$srcdir/man/$(basename "$p").1
  if [ ! -f "$page" ]; then fail "$name: no man page man/$name.1"; continue; fi
  if [ -n "${NF_MAN_PAGES:-}" ] && ! echo " $NF_MAN_PAGES " | grep -q " man/$name.1 "; then
    fail "$name: man/$name.1 is not in dist_man_MANS (not installed)"
  fi
  "./$p" --help | grep -o -- '--[a-z][a-z-]*' | sort -u > "$tmp/longs"
  [ -s "$tmp/longs" ] || fail "$name --help names no long option"
  while read -r o; do
    if grep -qF -- "$(echo "$o" | sed 's/-/\\-/g')" "$page"; then ok
    else fail "$name: --help names $o, man/$name.1 does not"; fi
  done < "$tmp/longs"
done

# nfcoll_info alone: the build, settings and topology, nothing timed.
if echo "$progs" | grep -q nfcoll_info; then
  ./tools/nfcoll_info > "$tmp/info" 2>&1; rc=$?
  if [ $rc = 0 ] && grep -q '^Build configuration:' "$tmp/info" && grep -q '^Settings' "$tmp/info" &&
     grep -q '^NUMA nodes' "$tmp/info" && grep -q 'kernel choice .*not timed' "$tmp/info" &&
     ! grep -q '^  codec rate \|timed in [0-9]' "$tmp/info"; then ok
  else fail "nfcoll_info (no option): exit $rc, want the sections with nothing timed:"; cat "$tmp/info"; fi
  ./tools/nfcoll_info --json > "$tmp/info.json" 2>&1; rc=$?
  if [ $rc = 0 ] && grep -q '"settings"' "$tmp/info.json" && grep -q '"numa_nodes"' "$tmp/info.json" &&
     ! grep -q '"kernels"\|"codec"' "$tmp/info.json"; then ok
  else fail "nfcoll_info --json: exit $rc, want settings and nodes, no kernels or codec:"; cat "$tmp/info.json"; fi
fi

# The benchmarks on 1 rank, each option's effect seen in the output.
# bench CASE PROG WANT... -- ARGS: exit 0, each grep WANT found.
bench() {
  c=$1 p=$2; shift 2
  wants=
  while [ "$1" != -- ]; do wants="$wants$1
"; shift; done
  shift
  sh "$srcdir/tests/mpi_run.sh" 1 "./$p" "$@" > "$tmp/run" 2>&1; rc=$?
  [ $rc = 77 ] && { echo "skip - $c: $(tail -1 "$tmp/run")"; return; }
  if [ $rc != 0 ]; then fail "$c: exit $rc"; cat "$tmp/run"; return; fi
  echo "$wants" | while IFS= read -r w; do
    [ -z "$w" ] || grep -q -- "$w" "$tmp/run" || echo "FAIL - $c: no '$w' in the output"
  done > "$tmp/miss"
  if [ -s "$tmp/miss" ]; then cat "$tmp/miss" "$tmp/run"; failed=1; else ok; fi
}
# A row: size, then the latencies, then the iterations.
row() { echo "^$1  *[0-9.]*  *[0-9.]*  *[0-9.]*  *$2\$"; }
if [ "$MPIEXEC" = no ] || ! command -v "$MPIEXEC" >/dev/null 2>&1; then
  echo "skip - the benchmarks' runs: no MPI launcher ('$MPIEXEC')"
else
  if echo "$progs" | grep -q nfcoll_allreduce; then
    bench "nfcoll_allreduce, OSU's long options" bench/nfcoll_allreduce \
      '^# Route: fp32$' "$(row 8 3)" "$(row 16 3)" -- \
      --routes fp32 --message-size 8:16 --iterations 3 --warmup 1 --validation
    bench "nfcoll_allreduce, short options and a size list" bench/nfcoll_allreduce \
      '^# Route: binary$' "$(row 12 2)" "$(row 20 2)" -- -r binary -m 12,20 -i 2 -x 0 -c -R 2
    grep -q '^\(4\|24\|32\) ' "$tmp/run" && fail "nfcoll_allreduce -m 12,20 ran other sizes" && cat "$tmp/run"
    grep -q '^# Route: \(pmpi\|fp32\)' "$tmp/run" && fail "nfcoll_allreduce -r binary ran other routes"
  fi
  if echo "$progs" | grep -q nfcoll_overlap; then
    bench "nfcoll_overlap, OSU's long options" bench/nfcoll_overlap \
      ' 3 iterations (+1 warm-up), median of 1 repeats' '^  fp32  *4096 ' '^  fp32  *8192 ' -- \
      --routes=fp32 --message-size=4K,8K --iterations=3 --warmup=1 --validation
    grep -q ' 16384 \| 2048 ' "$tmp/run" && fail "nfcoll_overlap --message-size=4K,8K ran other sizes"
    bench "nfcoll_overlap, short options" bench/nfcoll_overlap \
      ' 2 iterations (+0 warm-up), median of 3 repeats' '^  mpi  *1024 ' '^  mpi  *2048 ' -- \
      -r mpi -m 1K:2K -i 2 -x 0 -R 3 -c -s
  fi
fi

[ $failed = 0 ] && echo "ok - $n checks of $(echo $progs | wc -w) installed programs' options and exit statuses"
exit $failed
