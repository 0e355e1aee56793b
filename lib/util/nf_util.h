/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers every layer needs, written once: the FNV-1a hash the ranks compare
 * policies and communicator names with, and parsers for the values users
 * write (policy files, NFCOLL_* variables). No MPI calls.
 *
 * The parsers are ASCII-only and ignore the program's locale: every rank
 * must read the same text the same way, whatever setlocale() the
 * application called (a "de_DE" LC_NUMERIC must not turn "0.7" into 0).
 */
#ifndef NF_UTIL_H
#define NF_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "nfcoll.h"

/* ---------------------------------------------------------------- hash */

/** FNV-1a 64-bit offset basis (14695981039346656037): the h to start a
 * hash with. Written in hex: the decimal form is easy to mistype. */
#define NF_HASH_INIT 0xcbf29ce484222325ull

/** FNV-1a 64-bit of n bytes, continuing from h. */
uint64_t nf_hash_bytes(uint64_t h, const void *p, size_t n);

/** The bytes of s without its NUL. Hashing several strings in a row does
 * not separate them ("ab","c" hashes as "a","bc"): hash a length first
 * where that matters. */
uint64_t nf_hash_str(uint64_t h, const char *s);

/** v as 8 little-endian bytes, the same on every host. */
uint64_t nf_hash_u64(uint64_t h, uint64_t v);

/* ------------------------------------------------------ byte buffers */

/* Bytes written into a growing buffer (checkpointed state): integers
 * little-endian, the same on every host. A failed growth sets bad and
 * drops every later write; the caller checks bad once at the end. */
typedef struct nf_wbuf {
    unsigned char *p;
    size_t n, cap;
    int bad;
} nf_wbuf_t;
void nf_wbuf_put(nf_wbuf_t *b, const void *p, size_t n);
void nf_wbuf_u64(nf_wbuf_t *b, uint64_t v);
/* A string of at most 255 bytes: u8 length, the bytes (NULL: ""). */
void nf_wbuf_str(nf_wbuf_t *b, const char *s);

/* Reading them back: each get fails past the end (NF_ERR_PARSE, nothing
 * read: the bytes are truncated). */
typedef struct nf_rbuf {
    const unsigned char *p;
    size_t n, at;
} nf_rbuf_t;
nf_status_t nf_rbuf_get(nf_rbuf_t *r, void *p, size_t n);
nf_status_t nf_rbuf_u64(nf_rbuf_t *r, uint64_t *v);
/* Into s, NUL-terminated (NF_ERR_INVALID when len < 256). */
nf_status_t nf_rbuf_str(nf_rbuf_t *r, char *s, size_t len);

/* ------------------------------------------------------------- parsers */

/* Each parser returns NF_OK, or NF_ERR_INVALID for NULL or text it does not
 * take (*out untouched); nf_parse_long and nf_parse_size say
 * NF_ERR_CAPACITY for digits past what their type holds. */

/** on/off, 1/0, yes/no, true/false in any case: *out = 1 or 0. */
nf_status_t nf_parse_bool(const char *s, int *out);

/** A decimal integer, [+-]digits, nothing else (no spaces, no 0x), within
 * lo..hi (NF_ERR_INVALID outside). */
nf_status_t nf_parse_long(const char *s, long lo, long hi, long *out);

/** A finite decimal number, [+-]digits[.digits][(e|E)[+-]digits] (digits
 * may be missing on one side of the point), with '.' as the point whatever
 * LC_NUMERIC says. No inf, nan, hex or spaces; overflow and underflow are
 * NF_ERR_INVALID (NF_ERR_NO_MEMORY: no C locale could be made). */
nf_status_t nf_parse_double(const char *s, double *out);

/** v as "%.4f" with '.' as the point whatever LC_NUMERIC says (what
 * nf_parse_double reads back), into buf; returns buf. */
char *nf_format_fixed4(char *buf, size_t len, double v);

/** A byte count: decimal digits with an optional binary suffix K, M, G or T
 * (any case, optionally followed by "i" and/or "B": 64M, 64MiB, 64mb);
 * nothing else. NF_ERR_CAPACITY above UINT64_MAX bytes. */
nf_status_t nf_parse_size(const char *s, uint64_t *out);

/* --------------------------------------------------------------- ASCII */

/* <ctype.h> consults the locale; these do not. */
static inline int nf_ascii_isspace(int c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static inline int nf_ascii_isdigit(int c) { return c >= '0' && c <= '9'; }
static inline int nf_ascii_lower(int c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }
static inline int nf_ascii_isalnum(int c)
{
    return nf_ascii_isdigit(c) || (nf_ascii_lower(c) >= 'a' && nf_ascii_lower(c) <= 'z');
}

/** Equal but for ASCII case (strcasecmp depends on the locale). */
int nf_strcaseeq(const char *a, const char *b);

#endif /* NF_UTIL_H */
