/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Predicted call times under a link (replay_time.h). A call of m elements
 * on route R over p nodes takes, as the library runs it today (one stage
 * after the other, nothing overlapped but the finish of two one-rank
 * nodes' streamed counts and their fp32 sum, which run while the wire
 * carries the rest):
 *
 *   pack_R(m) + reduce_R(m) + finish_R(m) + B/bw + s * lat
 *
 * with the stages' measured rates (nf_codec.h), B the bytes that leave a
 * node and s the exchanges that wait for each other
 * (nf_traffic_internode_call). pmpi is Open MPI's ring: fp32's reduce stage and
 * 2 (P-1)/P of the call each way. docs/design.md, "Predicting a call's
 * time", says what this leaves out.
 */
#include "config.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nf_route.h"
#include "nf_traffic.h"
#include "replay_time.h"
#include "trace_calls.h"

/* ---- the link ---- */

typedef struct rt_unit {
    const char *unit;
    double mult;
} rt_unit_t;

/* One field of --link: a decimal number and a unit of units[], ended by
 * ',' and another field, or by the end. Returns the value in the units'
 * base; -1 when malformed, -2 for a comma with nothing after it. */
static double rt_field(const char **s, const rt_unit_t *units, size_t nunits)
{
    char *end;
    if (!isdigit((unsigned char)**s) && **s != '.')
        return -1.0; /* no sign, space, or empty field */
    double v = strtod(*s, &end);
    if (end == *s || !(v >= 0.0) || v > 1e18 || memchr(*s, 'x', (size_t)(end - *s)) != NULL ||
        memchr(*s, 'X', (size_t)(end - *s)) != NULL) /* decimal only */
        return -1.0;
    size_t n = 0;
    while (isalpha((unsigned char)end[n]))
        n++;
    if (end[n] != '\0' && end[n] != ',')
        return -1.0;
    for (size_t i = 0; i < nunits; i++)
        if (n == strlen(units[i].unit) && strncasecmp(end, units[i].unit, n) == 0) {
            if (end[n] == ',' && end[n + 1] == '\0')
                return -2.0; /* a comma and nothing after it */
            *s = end + n + (end[n] == ',');
            return v * units[i].mult;
        }
    return -1.0;
}

int replay_link_parse(const char *spec, replay_link_t *l, char *err, size_t errlen)
{
    static const rt_unit_t rates[] = {
        {"bit", 0.125}, {"kbit", 125.0}, {"mbit", 125e3}, {"gbit", 125e6}, {"tbit", 125e9},
        {"bps", 1.0},   {"kbps", 1e3},   {"mbps", 1e6},   {"gbps", 1e9},   {"tbps", 1e12}};
    static const rt_unit_t times[] = {{"", 1.0}, {"s", 1.0}, {"ms", 1e-3}, {"us", 1e-6}};
    static const rt_unit_t sizes[] = {{"", 1.0},         {"b", 1.0}, {"kb", 1024.0},
                                      {"k", 1024.0},     {"mb", 1048576.0},
                                      {"m", 1048576.0}};
    static const struct {
        const rt_unit_t *units;
        size_t n;
        const char *what;
    } field[] = {
        {rates, sizeof(rates) / sizeof(rates[0]),
         "the rate must be a number of at least 1bit with a unit: bit, kbit, mbit, gbit, "
         "tbit per second; bps, kbps, mbps, gbps, tbps: bytes per second (e.g. 1gbit, "
         "125mbps)"},
        {times, sizeof(times) / sizeof(times[0]), "the latency must be a number of s, ms or us"},
        {sizes, sizeof(sizes) / sizeof(sizes[0]),
         "the burst must be a number of b, k or kb, m or mb"}};
    double *out[] = {&l->bw, &l->lat, &l->burst};
    const char *s = spec;
    l->bw = 0.0, l->lat = 0.0, l->burst = 0.0;
    for (size_t i = 0; i < sizeof(field) / sizeof(field[0]) && (i == 0 || *s != '\0'); i++) {
        const char *at = s;
        double v = rt_field(&s, field[i].units, field[i].n);
        if (v == -2.0) {
            snprintf(err, errlen, "--link %s: nothing after the last comma: "
                     "RATE[,LATENCY[,BURST]]", spec);
            return 1;
        }
        if (v < 0.0 || (i == 0 && v < 0.125)) { /* a rate of at least 1 bit/s */
            snprintf(err, errlen, "--link %s: '%.*s': %s", spec, (int)strcspn(at, ","), at,
                     field[i].what);
            return 1;
        }
        *out[i] = v;
    }
    if (*s != '\0') {
        snprintf(err, errlen, "--link %s: '%s' after the burst: RATE[,LATENCY[,BURST]]", spec, s);
        return 1;
    }
    return 0;
}

