/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every datatype the policy language accepts decides a real call of that
 * datatype: with --policy FILE, write a policy with one rule per datatype
 * name (nf_types.h, the table admission and the policy share); with
 * --calls FILE, make one MPI_Allreduce per MPI handle of the table (aliases,
 * a derived type and an unnamed predefined one included) and write, for
 * rank 0, "CALL RULE" lines: the rule the trace must name for each call.
 * tests/mpi_datatypes.sh compares them with NFCOLL_TRACE.
 * With --reuse, two sums of 4 elements of derived types of 2 and then 8
 * floats, the first type freed before the second is made, so that MPI
 * may give the second the first one's handle: the trace must show 32 and
 * then 128 bytes. Prints "note: ..." when MPI never reused the handle.
 */
#include <stdio.h>
#include <string.h>

#include <mpi.h>

#include "nf_types.h"

#define NF_NO_HANDLE MPI_DATATYPE_NULL
#define NF_X(e, s, h) {s, h},
static const struct { const char *name; MPI_Datatype h; } canon[] = {NF_DATATYPES(NF_X)};
#undef NF_X
/* Aliases decide as their canonical name (rule of that enum). */
#define NF_X(e, s, h) {#e, h},
static const struct { const char *en; MPI_Datatype h; } alias[] = {NF_DATATYPE_ALIASES(NF_X)};
#undef NF_X
#define NF_X(e, s, h) {#e, s},
static const struct { const char *en; const char *name; } enames[] = {NF_DATATYPES(NF_X)};
#undef NF_X

static void rule_name(const char *dt, char *out, size_t len)
{
    snprintf(out, len, "dt_%s", dt);
}

static int write_policy(const char *path)
{
    FILE *fp = fopen(path, "w");
    if (fp == NULL)
        return 1;
    fprintf(fp, "[policy]\nversion = 1\n");
    for (size_t i = 0; i < sizeof(canon) / sizeof(canon[0]); i++) {
        char r[64];
        rule_name(canon[i].name, r, sizeof(r));
        fprintf(fp, "[rule %s]\ndatatype = %s\nroute = pmpi\n", r, canon[i].name);
    }
    return fclose(fp) != 0;
}

/* An op MPI accepts for the datatype, so the call completes. */
static MPI_Op op_for(const char *dt)
{
    if (strstr(dt, "_int") != NULL || strcmp(dt, "2int") == 0)
        return MPI_MAXLOC;
    if (strcmp(dt, "c_bool") == 0 || strcmp(dt, "logical") == 0)
        return MPI_LOR;
    if (strcmp(dt, "byte") == 0)
        return MPI_BOR;
    return MPI_SUM;
}

static int call(FILE *out, int rank, int *ncall, const char *dt, MPI_Datatype h)
{
    char r[64];
    long double in[8] = {0}, res[8];
    if (h == MPI_DATATYPE_NULL)
        return 0;
    /* Some (wchar, packed, derived) no MPI op takes: the decision is made
     * and traced before MPI says so, and every rank sees the same error. */
    MPI_Allreduce(in, res, 1, h, op_for(dt), MPI_COMM_WORLD);
    rule_name(dt, r, sizeof(r));
    if (rank == 0)
        fprintf(out, "%d %s\n", (*ncall)++, r);
    return 0;
}

static const char *name_of_enum(const char *en)
{
    for (size_t i = 0; i < sizeof(enames) / sizeof(enames[0]); i++)
        if (strcmp(enames[i].en, en) == 0)
            return enames[i].name;
    return "?";
}

static int make_calls(const char *path)
{
    int rank, n = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    FILE *out = rank == 0 ? fopen(path, "w") : NULL;
    if (rank == 0 && out == NULL)
        return 1;
    for (size_t i = 0; i < sizeof(canon) / sizeof(canon[0]); i++)
        call(out, rank, &n, canon[i].name, canon[i].h);
    for (size_t i = 0; i < sizeof(alias) / sizeof(alias[0]); i++)
        call(out, rank, &n, name_of_enum(alias[i].en), alias[i].h);
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    call(out, rank, &n, "derived", pair);
    MPI_Type_free(&pair);
    call(out, rank, &n, "other", MPI_PACKED);
    return out != NULL && fclose(out) != 0;
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int size = 0;
    MPI_Type_size(*dt, &size);
    for (int i = 0; i < *len * size / (int)sizeof(float); i++)
        ((float *)inout)[i] += ((const float *)in)[i];
}

/* A derived type of n floats whose handle is was's, when MPI reuses it
 * within a few tries (the others are freed); MPI_DATATYPE_NULL if not. */
static MPI_Datatype same_handle(int n, MPI_Datatype was)
{
    MPI_Datatype t[16];
    int k = 0, found = -1;
    for (; k < 16 && found < 0; k++) {
        MPI_Type_contiguous(n, MPI_FLOAT, &t[k]);
        MPI_Type_commit(&t[k]);
        if (t[k] == was)
            found = k;
    }
    for (int i = 0; i < k; i++)
        if (i != found)
            MPI_Type_free(&t[i]);
    return found >= 0 ? t[found] : MPI_DATATYPE_NULL;
}

static int reuse(void)
{
    float in[32] = {0}, out[32];
    MPI_Datatype a, b, was;
    MPI_Op op;
    MPI_Comm other; /* agrees apart: the world's last call stays the first's */
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_dup(MPI_COMM_WORLD, &other);
    MPI_Op_create(user_sum, 1, &op);
    MPI_Type_contiguous(2, MPI_FLOAT, &a);
    MPI_Type_commit(&a);
    MPI_Allreduce(in, out, 4, a, op, MPI_COMM_WORLD);
    was = a;
    MPI_Type_free(&a);
    b = same_handle(8, was);
    /* Every rank must make the same calls: agree on whether it was reused. */
    int got = b != MPI_DATATYPE_NULL, all = 0;
    MPI_Allreduce(&got, &all, 1, MPI_INT, MPI_MIN, other);
    if (!all) {
        if (rank == 0)
            printf("note: MPI gave the second derived type another handle\n");
        if (b != MPI_DATATYPE_NULL)
            MPI_Type_free(&b);
        MPI_Type_contiguous(8, MPI_FLOAT, &b);
        MPI_Type_commit(&b);
    }
    MPI_Allreduce(in, out, 4, b, op, MPI_COMM_WORLD);
    MPI_Type_free(&b);
    MPI_Op_free(&op);
    MPI_Comm_free(&other);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--reuse") == 0) {
        MPI_Init(&argc, &argv);
        int rc = reuse();
        MPI_Finalize();
        return rc;
    }
    if (argc == 3 && strcmp(argv[1], "--policy") == 0)
        return write_policy(argv[2]);
    if (argc != 3 || strcmp(argv[1], "--calls") != 0) {
        fprintf(stderr, "usage: test_datatypes --policy FILE | --calls FILE\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    int rc = make_calls(argv[2]);
    MPI_Finalize();
    return rc;
}
