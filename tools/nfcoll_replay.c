/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nfcoll_replay: replay NFCOLL_TRACE files offline under a policy, without
 * MPI: the decisions per rule and route, and per route the calls and
 * traffic NFCOLL_STATS would have counted. docs/design.md, "Replay".
 *
 * Each traced call is decided by the library's decision function
 * (nf_decide.h) and counted by its traffic model and stats writers
 * (nf_traffic.h). What only the trace can tell (a NaN, a resource that
 * failed) is taken from it where the replay sends a call where the run did.
 */
#include "config.h"

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* sched_getaffinity, CPU_COUNT */
#endif

#include <getopt.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nf_decide.h"
#include "nf_kernels.h"
#include "nf_layout.h"
#include "nf_policy.h"
#include "nf_route.h"
#include "nf_profile.h"
#include "nf_settings.h"
#include "nf_traffic.h"
#include "nf_util.h"
#include "replay_rules.h"
#include "replay_time.h"
#include "replay_why.h"
#include "trace_calls.h"

enum { EXIT_OK = 0, EXIT_PROBLEM = 1, EXIT_USAGE = 2 };

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: nfcoll_replay --policy FILE [--profile FILE] [--link RATE[,LATENCY[,BURST]]]\n"
            "                     [--ranks-per-node N] [--codec-share N] [--json] TRACE...\n"
            "       nfcoll_replay -h | --help | -V | --version\n"
            "\n"
            "Replay libnfcoll traces (NFCOLL_TRACE, one file per rank) under an admission\n"
            "policy, without MPI: decisions per rule and route, and per route the calls,\n"
            "bytes and traffic (upstream, total, %% of an FP32 ring allreduce) that\n"
            "NFCOLL_STATS would count, summed over the traces. Under the policy a trace was\n"
            "recorded with, the route counters are that run's; under another, what the\n"
            "same calls would have cost.\n"
            "\n"
            "  -p, --policy FILE   the policy to replay under (see nfcoll-policy(5))\n"
            "  -P, --profile FILE  the calibration profile route = auto reads (default:\n"
            "                      the policy's `profile`)\n"
            "  -l, --link RATE[,LATENCY[,BURST]]\n"
            "                      also predict each call size's time per route over a\n"
            "                      link of RATE each way per node with both ways busy\n"
            "                      (what osu_bw measures one way on a full-duplex\n"
            "                      link; tc units: 1gbit, 10gbit, 125mbps),\n"
            "                      LATENCY per exchange (50us, 1ms;\n"
            "                      default 0) and, for a link shaped by a token bucket,\n"
            "                      its BURST (128kb; default none), from the codec rates\n"
            "                      measured here (as nfcoll_info -b prints them, but\n"
            "                      for --codec-share); and the\n"
            "                      call size from which each low-bit route beats fp32\n"
            "                      and pmpi\n"
            "  -r, --ranks-per-node N\n"
            "                      ranks per node for --link (default 1: every rank a\n"
            "                      node of its own)\n"
            "  -c, --codec-share N for --link: time the codec with N copies running at\n"
            "                      once, 1 to 64: the ranks whose calls share one\n"
            "                      memory's bandwidth (default: the ranks per node, at\n"
            "                      most the traces' ranks and the CPUs here; pretend\n"
            "                      hosts on one machine: all their ranks)\n"
            "  -j, --json          JSON on stdout: ranks, routes (the keys of the stats\n"
            "                      JSON's \"routes\"), rules, and with --link \"link\"\n"
            "  -h, --help          this text\n"
            "  -V, -v, --version   the libnfcoll version and the MPI it was built with\n"
            "\n"
            "Exit status: 0 replayed, 1 a file does not load or read, 2 usage error.\n");
}

/* --version: as every nfcoll program and benchmark says it. */
static void print_version(void)
{
    printf("nfcoll_replay (libnfcoll) %s\nbuilt with %s\n", PACKAGE_VERSION,
           NF_MPI_VERSION_STRING);
}

/* ---- what a replay counts ---- */