/* ---- the calls ---- */

/* A call's key: its size, ranks and decision (the same size decided two
 * ways, a warm-up's pmpi then binary say, are two lines). */
static uint64_t rt_hash(uint64_t bytes, unsigned ranks, const nf_wire_part_t *p, size_t n,
                        unsigned area)
{
    uint64_t h = 1469598103934665603ull;
#define RT_MIX(v) (h = (h ^ (uint64_t)(v)) * 1099511628211ull)
    RT_MIX(bytes), RT_MIX(ranks), RT_MIX(n), RT_MIX(area);
    for (size_t i = 0; i < n; i++)
        RT_MIX(p[i].route), RT_MIX(p[i].bytes), RT_MIX(p[i].nsc);
#undef RT_MIX
    return h;
}

static int rt_same(const replay_tcall_t *c, uint64_t bytes, unsigned ranks,
                   const nf_wire_part_t *p, size_t n, unsigned area)
{
    if (c->bytes != bytes || c->ranks != ranks || c->npart != n || c->area != area)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (c->part[i].route != p[i].route || c->part[i].bytes != p[i].bytes ||
            c->part[i].nsc != p[i].nsc)
            return 0;
    return 1;
}

/* The open-addressed index of t->call (slots hold index + 1), kept at most
 * half full. */
static void rt_index(replay_times_t *t)
{
    free(t->slot);
    t->nslot = t->nslot ? 2 * t->nslot : 64;
    t->slot = trace_xrealloc(NULL, t->nslot * sizeof(*t->slot));
    memset(t->slot, 0, t->nslot * sizeof(*t->slot));
    for (size_t i = 0; i < t->n; i++) {
        const replay_tcall_t *c = &t->call[i];
        size_t k = rt_hash(c->bytes, c->ranks, c->part, c->npart, c->area) & (t->nslot - 1);
        while (t->slot[k])
            k = (k + 1) & (t->nslot - 1);
        t->slot[k] = i + 1;
    }
}

/* The area the open call's verdict carries, from its stream's calls
 * before; then the call joins them, unless pmpi's or empty (no verdict),
 * as in lib/core/xnode.c. */
static unsigned rt_area(replay_times_t *t)
{
    size_t i = t->last < t->nstream && t->stream[t->last].key == t->cur_key ? t->last : 0;
    while (i < t->nstream && t->stream[i].key != t->cur_key)
        i++;
    t->last = i;
    if (i == t->nstream) {
        if (t->nstream == t->capstream)
            t->stream = trace_xrealloc(t->stream, (t->capstream = t->capstream ? 2 * t->capstream
                                                                               : 8) *
                                                      sizeof(*t->stream));
        t->stream[t->nstream++] = (replay_stream_t){.key = t->cur_key};
    }
    nf_inline_hist_t *h = &t->stream[i].hist;
    unsigned area = nf_inline_words(h);
    int pmpi = t->ncur == 0 || t->cur_bytes == 0; /* an empty call sends nothing */
    for (size_t j = 0; j < t->ncur; j++)
        pmpi |= t->cur[j].route == NF_ROUTE_PMPI;
    if (!pmpi)
        nf_inline_note(h, nf_traffic_inline_need_call(t->cur, t->ncur));
    return area;
}

