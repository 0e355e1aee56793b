/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/admit's per-segment state, driven with synthetic segments (no MPI
 * call): the segment table and its keys, the warm-up's counts, health's
 * cool-down schedule and spike rule, and their checkpoint form
 * (docs/design.md, "Warm-up", "Health", "Checkpoints"): what a restored
 * run continues from must be what the uninterrupted run had, and a
 * malformed part must be refused without changing anything. Links the
 * admit layer alone.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nf_dcache.h"
#include "nf_health.h"
#include "nf_plan.h"
#include "nf_intern.h"
#include "nf_segstate.h"
#include "nf_segtab.h"
#include "nf_warmup.h"

#define NCASES(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* A fused call: region "adm.a" (100), a gap (50), region "adm.b" (200),
 * every segment binary. */
static void three(nf_seg_t *seg, nf_seg_note_t *note)
{
    memset(seg, 0, 3 * sizeof(*seg));
    memset(note, 0, 3 * sizeof(*note));
    seg[0] = (nf_seg_t){.off = 0, .m = 100, .route = NF_ROUTE_BINARY, .id = nf_intern("adm.a")};
    seg[1] = (nf_seg_t){.off = 100, .m = 50, .route = NF_ROUTE_BINARY};
    seg[2] = (nf_seg_t){.off = 150, .m = 200, .route = NF_ROUTE_BINARY, .id = nf_intern("adm.b")};
    for (int i = 0; i < 3; i++)
        seg[i].ef_ratio = NAN;
}

/* ------------------------------------------------------------ segtab */

/* Keys: a region by its id, a gap by its neighbours and size; two gaps of
 * one size between other regions are two records. */
START_TEST(test_segtab_keys)
{
    nf_segtab_t t = {.size = sizeof(uint64_t), .max = 4};
    nf_seg_t seg[3];
    nf_seg_note_t note[3];
    three(seg, note);
    uint64_t *a = nf_segtab_get(&t, seg, 3, 0, 1), *g = nf_segtab_get(&t, seg, 3, 1, 1);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(g);
    ck_assert_ptr_eq(nf_segtab_get(&t, seg, 3, 0, 0), a);
    seg[2].id = nf_intern("adm.c"); /* the gap now lies before another region */
    ck_assert_ptr_null(nf_segtab_get(&t, seg, 3, 1, 0));
    ck_assert_ptr_nonnull(nf_segtab_get(&t, seg, 3, 1, 1));
    ck_assert_uint_eq(t.n, 3);
    nf_segtab_get(&t, seg, 3, 2, 1);
    ck_assert_ptr_eq(nf_segtab_get(&t, seg, 3, 0, 0), a); /* still there */
    seg[2].id = nf_intern("adm.d");
    ck_assert_ptr_null(nf_segtab_get(&t, seg, 3, 2, 1)); /* the bound: max records */
    nf_segtab_free(&t);
}
END_TEST

/* ------------------------------------------------------------ warm-up */

/* warmup = 3: three calls fp32 (counted), then the route; per segment. */
START_TEST(test_warmup_counts)
{
    nf_segstate_t *w = nf_segstate_new();
    nf_policy_action_t act[3];
    nf_seg_t seg[3];
    nf_seg_note_t note[3];
    memset(act, 0, sizeof(act));
    act[0].warmup = 3, act[1].warmup = 1; /* adm.b: none */
    for (int call = 0; call < 5; call++) {
        three(seg, note);
        nf_warmup_apply(w, seg, note, act, 3, (uint64_t)call);
        ck_assert_int_eq(seg[0].route, call < 3 ? NF_ROUTE_FP32 : NF_ROUTE_BINARY);
        ck_assert_int_eq(note[0].warmup, call < 3);
        ck_assert_int_eq(seg[1].route, call < 1 ? NF_ROUTE_FP32 : NF_ROUTE_BINARY);
        ck_assert_int_eq(seg[2].route, NF_ROUTE_BINARY);
    }
    nf_segstate_free(w);
}
END_TEST

/* Saved after `cut` calls and loaded into a new table (new ids: the names
 * are interned again), the counts go on as the uninterrupted ones. */
