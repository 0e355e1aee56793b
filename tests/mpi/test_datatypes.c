/*
 * Every datatype the policy language accepts decides a real call of that
 * datatype: with --policy FILE, write a policy with one rule per datatype
 * name (nf_types.h, the table admission and the policy share); with
 * --calls FILE, make one MPI_Allreduce per MPI handle of the table (aliases,
 * a derived type and an unnamed predefined one included) and write, for
 * rank 0, "CALL RULE" lines: the rule the trace must name for each call.
 * tests/mpi_datatypes.sh compares them with NFCOLL_TRACE.
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

int main(int argc, char **argv)
{
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