static void rt_keep(replay_times_t *t)
{
    if (!t->open)
        return;
    t->open = 0;
    unsigned area = rt_area(t);
    /* two ranks are one node, or two one-rank nodes whose verdicts carry
     * each call's own area (nf_traffic_area): the history's is not used,
     * and keyed by it one size would split into lines that say the same */
    if (t->cur_ranks == 2)
        area = 0;
    if (2 * (t->n + 1) > t->nslot)
        rt_index(t);
    size_t k = rt_hash(t->cur_bytes, t->cur_ranks, t->cur, t->ncur, area) & (t->nslot - 1);
    for (; t->slot[k]; k = (k + 1) & (t->nslot - 1))
        if (rt_same(&t->call[t->slot[k] - 1], t->cur_bytes, t->cur_ranks, t->cur, t->ncur,
                    area)) {
            t->call[t->slot[k] - 1].records++;
            return;
        }
    if (t->n == t->cap)
        t->call = trace_xrealloc(t->call, (t->cap = t->cap ? 2 * t->cap : 16) * sizeof(*t->call));
    t->slot[k] = t->n + 1;
    replay_tcall_t *c = &t->call[t->n++];
    *c = (replay_tcall_t){t->cur_bytes, 1, t->cur_ranks, NULL, t->ncur, area};
    c->part = trace_xrealloc(NULL, (t->ncur ? t->ncur : 1) * sizeof(*c->part));
    memcpy(c->part, t->cur, t->ncur * sizeof(*c->part));
}

void replay_times_begin(replay_times_t *t, uint64_t bytes, unsigned ranks, uint64_t key)
{
    rt_keep(t);
    t->open = 1, t->ncur = 0, t->cur_bytes = bytes, t->cur_ranks = ranks, t->cur_key = key;
}

void replay_times_part(replay_times_t *t, nf_route_t route, uint64_t bytes, uint64_t nsc)
{
    if (!t->open)
        return;
    if (t->ncur == t->capcur)
        t->cur = trace_xrealloc(t->cur, (t->capcur = t->capcur ? 2 * t->capcur : 8) * sizeof(*t->cur));
    t->cur[t->ncur++] = (nf_wire_part_t){route, bytes, nsc};
}

static int rt_cmp(const void *a, const void *b)
{
    const replay_tcall_t *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? -1 : 1;
    if (x->ranks != y->ranks)
        return x->ranks < y->ranks ? -1 : 1;
    return (x->records < y->records) - (x->records > y->records); /* most calls first */
}

static int rt_cmp_ranks(const void *a, const void *b)
{
    const replay_tcall_t *x = a, *y = b;
    return (x->ranks > y->ranks) - (x->ranks < y->ranks);
}

void replay_times_end(replay_times_t *t)
{
    rt_keep(t);
    uint64_t most = 0, run = 0;
    t->ranks = 2;
    if (t->n > 1) /* by ranks first: the most common size in one pass */
        qsort(t->call, t->n, sizeof(*t->call), rt_cmp_ranks);
    for (size_t i = 0; i < t->n; i++) {
        run = i > 0 && t->call[i].ranks == t->call[i - 1].ranks ? run + t->call[i].records
                                                                 : t->call[i].records;
        if (run > most)
            most = run, t->ranks = t->call[i].ranks;
    }
    t->ranks = t->ranks < 2 ? 2 : t->ranks > 64 ? 64 : t->ranks;
    if (t->n > 1)
        qsort(t->call, t->n, sizeof(*t->call), rt_cmp);
    free(t->slot); /* the order changed; nothing is added after the end */
    t->slot = NULL, t->nslot = 0;
}