START_TEST(test_warmup_ckpt)
{
    const int cut = _i;
    nf_segstate_t *w = nf_segstate_new(), *r = nf_segstate_new();
    nf_policy_action_t act[3];
    nf_seg_t seg[3];
    nf_seg_note_t note[3];
    memset(act, 0, sizeof(act));
    act[0].warmup = act[1].warmup = act[2].warmup = 4;
    for (int call = 0; call < cut; call++) {
        three(seg, note);
        nf_warmup_apply(w, seg, note, act, 3, (uint64_t)call);
    }
    nf_wbuf_t b = {0};
    nf_warmup_save(w, &b);
    ck_assert(!b.bad);
    nf_rbuf_t check = {b.p, b.n, 0}, load = {b.p, b.n, 0};
    ck_assert_int_eq(nf_warmup_load(NULL, &check, 0), 0);
    ck_assert_uint_eq(check.at, b.n);
    ck_assert_int_eq(nf_warmup_load(r, &load, 1), 0);
    for (int call = cut; call < 6; call++) {
        nf_seg_t s2[3];
        nf_seg_note_t n2[3];
        three(seg, note);
        three(s2, n2);
        nf_warmup_apply(w, seg, note, act, 3, (uint64_t)call);
        nf_warmup_apply(r, s2, n2, act, 3, (uint64_t)call);
        for (int i = 0; i < 3; i++)
            ck_assert_msg(seg[i].route == s2[i].route, "cut %d, call %d, segment %d: %d vs %d",
                          cut, call, i, seg[i].route, s2[i].route);
    }
    free(b.p);
    nf_segstate_free(w);
    nf_segstate_free(r);
}
END_TEST

/* A part cut short anywhere, or claiming more records than it holds or
 * records of another size, is refused by the check. */
START_TEST(test_warmup_ckpt_malformed)
{
    nf_segstate_t *w = nf_segstate_new();
    nf_policy_action_t act[3];
    nf_seg_t seg[3];
    nf_seg_note_t note[3];
    memset(act, 0, sizeof(act));
    act[0].warmup = act[1].warmup = act[2].warmup = 4;
    three(seg, note);
    nf_warmup_apply(w, seg, note, act, 3, 0);
    nf_wbuf_t b = {0};
    nf_warmup_save(w, &b);
    for (size_t cutlen = 0; cutlen < b.n; cutlen++) {
        nf_rbuf_t r = {b.p, cutlen, 0};
        ck_assert_msg(nf_warmup_load(NULL, &r, 0) != 0, "cut at %zu accepted", cutlen);
    }
    unsigned char *bad = malloc(b.n);
    memcpy(bad, b.p, b.n);
    bad[0] = 0xff; /* records: 255 */
    nf_rbuf_t r = {bad, b.n, 0};
    ck_assert_int_ne(nf_warmup_load(NULL, &r, 0), 0);
    memcpy(bad, b.p, b.n);
    bad[8] = 4; /* record bytes: 4, not 8 */
    r = (nf_rbuf_t){bad, b.n, 0};
    ck_assert_int_ne(nf_warmup_load(NULL, &r, 0), 0);
    free(bad);
    free(b.p);
    nf_segstate_free(w);
}
END_TEST

/* ------------------------------------------------------------- health */

static const nf_policy_health_t hcfg = {
    .on = 1, .cooldown = 3, .cooldown_max = 6, .loss_spike = 2.0, .loss_window = 4,
    .ef_growth = 4.0,
};

/* One call: apply, then observe with loss; the routes that ran. */
static void hcall(nf_health_comm_t *h, int call, double loss, double ratio, nf_route_t *ran,
                  int *restart)
{
    nf_seg_t seg[3];
    nf_seg_note_t note[3];
    three(seg, note);
    nf_health_apply(h, seg, note, 3, (uint64_t)call);
    for (int i = 0; i < 3; i++) {
        ran[i] = seg[i].route;
        restart[i] = seg[i].resid == NF_RESID_RESTART;
        seg[i].ef_ratio = i == 1 ? ratio : 0.1;
    }
    nf_health_observe(h, seg, note, 3, loss, (uint64_t)call);
}