typedef struct replay {
    nf_decide_ctx_t x;
    nf_decide_t d;
    nf_decide_part_t *part;    /* a traced fused call's regions */
    size_t cap_part;
    int stale_said;
    nf_route_stats_t route[NF_ROUTE_COUNT];
    replay_rules_t rules;      /* decisions per rule */
    uint64_t calls;
    trace_calls_t in;          /* the traces' records, gathered into calls */
    replay_whys_t why;         /* per region, why (replay_why.h) */
    int timing;                /* --link: calls kept for their times */
    replay_times_t tm;
} replay_t;

/* A call of bytes that ran on ran under action a: binary counts a scale
 * per block of the action's scale_block (inherit: NFCOLL_SCALE_BLOCK here,
 * as in the run), an integer route a block max per block of its block. */
static void rp_count(replay_t *rp, nf_route_t ran, uint64_t bytes, int comm_size,
                     const nf_policy_action_t *a)
{
    unsigned n = (unsigned)comm_size;
    uint64_t block = a == NULL                ? 0
                     : nf_route_intk(ran) > 0 ? (uint64_t)(a->block > 0 ? a->block : 0)
                     : a->scale_block >= 0    ? (uint64_t)a->scale_block
                                              : nf_settings_load()->scale_block;
    uint64_t nsc = nf_traffic_scales(ran, bytes, block);
    nf_traffic_count_scales(rp->route, ran, bytes, n, nf_count_planes(n), nsc);
    if (rp->timing)
        replay_times_part(&rp->tm, ran, bytes, nsc);
}

/* ---- a call's decision, and what it ran ---- */

static int rp_traced_fused(const trace_call_t *c)
{
    return c->n > 1 || c->seg[0].region != NULL || c->seg[0].offset > 0;
}

/* A call run whole. Where the replay sends it where the run did, it ran
 * what it ran then (NaN, resources); otherwise what the call tells. A
 * cut call whose every segment said pmpi was pmpi, not route = auto. */
static void rp_whole(replay_t *rp, const trace_call_t *c, const nf_decide_call_t *call)
{
    const nf_decide_t *d = &rp->d;
    const trace_seg_t *t = &c->seg[0];
    nf_route_t asked = nf_decide_want(d, c->comm_size >= 2), ran;
    int as_asked = !d->whole.route_auto || d->cut == NF_CUT_ALL_PMPI;
    if (!rp_traced_fused(c) && (t->ran == d->route || (t->route == asked && as_asked)))
        ran = t->ran;
    else
        ran = nf_decide_runs(&rp->x, call, 0, d->route);
    replay_rules_add(&rp->rules, &d->whole, d->route, call->bytes);
    rp_count(rp, ran, call->bytes, c->comm_size, &d->whole);
}

/* A fused call: each segment counted on what it ran (the traced route
 * where the replay decided as the run did). A traced call whose every
 * segment ran pmpi had no shared buffer: it ran whole on PMPI, counted
 * once. A segment the trace does not show (the replay's layout cut it)
 * runs what the call tells. */
static void rp_segments(replay_t *rp, const trace_call_t *c, const nf_decide_call_t *call)
{
    const nf_decide_t *d = &rp->d;
    int traced = rp_traced_fused(c) && d->nseg == c->n, whole_pmpi = traced;
    for (size_t s = 0; s < d->nseg && traced; s++)
        whole_pmpi &= c->seg[s].ran == NF_ROUTE_PMPI;
    for (size_t s = 0; s < d->nseg; s++) {
        const nf_decide_seg_t *g = &d->seg[s];
        nf_route_t sent = d->calibrate || g->route == NF_ROUTE_PMPI ? NF_ROUTE_FP32 : g->route;
        nf_route_t r = nf_decide_runs(&rp->x, call, 1, sent);
        int same = traced && (c->seg[s].route == r || c->seg[s].route == g->route);
        replay_rules_add(&rp->rules, &g->act, sent, g->m * sizeof(float));
        if (g->name != NULL)
            replay_whys_note(&rp->why, d, g);
        if (!whole_pmpi)
            rp_count(rp, same ? c->seg[s].ran : r, g->m * sizeof(float), c->comm_size, &g->act);
    }
    if (whole_pmpi)
        rp_count(rp, NF_ROUTE_PMPI, call->bytes, c->comm_size, NULL);
}

/* A call cut where the trace shows it cut (its regions), else by the
 * replay policy's layout; decided as admission decides. */