void replay_times_free(replay_times_t *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->call[i].part);
    free(t->call);
    free(t->cur);
    free(t->slot);
    free(t->stream);
    memset(t, 0, sizeof(*t));
}

unsigned replay_times_ranks(const replay_times_t *t) { return t->ranks; }

/* ---- the model ---- */

static nf_codec_t rt_codec(nf_route_t route)
{
    switch (route) {
    case NF_ROUTE_BF16: return NF_CODEC_BF16;
    case NF_ROUTE_BINARY: return NF_CODEC_BINARY;
    case NF_ROUTE_TERNARY: return NF_CODEC_TERNARY;
    case NF_ROUTE_INT4: /* int3 and int2 run int4's kernels on fewer planes: */
    case NF_ROUTE_INT3: /* int4's rate is theirs within the planes' share */
    case NF_ROUTE_INT2: return NF_CODEC_INT4;
    default: return NF_CODEC_FP32;
    }
}

/* Nodes of per_node ranks (the last may hold fewer: counted as full) and
 * the ranks on each. */
static unsigned rt_nodes(const replay_link_t *l, unsigned ranks, unsigned *per)
{
    unsigned r = l->per_node ? l->per_node : 1;
    *per = r < ranks ? r : (ranks ? ranks : 1);
    return (ranks + *per - 1) / *per;
}

/* A call whose codec and exchanges' latencies take c seconds and that
 * sends b bytes. A plain link: c + b / bw. Under a token bucket of burst B,
 * calls back to back: the bucket refills while the codec runs, so the
 * first min(B, c bw) bytes pass at once and the rest at the rate, and no
 * call is shorter than its bytes at the rate:
 * max(b / bw, c + max(0, b - B) / bw) when c bw >= B (the bucket full
 * again), max(c, b / bw) otherwise. */
static double rt_wire(const replay_link_t *l, double c, double b)
{
    if (l->burst <= 0.0)
        return c + b / l->bw;
    double t = b / l->bw, over = b > l->burst ? (b - l->burst) / l->bw : 0.0;
    return c * l->bw >= l->burst ? (c + over > t ? c + over : t) : (c > t ? c : t);
}

/* Codec seconds of a part, before the wire (pre) and, of a low-bit part,
 * the reduce and finish stages after it (fin): pmpi sums only, and so does
 * an fp32 call that goes direct (rt_direct). */
static void rt_codec_s(const nf_codec_rates_t *r, nf_route_t route, uint64_t bytes, int direct,
                       double *pre, double *fin)
{
    size_t m = (size_t)(bytes / sizeof(float));
    nf_codec_t k = rt_codec(route);
    if (route == NF_ROUTE_PMPI || (route == NF_ROUTE_FP32 && direct))
        *pre += 1e-9 * nf_codec_ns(r, NF_CODEC_FP32, NF_CODEC_REDUCE, m);
    else if (nf_route_lowbit(route))
        *pre += 1e-9 * nf_codec_ns(r, k, NF_CODEC_PACK, m),
        *fin += 1e-9 * (nf_codec_ns(r, k, NF_CODEC_REDUCE, m) +
                        nf_codec_ns(r, k, NF_CODEC_FINISH, m));
    else
        *pre += 1e-9 * nf_codec_ns(r, k, -1, m);
}

/* An all-fp32 call with one rank per node on two nodes, or small enough to
 * cross whole, is charged its sum alone: the input goes straight into the
 * exchange and the sum straight into the result, no copies (lib/core/coll.c,
 * nf_fp32_direct; xnode.c, nf_xnode_fp32_direct). Not followed exactly:
 * the library also goes direct for a mixed call whose fp32 segments are
 * one run (charged the copies here), and a call that rides with the
 * verdict copies its input in once (nf_inline_run; not charged). */
static int rt_direct(int all_fp32, unsigned p, unsigned per, uint64_t bytes)
{
    return all_fp32 && per == 1 && (p == 2 || bytes <= NF_XNODE_WHOLE_MAX);
}