/* A loss spike cools every segment for `cooldown` calls, then each
 * re-enters once with its residual started over; a second spike soon
 * after doubles the cool-down. ef_growth cools that segment alone. */
START_TEST(test_health_schedule)
{
    nf_health_init(&hcfg);
    nf_segstate_t *st = nf_segstate_new();
    nf_health_comm_t *h = nf_health_comm_new(st);
    nf_route_t ran[3];
    int restart[3];
    for (int call = 0; call < 4; call++)
        hcall(h, call, 1.0, 0.1, ran, restart);
    ck_assert_int_eq(ran[0], NF_ROUTE_BINARY);
    hcall(h, 4, 10.0, 0.1, ran, restart); /* the spike: seen after this call */
    for (int call = 5; call < 8; call++) {
        hcall(h, call, 1.0, 0.1, ran, restart);
        for (int i = 0; i < 3; i++)
            ck_assert_msg(ran[i] == NF_ROUTE_FP32, "call %d segment %d not cooling", call, i);
    }
    hcall(h, 8, 1.0, 0.1, ran, restart);
    for (int i = 0; i < 3; i++)
        ck_assert(ran[i] == NF_ROUTE_BINARY && restart[i] == 1);
    hcall(h, 9, 1.0, 9.0, ran, restart); /* the gap's residual grew */
    ck_assert(restart[0] == 0);
    hcall(h, 10, 1.0, 0.1, ran, restart);
    ck_assert_int_eq(ran[1], NF_ROUTE_FP32);
    ck_assert_int_eq(ran[0], NF_ROUTE_BINARY);
    nf_health_comm_free(h);
    nf_segstate_free(st);
}
END_TEST

/* Saved at call `cut` (inside or around a cool-down) and loaded into a
 * new table, the routes and restarts go on as the uninterrupted run's. */
START_TEST(test_health_ckpt)
{
    const int cut = 3 + _i;
    nf_health_init(&hcfg);
    nf_segstate_t *st = nf_segstate_new(), *st2 = nf_segstate_new();
    nf_health_comm_t *h = nf_health_comm_new(st), *r = nf_health_comm_new(st2);
    nf_route_t ran[3], ran2[3];
    int restart[3], restart2[3];
    double loss[14] = {1, 1.1, 1, 1.2, 10, 1, 1, 1, 1, 1, 30, 1, 1, 1};
    for (int call = 0; call < cut; call++)
        hcall(h, call, loss[call], 0.1, ran, restart);
    nf_wbuf_t b = {0};
    nf_health_comm_save(h, &b);
    nf_rbuf_t check = {b.p, b.n, 0}, load = {b.p, b.n, 0};
    ck_assert_int_eq(nf_health_comm_load(NULL, &check, 0), NF_OK);
    ck_assert_int_eq(nf_health_comm_load(r, &load, 1), NF_OK);
    for (int call = cut; call < 14; call++) {
        hcall(h, call, loss[call], 0.1, ran, restart);
        hcall(r, call, loss[call], 0.1, ran2, restart2);
        for (int i = 0; i < 3; i++)
            ck_assert_msg(ran[i] == ran2[i] && restart[i] == restart2[i],
                          "cut %d, call %d, segment %d: route %d/%d restart %d/%d", cut, call,
                          i, ran[i], ran2[i], restart[i], restart2[i]);
    }
    /* another loss window than the policy's: refused */
    nf_policy_health_t other = hcfg;
    other.loss_window = 2;
    nf_health_init(&other);
    nf_rbuf_t again = {b.p, b.n, 0};
    ck_assert_int_eq(nf_health_comm_load(NULL, &again, 0), NF_ERR_PARSE);
    free(b.p);
    nf_health_comm_free(h);
    nf_health_comm_free(r);
    nf_segstate_free(st);
    nf_segstate_free(st2);
}
END_TEST

/* One record per segment holds both parts: warm-up counts on segments
 * health has never seen do not make them health's (a loss spike cools
 * only what health watched), and each part saved and loaded alone leaves
 * the other as it was. */