static void rp_replay(void *arg, const trace_call_t *c)
{
    replay_t *rp = arg;
    nf_decide_call_t call = {.comm_name = c->comm, .comm_size = c->comm_size, .dt = c->dt,
                             .op = c->op, .call = c->call, .parts = rp->part};
    if (rp->cap_part < c->n)
        rp->part = trace_xrealloc(rp->part, (rp->cap_part = c->n) * sizeof(*rp->part));
    call.parts = rp->part;
    for (size_t s = 0; s < c->n; s++) {
        const trace_seg_t *g = &c->seg[s];
        call.bytes += g->bytes, call.count += g->elements;
        if (g->region != NULL && rp_traced_fused(c))
            rp->part[call.nparts++] = (nf_decide_part_t){g->offset, g->elements, g->region};
    }
    if (nf_decide(&rp->x, &call, c->comm_size >= 2, &rp->d) != 0) {
        fprintf(stderr, "nfcoll_replay: out of memory\n");
        exit(EXIT_PROBLEM);
    }
    if (rp->d.stale != NULL && !rp->stale_said++)
        fprintf(stderr, "nfcoll_replay: warning: the profile's entry for %s measured %llu "
                "elements, the segment has %llu: ignored, it takes fp32, as in libnfcoll "
                "(further such entries are not reported)\n", rp->d.stale->segment,
                (unsigned long long)rp->d.stale->elements, (unsigned long long)rp->d.stale_m);
    rp->calls++;
    if (rp->timing)
        replay_times_begin(&rp->tm, call.bytes, (unsigned)c->comm_size,
                           nf_hash_u64(nf_hash_u64(nf_hash_str(NF_HASH_INIT, c->comm),
                                                   (uint64_t)c->comm_size),
                                       (uint64_t)c->rank));
    if (rp->d.cut == NF_CUT_FUSED && rp->d.route != NF_ROUTE_PMPI)
        rp_segments(rp, c, &call);
    else
        rp_whole(rp, c, &call);
}

static void rp_free(replay_t *rp)
{
    replay_whys_free(&rp->why);
    replay_times_free(&rp->tm);
    trace_calls_free(&rp->in);
    free(rp->rules.rule);
    free(rp->part);
    nf_decide_free(&rp->d);
}

/* ---- output ---- */

typedef struct rp_opts {
    const char *policy;
    const char *link;    /* --link, or NULL */
    int per_node_set;    /* --ranks-per-node given */
    long share;          /* --codec-share, or 0 */
    replay_link_t lk;
    nf_codec_rates_t codec;
    const char *profile; /* the one loaded, or NULL */
    int json, ntraces;
    const nf_policy_t *pol;
    const nf_profile_t *prof;
} rp_opts_t;

static void rp_text(FILE *fp, const replay_t *rp, const rp_opts_t *o)
{
    fprintf(fp, "nfcoll_replay: %zu rank%s from %d trace%s, %llu records of %llu calls, under %s%s%s; "
            "%% of what an FP32 ring allreduce would move\n", rp->in.nrank,
            rp->in.nrank == 1 ? "" : "s", o->ntraces, o->ntraces == 1 ? "" : "s",
            (unsigned long long)rp->in.records, (unsigned long long)rp->calls, o->policy,
            o->profile ? " with profile " : "", o->profile ? o->profile : "");
    nf_traffic_table(fp, rp->route, NULL, 1);
    fputc('\n', fp);
    replay_rules_table(fp, &rp->rules);
    if (o->link != NULL) {
        fputc('\n', fp);
        replay_times_table(fp, &rp->tm, &o->lk, &o->codec);
    }
}