/* The stages one after the other, but for what is done a message at a
 * time as the messages arrive: fin, of which the share last is left when
 * the wire ends (streamed counts: the last message's lines of w->stream;
 * an all-fp32 call between two one-rank nodes too large to ride with the
 * verdict, whose sum is all its codec: the last eager message's floats,
 * lib/core/xnode.c's nf_fp32_pair; a mixed call's fp32 sum is charged
 * before the wire). The
 * call then ends that share after the wire, or with fin when that is
 * longer than the wire. last 0: nothing streams. */
static double rt_time(const replay_link_t *l, double pre, double fin, double last,
                      const nf_wire_t *w)
{
    double c = pre + w->steps * l->lat;
    if (last <= 0.0)
        return rt_wire(l, c + fin, (double)w->bytes);
    double t = rt_wire(l, c, (double)w->bytes) + fin * last;
    return t > c + fin ? t : c + fin;
}

/* The share of a streamed codec left after the wire (rt_time), with the
 * codec moved from pre to fin where the call's fp32 sum streams. */
static double rt_stream(unsigned p, int direct, uint64_t bytes, const nf_wire_t *w,
                        double *pre, double *fin)
{
    if (w->stream > 0)
        return (double)NF_CPAIR_LINES / (double)w->stream;
    if (!direct || p != 2 || bytes <= NF_PAIR_INLINE_BYTES)
        return 0.0; /* a call that rides with the verdict is summed after it */
    double msg = (double)(NF_PAIR_MSG * sizeof(float));
    *fin += *pre, *pre = 0.0;
    return msg < (double)bytes ? msg / (double)bytes : 1.0;
}

double replay_time_route(const replay_link_t *l, const nf_codec_rates_t *r, nf_route_t route,
                         uint64_t bytes, unsigned ranks, uint64_t nsc)
{
    nf_wire_t w;
    double pre = 0.0, fin = 0.0;
    unsigned per, p = rt_nodes(l, ranks, &per);
    nf_traffic_internode(route, bytes, p, per, nsc, &w);
    int direct = rt_direct(route == NF_ROUTE_FP32, p, per, bytes);
    rt_codec_s(r, route, bytes, direct, &pre, &fin);
    double last = rt_stream(p, direct, bytes, &w, &pre, &fin);
    return rt_time(l, pre, fin, last, &w);
}

/* A call as decided: its parts' codecs one after another, then what
 * crosses nodes for the whole call (nf_traffic_internode_call). */
static double rt_decided(const replay_link_t *l, const nf_codec_rates_t *r,
                         const replay_tcall_t *c, uint64_t *wire)
{
    unsigned per, p = rt_nodes(l, c->ranks, &per);
    double pre = 0.0, fin = 0.0;
    nf_wire_t w;
    int all_fp32 = c->npart > 0;
    for (size_t i = 0; i < c->npart; i++)
        all_fp32 &= c->part[i].route == NF_ROUTE_FP32;
    int direct = rt_direct(all_fp32, p, per, c->bytes);
    for (size_t i = 0; i < c->npart; i++)
        rt_codec_s(r, c->part[i].route, c->part[i].bytes, direct, &pre, &fin);
    nf_traffic_internode_call(c->part, c->npart, p, per, c->area, &w);
    *wire = w.bytes;
    double last = rt_stream(p, direct, c->bytes, &w, &pre, &fin);
    return rt_time(l, pre, fin, last, &w);
}

static const char *rt_decided_name(const replay_tcall_t *c)
{
    for (size_t i = 1; i < c->npart; i++)
        if (c->part[i].route != c->part[0].route)
            return "mixed";
    return c->npart ? nf_route_name(c->part[0].route) : "-";
}

static const nf_route_t rt_routes[] = {NF_ROUTE_PMPI,    NF_ROUTE_FP32,    NF_ROUTE_BF16,
                                       NF_ROUTE_BINARY,  NF_ROUTE_TERNARY, NF_ROUTE_INT4,
                                       NF_ROUTE_INT3,    NF_ROUTE_INT2};