START_TEST(test_segstate_parts)
{
    nf_health_init(&hcfg);
    nf_segstate_t *st = nf_segstate_new(), *st2 = nf_segstate_new();
    nf_health_comm_t *h = nf_health_comm_new(st), *h2 = nf_health_comm_new(st2);
    nf_policy_action_t act[3];
    nf_seg_t seg[3];
    nf_seg_note_t note[3];
    memset(act, 0, sizeof(act));
    act[2].warmup = 5; /* adm.b warms up; the others have none */
    three(seg, note);
    nf_warmup_apply(st, seg, note, act, 3, 0);
    ck_assert_uint_eq(nf_segstate_count(st), 1);
    ck_assert_ptr_null(nf_segstate_get(st, seg, 3, 2, NF_SEG_HEALTH, 0));
    /* health sees segments 0 and 1 only: the warming one ran fp32 */
    three(seg, note);
    seg[2].route = NF_ROUTE_FP32;
    for (int i = 0; i < 3; i++)
        seg[i].ef_ratio = 0.1;
    nf_health_observe(h, seg, note, 3, 1.0, 0);
    three(seg, note);
    seg[2].route = NF_ROUTE_FP32;
    nf_health_observe(h, seg, note, 3, 50.0, 1); /* a spike */
    nf_segrec_t *r2 = nf_segstate_get(st, seg, 3, 2, NF_SEG_WARMUP, 0);
    ck_assert_ptr_nonnull(r2);
    ck_assert(!(r2->parts & NF_SEG_HEALTH) && r2->health.left == 0 && r2->warm == 1);
    ck_assert_uint_gt(nf_segstate_get(st, seg, 3, 0, NF_SEG_HEALTH, 0)->health.left, 0);
    /* health's part alone into a table that already counts a warm-up */
    for (int call = 0; call < 2; call++) {
        three(seg, note);
        nf_warmup_apply(st2, seg, note, act, 3, (uint64_t)call);
    }
    nf_wbuf_t b = {0};
    nf_health_comm_save(h, &b);
    nf_rbuf_t load = {b.p, b.n, 0};
    ck_assert_int_eq(nf_health_comm_load(h2, &load, 1), NF_OK);
    three(seg, note);
    ck_assert_uint_eq(nf_segstate_get(st2, seg, 3, 2, NF_SEG_WARMUP, 0)->warm, 2);
    ck_assert_uint_eq(nf_segstate_get(st2, seg, 3, 0, NF_SEG_HEALTH, 0)->health.left,
                      nf_segstate_get(st, seg, 3, 0, NF_SEG_HEALTH, 0)->health.left);
    /* the warm-up part alone: replaces the counts, keeps the cool-downs */
    nf_wbuf_t w = {0};
    nf_warmup_save(st, &w);
    nf_rbuf_t wl = {w.p, w.n, 0};
    ck_assert_int_eq(nf_warmup_load(st2, &wl, 1), NF_OK);
    ck_assert_uint_eq(nf_segstate_get(st2, seg, 3, 2, NF_SEG_WARMUP, 0)->warm, 1);
    ck_assert_uint_gt(nf_segstate_get(st2, seg, 3, 0, NF_SEG_HEALTH, 0)->health.left, 0);
    free(b.p);
    free(w.p);
    nf_health_comm_free(h);
    nf_health_comm_free(h2);
    nf_segstate_free(st);
    nf_segstate_free(st2);
}
END_TEST

/* Each part holds at most NF_SEGSTATE_PART_MAX segments, whatever the
 * other holds: a checkpoint part stays within what each table held alone. */