/* "routes" as the stats JSON writes them. */
static void rp_json(FILE *fp, const replay_t *rp, const rp_opts_t *o)
{
    fprintf(fp, "{\n  \"ranks\": %zu,\n  \"traces\": %d,\n  \"calls\": %llu,\n  \"records\": %llu,"
            "\n  \"policy\": ", rp->in.nrank, o->ntraces, (unsigned long long)rp->calls,
            (unsigned long long)rp->in.records);
    nf_json_str(fp, o->policy);
    fprintf(fp, ",\n  \"profile\": ");
    if (o->profile != NULL)
        nf_json_str(fp, o->profile);
    else
        fprintf(fp, "null");
    fprintf(fp, ",\n  \"routes\": {");
    nf_traffic_json(fp, rp->route, "    ");
    fprintf(fp, "\n  },\n  \"rules\": {");
    replay_rules_json(fp, &rp->rules);
    fprintf(fp, "%s},\n  \"admission\": ", rp->rules.n ? "\n  " : "");
    replay_whys_json(fp, &rp->why, o->prof, o->pol);
    if (o->link != NULL) {
        fprintf(fp, ",\n  \"link\": {");
        replay_times_json(fp, &rp->tm, &o->lk, &o->codec, "    ");
        fprintf(fp, "\n  }");
    }
    fprintf(fp, "\n}\n");
}

/* ---- main ---- */

/* Parser diagnostics as nfcoll_policy prints them. */
static void rp_diag(const nf_policy_diag_t *d, void *arg)
{
    (void)arg;
    const char *sev = d->severity == NF_POLICY_ERROR ? "error" : "warning";
    if (d->line > 0)
        fprintf(stderr, "%s:%d: %s: %s\n", d->file, d->line, sev, d->message);
    else
        fprintf(stderr, "%s: %s: %s\n", d->file, sev, d->message);
}

static int rp_parse_opts(int argc, char **argv, rp_opts_t *o)
{
    static const struct option opts[] = {{"policy", required_argument, NULL, 'p'},
                                         {"profile", required_argument, NULL, 'P'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"link", required_argument, NULL, 'l'},
                                         {"ranks-per-node", required_argument, NULL, 'r'},
                                         {"codec-share", required_argument, NULL, 'c'},
                                         {"help", no_argument, NULL, 'h'},
                                         {"version", no_argument, NULL, 'V'},
                                         {NULL, 0, NULL, 0}};
    int c;
    long rpn;
    char err[256];
    o->lk.per_node = 1;
    while ((c = getopt_long(argc, argv, "p:P:jl:r:c:hVv", opts, NULL)) != -1) {
        switch (c) {
        case 'l':
            if (replay_link_parse(optarg, &o->lk, err, sizeof(err)) != 0) {
                fprintf(stderr, "nfcoll_replay: %s\n", err);
                return -1;
            }
            o->link = optarg;
            break;
        case 'r':
            if (nf_parse_long(optarg, 1, 65536, &rpn) != NF_OK) {
                fprintf(stderr, "nfcoll_replay: --ranks-per-node %s: want a whole number "
                        "from 1 to 65536\n", optarg);
                return -1;
            }
            o->lk.per_node = (unsigned)rpn;
            o->per_node_set = 1;
            break;
        case 'c':
            if (nf_parse_long(optarg, 1, NF_CODEC_SHARE_MAX, &o->share) != NF_OK) {
                fprintf(stderr, "nfcoll_replay: --codec-share %s: want a whole number "
                        "from 1 to %u\n", optarg, NF_CODEC_SHARE_MAX);
                return -1;
            }
            break;
        case 'p': o->policy = optarg; break;
        case 'P': o->profile = optarg; break;
        case 'j': o->json = 1; break;
        case 'h': usage(stdout); exit(EXIT_OK);
        case 'V': case 'v': print_version(); exit(EXIT_OK);
        default: usage(stderr); return -1;
        }
    }
    if (o->policy == NULL || optind >= argc) {
        fprintf(stderr, "nfcoll_replay: %s\n", o->policy == NULL ? "--policy FILE is required"
                                                                  : "no trace to replay");
        usage(stderr);
        return -1;
    }
    if ((o->per_node_set || o->share) && o->link == NULL) {
        fprintf(stderr, "nfcoll_replay: %s applies to --link only\n",
                o->per_node_set ? "--ranks-per-node" : "--codec-share");
        return -1;
    }
    o->ntraces = argc - optind;
    return 0;
}

/* The profile route = auto reads: --profile (an error when it does not
 * load), else the policy's `profile` (libnfcoll then takes fp32 for every
 * auto segment, and so does the replay). 0, or -1 (said why). */
