/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The NFCOLL_TRACE format, defined once: written by lib/admit/trace.c,
 * read by tools/trace_read.c (nfcoll_replay). One line per admitted call
 * and rank, or per segment of a fused call; fields separated by one space.
 * Documented in nfcoll-policy(5).
 */
#ifndef NF_TRACEFMT_H
#define NF_TRACEFMT_H

#define NF_TRACE_MAGIC "# libnfcoll trace v"
#define NF_TRACE_VERSION 4
#define NF_TRACE_COLUMNS "rank call comm comm_size datatype op bytes route rule where region " \
                         "offset elements ran health why fallback"
#define NF_TRACE_NCOLUMNS 17 /* the words of NF_TRACE_COLUMNS (v3: the first 15) */

#define NF_TRACE_STR_(v) #v
#define NF_TRACE_STR(v) NF_TRACE_STR_(v)
/* The first two lines of a trace. */
#define NF_TRACE_HEADER NF_TRACE_MAGIC NF_TRACE_STR(NF_TRACE_VERSION) "\n# " NF_TRACE_COLUMNS "\n"

/* One record, for printf: rank call comm comm_size datatype op bytes route
 * rule file:line region offset elements ran health why fallback (the
 * strings "-" when there is none). why is admission's reason for route
 * (nf_decide_why_name), with a profile entry's figures after a colon:
 * profile:cos_binary=B,cos_ternary=T or stale-entry:elements=N; an entry
 * of a v3 profile adds ,cos_int4=I (its int4 cosine) after T. The reader
 * checks only the name before the colon. */
#define NF_TRACE_LINE "%d %llu %s %d %s %s %llu %s %s %s:%d %s %llu %llu %s %s %s %s\n"

#endif