START_TEST(test_segstate_bound)
{
    nf_segstate_t *st = nf_segstate_new();
    nf_seg_t g = {.route = NF_ROUTE_BINARY};
    for (size_t m = 1; m <= NF_SEGSTATE_PART_MAX; m++) {
        g.m = m;
        ck_assert_ptr_nonnull(nf_segstate_get(st, &g, 1, 0, NF_SEG_WARMUP, 1));
    }
    g.m = NF_SEGSTATE_PART_MAX + 1;
    ck_assert_ptr_null(nf_segstate_get(st, &g, 1, 0, NF_SEG_WARMUP, 1));
    ck_assert_ptr_nonnull(nf_segstate_get(st, &g, 1, 0, NF_SEG_HEALTH, 1));
    g.m = 1; /* a record with the warm-up part takes the health part too */
    ck_assert_ptr_nonnull(nf_segstate_get(st, &g, 1, 0, NF_SEG_HEALTH, 1));
    nf_segstate_free(st);
}
END_TEST

/* ------------------------------------------------- decision cache */

static nf_dkey_t dkey(uint64_t size)
{
    return (nf_dkey_t){.x = NULL, .size = size, .gen = 0, .dt = NF_DT_FLOAT, .op = NF_OP_SUM,
                       .fsum = 1};
}

/* Keys that differ in any field are different decisions; a kept one is
 * found again, a scratch one never. */
START_TEST(test_dcache_keys)
{
    static nf_dcache_t c;
    static float buf[4];
    nf_dkey_t k = dkey(400), other[6];
    for (int i = 0; i < 6; i++)
        other[i] = k;
    other[0].x = buf, other[1].size = 404, other[2].gen = 3, other[3].dt = NF_DT_DOUBLE;
    other[4].op = NF_OP_MAX, other[5].fsum = 0;
    nf_drec_t *r = nf_dcache_take(&c, &k, 1);
    ck_assert_ptr_eq(nf_dcache_find(&c, &k), r);
    for (int i = 0; i < 6; i++)
        ck_assert_msg(nf_dcache_find(&c, &other[i]) == NULL, "key %d found as another's", i);
    nf_drec_t *s = nf_dcache_take(&c, &other[1], 0);
    ck_assert_ptr_eq(s, &c.scratch);
    ck_assert_ptr_null(nf_dcache_find(&c, &other[1]));
    ck_assert_uint_gt(s->fill, r->fill);
    /* dropped (not made whole): run from the scratch record, not kept */
    ck_assert_ptr_eq(nf_dcache_drop(&c, r), &c.scratch);
    ck_assert_ptr_null(nf_dcache_find(&c, &k));
    nf_dcache_free(&c);
}
END_TEST

/* A full set replaces its oldest decision; the other sets keep theirs. */
START_TEST(test_dcache_sets)
{
    static nf_dcache_t c;
    nf_dkey_t same[NF_DCACHE_WAYS + 1], elsewhere = dkey(0);
    int n = 0;
    for (uint64_t size = 1; n < NF_DCACHE_WAYS + 1; size++) {
        nf_dkey_t k = dkey(size);
        if (nf_dcache_set_of(&k) == 5)
            same[n++] = k;
        else if (elsewhere.size == 0)
            elsewhere = k;
    }
    nf_dcache_take(&c, &elsewhere, 1);
    for (int i = 0; i <= NF_DCACHE_WAYS; i++)
        nf_dcache_take(&c, &same[i], 1);
    ck_assert_ptr_null(nf_dcache_find(&c, &same[0])); /* the oldest of its set */
    for (int i = 1; i <= NF_DCACHE_WAYS; i++)
        ck_assert_ptr_nonnull(nf_dcache_find(&c, &same[i]));
    ck_assert_ptr_nonnull(nf_dcache_find(&c, &elsewhere));
    nf_dcache_free(&c);
}
END_TEST

/* At most NF_DCACHE_CUTS kept decisions hold segments: a new one frees
 * the oldest such; decisions without segments do not count. Every key
 * in a set of its own, so no set replaces one. */
