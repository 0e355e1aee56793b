# SPDX-License-Identifier: BSD-3-Clause
# Same-run ratios from nfcoll_allreduce output (bench/multihost.sh,
# bench/protocol.sh). Reads "# Route: NAME [algorithm N]" headers and
# "SIZE AVG ..." rows; prints, per size, each route's time in ms and the
# ratios pmpi/route and fp32/route (> 1: the route is faster).
# With -v tsv=1: one line per (size, route): size route ms pmpi/route fp32/route.
/^# Route:/ { r = $3; if ($0 ~ /algorithm/) r = r "/alg" $NF }
/^[0-9]/ {
    t[r, $1] = $2
    if (!(r in seen)) { seen[r] = 1; order[++n] = r }
    if (!($1 in sz)) { sz[$1] = 1; sizes[++ns] = $1 }
}
function ratio(a, b) { return ((a, s) in t && (b, s) in t && a != b) ? t[a, s] / t[b, s] : "" }
END {
    for (i = 1; i <= ns; i++) {
        s = sizes[i]
        if (!tsv) printf "%s B:", s
        for (j = 1; j <= n; j++) {
            r = order[j]
            if (!((r, s) in t)) continue
            p = ratio("pmpi", r); f = ratio("fp32", r)
            if (tsv) { printf "%s\t%s\t%.6f\t%s\t%s\n", s, r, t[r, s] / 1000, p, f; continue }
            printf "  %s %.3g ms", r, t[r, s] / 1000
            sep = " ("
            if (p != "") { printf "%spmpi/%s %.2f", sep, r, p; sep = ", " }
            if (f != "") { printf "%sfp32/%s %.2f", sep, r, f; sep = ", " }
            if (sep == ", ") printf ")"
        }
        if (!tsv) printf "\n"
    }
}