#define RT_NROUTES (sizeof(rt_routes) / sizeof(rt_routes[0]))
#define RT_SCAN_LO 10 /* crossovers: call sizes from 2^10 ... */
#define RT_SCAN_HI 31 /* ... to 2^31 bytes */

/* The smallest scanned size from which route beats than (every larger one
 * too): 0 when it never does, 1 << RT_SCAN_LO when it always does. */
static uint64_t rt_crossover(const replay_link_t *l, const nf_codec_rates_t *r, unsigned ranks,
                             nf_route_t route, nf_route_t than)
{
    uint64_t from = 0;
    for (int e = RT_SCAN_HI; e >= RT_SCAN_LO; e--) {
        uint64_t b = (uint64_t)1 << e;
        if (replay_time_route(l, r, route, b, ranks, 1) >= replay_time_route(l, r, than, b, ranks, 1))
            break;
        from = b;
    }
    return from;
}

static void rt_bytes(char *buf, size_t n, uint64_t b)
{
    if (b >= (1u << 20) && b % (1u << 20) == 0)
        snprintf(buf, n, "%llu MiB", (unsigned long long)(b >> 20));
    else if (b >= 1024 && b % 1024 == 0)
        snprintf(buf, n, "%llu KiB", (unsigned long long)(b >> 10));
    else
        snprintf(buf, n, "%llu B", (unsigned long long)b);
}

/* Calls of a kind: each rank records each call. */
static double rt_calls(const replay_tcall_t *c)
{
    return (double)c->records / (double)(c->ranks ? c->ranks : 1);
}

static void rt_link_text(FILE *fp, const replay_link_t *l, unsigned ranks,
                         const nf_codec_rates_t *r)
{
    unsigned rpn, p = rt_nodes(l, ranks, &rpn);
    char burst[64] = "";
    if (l->burst > 0.0)
        snprintf(burst, sizeof(burst), ", a token bucket of %.4g KiB", l->burst / 1024.0);
    fprintf(fp, "Predicted time per call (ms) over a link of %.4g Gbit/s each way per node, "
            "%.4g us a step%s; %u rank%s per node (%u nodes at %u ranks); codec rates measured "
            "here, %u at once, the reduce stage at %u ranks\n", l->bw * 8e-9, l->lat * 1e6,
            burst, rpn, rpn == 1 ? "" : "s", p, ranks, r->share, ranks);
}

void replay_times_table(FILE *fp, const replay_times_t *t, const replay_link_t *l,
                        const nf_codec_rates_t *r)
{
    unsigned ranks = replay_times_ranks(t);
    double total[RT_NROUTES + 1] = {0};
    rt_link_text(fp, l, ranks, r);
    fprintf(fp, "%12s %5s %8s", "bytes", "ranks", "calls");
    for (size_t i = 0; i < RT_NROUTES; i++)
        fprintf(fp, " %10s", nf_route_name(rt_routes[i]));
    fprintf(fp, " %10s %-8s\n", "decided", "on");
    for (size_t k = 0; k < t->n; k++) {
        const replay_tcall_t *c = &t->call[k];
        fprintf(fp, "%12llu %5u %8.4g", (unsigned long long)c->bytes, c->ranks, rt_calls(c));
        for (size_t i = 0; i < RT_NROUTES; i++) {
            double s = replay_time_route(l, r, rt_routes[i], c->bytes, c->ranks, 1);
            total[i] += s * rt_calls(c);
            fprintf(fp, " %10.4g", 1e3 * s);
        }
        uint64_t wire;
        double d = rt_decided(l, r, c, &wire);
        total[RT_NROUTES] += d * rt_calls(c);
        fprintf(fp, " %10.4g %-8s\n", 1e3 * d, rt_decided_name(c));
    }
    fprintf(fp, "%12s %5s %8s", "all calls", "", "");
    for (size_t i = 0; i <= RT_NROUTES; i++)
        fprintf(fp, " %10.4g", 1e3 * total[i]);
    fprintf(fp, "\n");
    for (size_t i = 2; i < RT_NROUTES; i++) {
        char a[32], b[32];
        uint64_t f = rt_crossover(l, r, ranks, rt_routes[i], NF_ROUTE_FP32);
        uint64_t g = rt_crossover(l, r, ranks, rt_routes[i], NF_ROUTE_PMPI);
        rt_bytes(a, sizeof(a), f), rt_bytes(b, sizeof(b), g);
        fprintf(fp, "%s at %u ranks beats fp32 %s%s, pmpi %s%s (calls of 1 KiB to 2 GiB)\n",
                nf_route_name(rt_routes[i]), ranks, f ? "from " : "at no size",
                f ? a : "", g ? "from " : "at no size", g ? b : "");
    }
}