START_TEST(test_dcache_cuts)
{
    static nf_dcache_t c;
    nf_dkey_t k[NF_DCACHE_CUTS + 2];
    unsigned used = 0;
    int n = 0;
    for (uint64_t size = 1; n < NF_DCACHE_CUTS + 2; size++) {
        nf_dkey_t t = dkey(size);
        if (used & (1u << nf_dcache_set_of(&t)))
            continue;
        used |= 1u << nf_dcache_set_of(&t);
        k[n++] = t;
    }
    nf_drec_t *small = nf_dcache_take(&c, &k[0], 1); /* the oldest: no segments */
    nf_dcache_bound(&c, small);
    for (int i = 1; i < NF_DCACHE_CUTS + 2; i++) {
        nf_drec_t *r = nf_dcache_take(&c, &k[i], 1);
        r->d.seg = calloc(1, sizeof(*r->d.seg)), r->d.cap = 1; /* a cut's segments */
        nf_dcache_bound(&c, r);
        ck_assert_ptr_eq(nf_dcache_find(&c, &k[i]), r);
    }
    int kept = 0;
    for (unsigned i = 0; i < NF_DCACHE_SETS * NF_DCACHE_WAYS; i++)
        kept += c.rec[i].fill != 0 && c.rec[i].d.cap > 0;
    ck_assert_int_eq(kept, NF_DCACHE_CUTS);
    ck_assert_ptr_nonnull(nf_dcache_find(&c, &k[0]));
    ck_assert_ptr_null(nf_dcache_find(&c, &k[1])); /* the oldest holding segments */
    nf_dcache_free(&c);
}
END_TEST

/* A plan takes a decision's segments as matched: a layout entry's name
 * interned, the routes and actions; each call starts from them. */
START_TEST(test_plan_take)
{
    nf_plan_t p = {0};
    nf_decide_seg_t ds[2] = {
        {.off = 0, .m = 30, .name = "adm.lay", .route = NF_ROUTE_TERNARY},
        {.off = 30, .m = 10, .name = NULL, .route = NF_ROUTE_FP32},
    };
    ds[0].act.ef = 1, ds[0].act.scale_block = 512, ds[0].why.why = NF_WHY_PROFILE;
    ds[1].act.block = 256; /* an integer route's scale block goes to its segment as matched */
    nf_decide_t d = {.cut = NF_CUT_FUSED, .seg = ds, .nseg = 2};
    ck_assert_int_eq(nf_plan_take(&p, &d, 0), 2);
    nf_plan_start(&p);
    ck_assert_uint_eq(p.seg[0].id, nf_intern("adm.lay"));
    ck_assert_str_eq(p.seg[0].name, "adm.lay");
    ck_assert(p.seg[0].route == NF_ROUTE_TERNARY && p.seg[0].ef == 1 &&
              p.seg[0].scale_block == 512 && p.note[0].why.why == NF_WHY_PROFILE);
    ck_assert(p.seg[1].id == 0 && p.seg[1].off == 30 && p.seg[1].route == NF_ROUTE_FP32);
    ck_assert(p.seg[0].block == 0 && p.seg[1].block == 256);
    p.seg[0].route = NF_ROUTE_FP32; /* what a call's warm-up or health writes */
    nf_plan_start(&p);
    ck_assert_int_eq(p.seg[0].route, NF_ROUTE_TERNARY);
    nf_plan_free(&p);
}
END_TEST

static Suite *admit_suite(void)
{
    Suite *s = suite_create("admit");
    TCase *t = tcase_create("segtab");
    tcase_add_test(t, test_segtab_keys);
    suite_add_tcase(s, t);
    t = tcase_create("warmup");
    tcase_add_test(t, test_warmup_counts);
    tcase_add_loop_test(t, test_warmup_ckpt, 0, 6);
    tcase_add_test(t, test_warmup_ckpt_malformed);
    suite_add_tcase(s, t);
    t = tcase_create("health");
    tcase_add_test(t, test_health_schedule);
    tcase_add_loop_test(t, test_health_ckpt, 0, 9);
    suite_add_tcase(s, t);
    t = tcase_create("dcache");
    tcase_add_test(t, test_dcache_keys);
    tcase_add_test(t, test_dcache_sets);
    tcase_add_test(t, test_dcache_cuts);
    tcase_add_test(t, test_plan_take);
    suite_add_tcase(s, t);
    t = tcase_create("segstate");
    tcase_add_test(t, test_segstate_parts);
    tcase_add_test(t, test_segstate_bound);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(admit_suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
