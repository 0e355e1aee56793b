#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The Debian packages built from this tree (issue 59, item 2; make deb,
# packaging/debian): they build; lintian finds no error and no warning
# but those about an initial upload; autopkgtest (null runner: on this
# machine) installs them and runs packaging/debian/tests (a program
# relinked with pkg-config, an unmodified one with libnfcoll.so.0
# preloaded under mpirun, the tools, Python); then they are purged and the
# machine's package list is what it was before. Full tier; root.
. "${srcdir:-.}/tests/mpi_common.sh"
for t in dpkg-buildpackage lintian autopkgtest dh_python3; do
  command -v $t >/dev/null 2>&1 ||
    { echo "SKIP: no $t (Debian: debhelper dh-python lintian autopkgtest, quickstart.sh installs them)"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "SKIP: installing the packages needs root"; exit 77; }
pkgs="libnfcoll0 libnfcoll-dev nfcoll-tools python3-nfcoll"
state() { dpkg-query -W -f '${Package} ${Version} ${db:Status-Abbrev}\n' | sort; }
if dpkg-query -W $pkgs >/dev/null 2>&1 && dpkg-query -W -f '${db:Status-Abbrev}' $pkgs | grep -q i; then
  echo "SKIP: a libnfcoll package is installed here already; this test would replace and purge it"
  exit 77
fi
fail=0
before=$(mktemp) after=$(mktemp) log=$(mktemp)
trap 'apt-get purge -y -q $pkgs >/dev/null 2>&1; rm -f "$before" "$after" "$log"' EXIT
state > "$before"
if ! make deb > "$log" 2>&1; then
  echo "FAIL - make deb"; tail -40 "$log"; exit 1
fi
echo "ok - make deb: $(cd deb-build && ls *.deb | tr '\n' ' ')"
changes=$(ls deb-build/*.changes)
# Tags about an initial upload (no bug closed, no watch file for a project
# that has no release site yet) are expected; everything else fails.
if lintian --fail-on error,warning --suppress-tags initial-upload-closes-no-bugs,debian-watch-file-is-missing \
     "$changes" > "$log" 2>&1; then
  echo "ok - lintian: no error or warning (the initial upload's tags suppressed)"
else
  echo "FAIL - lintian"; cat "$log"; fail=1
fi
tree=$(ls -d deb-build/*/debian | sed 's|/debian$||')
# shellcheck disable=SC2046 # the .debs are words
if autopkgtest -B "$tree/" $(ls deb-build/*.deb) -- null > "$log" 2>&1; then
  echo "ok - autopkgtest relink-preload: $(grep -c '^ok' "$log") checks passed on the installed packages"
else
  echo "FAIL - autopkgtest"; tail -60 "$log"; fail=1
fi
apt-get purge -y -q $pkgs > "$log" 2>&1 || { echo "FAIL - purge"; cat "$log"; fail=1; }
state > "$after"
if cmp -s "$before" "$after"; then
  echo "ok - purged: the machine's packages are as before"
else
  echo "FAIL - the package list changed:"; diff "$before" "$after" | head -20; fail=1
fi
exit $fail
