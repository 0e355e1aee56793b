/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The one table of MPI predefined datatypes and reduction ops libnfcoll
 * names: the policy language (`datatype =`, `op =`), admission (MPI handle
 * to enum, lib/admit/handles.c), the trace and the tools all use it, so a
 * name the policy accepts is a name a call can have.
 *
 * No MPI here: the third column is an MPI handle written as a token, only
 * expanded by code that includes mpi.h. Datatypes with no handle of their
 * own (derived, other) use NF_NO_HANDLE.
 */
#ifndef NF_TYPES_H
#define NF_TYPES_H

/* X(ENUM, "name", MPI handle) in a fixed order: the enum values are hashed
 * into policies and written into traces, so append only. */
#define NF_DATATYPES(X)                                            \
    X(FLOAT, "float", MPI_FLOAT)                                   \
    X(DOUBLE, "double", MPI_DOUBLE)                                \
    X(LONG_DOUBLE, "long_double", MPI_LONG_DOUBLE)                 \
    X(CHAR, "char", MPI_CHAR)                                      \
    X(SIGNED_CHAR, "signed_char", MPI_SIGNED_CHAR)                 \
    X(UNSIGNED_CHAR, "unsigned_char", MPI_UNSIGNED_CHAR)           \
    X(BYTE, "byte", MPI_BYTE)                                      \
    X(SHORT, "short", MPI_SHORT)                                   \
    X(UNSIGNED_SHORT, "unsigned_short", MPI_UNSIGNED_SHORT)        \
    X(INT, "int", MPI_INT)                                         \
    X(UNSIGNED, "unsigned", MPI_UNSIGNED)                          \
    X(LONG, "long", MPI_LONG)                                      \
    X(UNSIGNED_LONG, "unsigned_long", MPI_UNSIGNED_LONG)           \
    X(LONG_LONG, "long_long", MPI_LONG_LONG)                       \
    X(UNSIGNED_LONG_LONG, "unsigned_long_long", MPI_UNSIGNED_LONG_LONG) \
    X(WCHAR, "wchar", MPI_WCHAR)                                   \
    X(C_BOOL, "c_bool", MPI_C_BOOL)                                \
    X(INT8_T, "int8_t", MPI_INT8_T)                                \
    X(INT16_T, "int16_t", MPI_INT16_T)                             \
    X(INT32_T, "int32_t", MPI_INT32_T)                             \
    X(INT64_T, "int64_t", MPI_INT64_T)                             \
    X(UINT8_T, "uint8_t", MPI_UINT8_T)                             \
    X(UINT16_T, "uint16_t", MPI_UINT16_T)                          \
    X(UINT32_T, "uint32_t", MPI_UINT32_T)                          \
    X(UINT64_T, "uint64_t", MPI_UINT64_T)                          \
    X(AINT, "aint", MPI_AINT)                                      \
    X(OFFSET, "offset", MPI_OFFSET)                                \
    X(COUNT, "count", MPI_COUNT)                                   \
    X(C_FLOAT_COMPLEX, "c_float_complex", MPI_C_FLOAT_COMPLEX)     \
    X(C_DOUBLE_COMPLEX, "c_double_complex", MPI_C_DOUBLE_COMPLEX)  \
    X(C_LONG_DOUBLE_COMPLEX, "c_long_double_complex", MPI_C_LONG_DOUBLE_COMPLEX) \
    X(FLOAT_INT, "float_int", MPI_FLOAT_INT)                       \
    X(DOUBLE_INT, "double_int", MPI_DOUBLE_INT)                    \
    X(LONG_INT, "long_int", MPI_LONG_INT)                          \
    X(TWO_INT, "2int", MPI_2INT)                                   \
    X(SHORT_INT, "short_int", MPI_SHORT_INT)                       \
    X(LONG_DOUBLE_INT, "long_double_int", MPI_LONG_DOUBLE_INT)     \
    X(REAL, "real", MPI_REAL)                                      \
    X(DOUBLE_PRECISION, "double_precision", MPI_DOUBLE_PRECISION)  \
    X(INTEGER, "integer", MPI_INTEGER)                             \
    X(LOGICAL, "logical", MPI_LOGICAL)                             \
    X(COMPLEX, "complex", MPI_COMPLEX)                             \
    X(DOUBLE_COMPLEX, "double_complex", MPI_DOUBLE_COMPLEX)        \
    X(DERIVED, "derived", NF_NO_HANDLE)                            \
    X(OTHER, "other", NF_NO_HANDLE)

/* Handles that are the same datatype under another name. */
#define NF_DATATYPE_ALIASES(X)                                     \
    X(REAL, "real4", MPI_REAL4)                                    \
    X(LONG_LONG, "long_long_int", MPI_LONG_LONG_INT)               \
    X(UNSIGNED, "unsigned_int", NF_NO_HANDLE)                      \
    X(C_FLOAT_COMPLEX, "c_complex", MPI_C_COMPLEX)                 \
    X(C_BOOL, "bool", NF_NO_HANDLE)

#define NF_OPS(X)                        \
    X(SUM, "sum", MPI_SUM)               \
    X(PROD, "prod", MPI_PROD)            \
    X(MAX, "max", MPI_MAX)               \
    X(MIN, "min", MPI_MIN)               \
    X(LAND, "land", MPI_LAND)            \
    X(LOR, "lor", MPI_LOR)               \
    X(LXOR, "lxor", MPI_LXOR)            \
    X(BAND, "band", MPI_BAND)            \
    X(BOR, "bor", MPI_BOR)               \
    X(BXOR, "bxor", MPI_BXOR)            \
    X(MAXLOC, "maxloc", MPI_MAXLOC)      \
    X(MINLOC, "minloc", MPI_MINLOC)      \
    X(REPLACE, "replace", MPI_REPLACE)   \
    X(NO_OP, "no_op", MPI_NO_OP)         \
    X(USER, "user", NF_NO_HANDLE)

#define NF_X_ENUM_DT(e, s, h) NF_DT_##e,
#define NF_X_ENUM_OP(e, s, h) NF_OP_##e,
typedef enum nf_dtype { NF_DATATYPES(NF_X_ENUM_DT) NF_DT_N } nf_dtype_t;
typedef enum nf_opkind { NF_OPS(NF_X_ENUM_OP) NF_OP_N } nf_opkind_t;
#undef NF_X_ENUM_DT
#undef NF_X_ENUM_OP

/* Canonical name ("float", "sum"); "unknown" out of range. */
const char *nf_dtype_name(nf_dtype_t dt);
const char *nf_opkind_name(nf_opkind_t op);

/* What a name lookup gives for a name it does not know. */
enum { NF_NAME_UNKNOWN = -1 };

/* Parse a name as the policy language takes it: any case, with or without
 * "MPI_", aliases included ("MPI_REAL4" -> real): the enum, or
 * NF_NAME_UNKNOWN. */
int nf_dtype_parse(const char *name);
int nf_opkind_parse(const char *name);

#endif