static int rp_load_profile(rp_opts_t *o, const nf_policy_t *pol, nf_profile_t **prof)
{
    const char *path = o->profile != NULL ? o->profile : nf_policy_profile(pol);
    *prof = NULL;
    if (path == NULL || nf_profile_load(path, rp_diag, NULL, prof) == NF_OK) {
        o->profile = path;
        return 0;
    }
    if (o->profile != NULL) {
        fprintf(stderr, "nfcoll_replay: profile %s does not load (see above): nothing "
                "replayed\n", path);
        return -1;
    }
    fprintf(stderr, "nfcoll_replay: warning: the policy's profile %s does not load (see "
            "above): route = auto takes fp32, as libnfcoll would\n", path);
    return 0;
}

/* A layout that does not load cuts nothing, as in libnfcoll. */
static nf_layout_t *rp_load_layout(const nf_policy_t *pol)
{
    const char *path = nf_policy_regions(pol);
    nf_layout_t *l = NULL;
    if (path != NULL && nf_layout_load(path, rp_diag, NULL, &l) != NF_OK)
        fprintf(stderr, "nfcoll_replay: warning: the policy's region layout %s does not load "
                "(see above): no call is cut by it, as in libnfcoll\n", path);
    return l;
}

/* The codec's copies timed at once: --codec-share, else the ranks per
 * node (at most the traces' ranks), at most the CPUs this process may run
 * on (more would share cores, not only memory). */
static unsigned rp_share(const rp_opts_t *o, unsigned ranks)
{
    if (o->share > 0)
        return (unsigned)o->share;
    unsigned n = o->lk.per_node > 0 ? o->lk.per_node : 1;
    cpu_set_t set;
    n = n < ranks ? n : ranks;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) >= 1 &&
        (unsigned)CPU_COUNT(&set) < n)
        n = (unsigned)CPU_COUNT(&set);
    n = n >= 1 ? n : 1;
    return n < NF_CODEC_SHARE_MAX ? n : NF_CODEC_SHARE_MAX;
}

int main(int argc, char **argv)
{
    rp_opts_t o = {0};
    nf_policy_t *pol = NULL;
    nf_profile_t *prof = NULL;
    static replay_t rp;
    int rc = EXIT_OK;
    if (rp_parse_opts(argc, argv, &o) != 0)
        return EXIT_USAGE;
    if (nf_policy_load(o.policy, rp_diag, NULL, &pol) != NF_OK) {
        fprintf(stderr, "nfcoll_replay: %s does not load (see above): nothing replayed\n",
                o.policy);
        return EXIT_PROBLEM;
    }
    if (rp_load_profile(&o, pol, &prof) != 0) {
        nf_policy_free(pol);
        return EXIT_PROBLEM;
    }
    const nf_settings_t *set = nf_settings_load();
    nf_layout_t *lay = rp_load_layout(pol);
    rp.x = (nf_decide_ctx_t){.pol = pol, .layout = lay, .prof = prof,
                             .calibrate = set->calibrate != NULL || nf_policy_calibrate(pol) != NULL,
                             .count_bits = set->count_bits};
    rp.in.fn = rp_replay, rp.in.arg = &rp;
    rp.timing = o.link != NULL;
    o.pol = pol, o.prof = prof;
    for (int i = 0; i < o.ntraces; i++)
        if (trace_calls_read(&rp.in, argv + optind, i) != 0)
            rc = EXIT_PROBLEM;
    if (rc == EXIT_OK && o.link != NULL) {
        replay_times_end(&rp.tm);
        nf_kernels_set_tune(set->simd_tune);
        unsigned ranks = replay_times_ranks(&rp.tm), share = rp_share(&o, ranks);
        if (nf_codec_measure(nf_kernels_tuned((nf_isa_t)set->simd_cap), ranks, share, 5,
                             &o.codec) != 0) {
            fprintf(stderr, "nfcoll_replay: no memory or threads to measure the codec rates "
                    "--link needs (%u copies): nothing reported\n", share);
            rc = EXIT_PROBLEM;
        }
    }
    if (rc == EXIT_OK) {
        replay_rules_sort(&rp.rules);
        (o.json ? rp_json : rp_text)(stdout, &rp, &o);
    } else {
        fprintf(stderr, "nfcoll_replay: a trace could not be read: nothing reported\n");
    }
    rp_free(&rp);
    nf_layout_free(lay);
    nf_profile_free(prof);
    nf_policy_free(pol);
    return rc;
}