void replay_times_json(FILE *fp, const replay_times_t *t, const replay_link_t *l,
                       const nf_codec_rates_t *r, const char *in)
{
    unsigned ranks = replay_times_ranks(t);
    fprintf(fp, "\n%s\"bandwidth_bytes_per_s\": %.6g,\n%s\"latency_s\": %.6g,\n%s"
            "\"burst_bytes\": %.6g,\n%s\"ranks_per_node\": %u,\n%s\"codec_ranks\": %u,\n%s"
            "\"codec_share\": %u,\n%s\"calls\": [", in, l->bw, in, l->lat, in, l->burst, in,
            l->per_node ? l->per_node : 1, in, ranks, in, r->share, in);
    for (size_t k = 0; k < t->n; k++) {
        const replay_tcall_t *c = &t->call[k];
        unsigned per, p = rt_nodes(l, c->ranks, &per);
        fprintf(fp, "%s\n%s  {\"bytes\": %llu, \"ranks\": %u, \"records\": %llu, "
                "\"calls\": %.6g, \"verdict_area_bytes\": %u, \"seconds\": {", k ? "," : "",
                in, (unsigned long long)c->bytes, c->ranks, (unsigned long long)c->records,
                rt_calls(c), nf_traffic_area(c->part, c->npart, p, per, c->area) * 8u);
        for (size_t i = 0; i < RT_NROUTES; i++)
            fprintf(fp, "%s\"%s\": %.6g", i ? ", " : "", nf_route_name(rt_routes[i]),
                    replay_time_route(l, r, rt_routes[i], c->bytes, c->ranks, 1));
        uint64_t wire;
        fprintf(fp, ", \"decided\": %.6g}, \"internode_bytes\": {", rt_decided(l, r, c, &wire));
        for (size_t i = 0; i < RT_NROUTES; i++) {
            nf_wire_t w;
            nf_traffic_internode(rt_routes[i], c->bytes, p, per, 1, &w);
            fprintf(fp, "%s\"%s\": %llu", i ? ", " : "", nf_route_name(rt_routes[i]),
                    (unsigned long long)w.bytes);
        }
        fprintf(fp, ", \"decided\": %llu}, \"decided_on\": \"%s\"}", (unsigned long long)wire,
                rt_decided_name(c));
    }
    fprintf(fp, "%s],\n%s\"beats_from\": {", t->n ? "\n" : "", in);
    for (size_t i = 2; i < RT_NROUTES; i++)
        fprintf(fp, "%s\"%s\": {\"fp32\": %llu, \"pmpi\": %llu}", i > 2 ? ", " : "",
                nf_route_name(rt_routes[i]),
                (unsigned long long)rt_crossover(l, r, ranks, rt_routes[i], NF_ROUTE_FP32),
                (unsigned long long)rt_crossover(l, r, ranks, rt_routes[i], NF_ROUTE_PMPI));
    fprintf(fp, "}");
}
