/* The admission trace (nf_trace.h). Buffered: no I/O per call until the
 * buffer fills. */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "nf_file.h"
#include "nf_log.h"
#include "nf_trace.h"

static nf_wfile_t nf_trace_f;
static int nf_trace_open_;
static pthread_mutex_t nf_trace_lock = PTHREAD_MUTEX_INITIALIZER;

void nf_trace_open(const char *path, int rank)
{
    char name[4096];
    const char *r = strstr(path, "%r");
    if (r != NULL)
        snprintf(name, sizeof(name), "%.*s%d%s", (int)(r - path), path, rank, r + 2);
    else
        snprintf(name, sizeof(name), "%s.%d", path, rank);
    if (nf_wfile_open(&nf_trace_f, name) != NF_OK || nf_wfile_publish(&nf_trace_f) != NF_OK) {
        if (nf_trace_f.fp != NULL)
            nf_wfile_abort(&nf_trace_f);
        nf_log_warn("cannot create NFCOLL_TRACE file %s; no trace is written", name);
        return;
    }
    setvbuf(nf_trace_f.fp, NULL, _IOFBF, 1 << 20);
    fprintf(nf_trace_f.fp, "# libnfcoll trace v2\n# rank call comm comm_size datatype op "
            "bytes route rule where region offset elements ran\n");
    nf_trace_open_ = 1;
}

int nf_trace_on(void) { return nf_trace_open_; }

void nf_trace_record(int rank, const nf_policy_query_t *q, nf_route_t route,
                     const nf_policy_action_t *a, const char *region, uint64_t offset,
                     uint64_t elements, nf_route_t ran)
{
    pthread_mutex_lock(&nf_trace_lock);
    if (nf_trace_open_)
        fprintf(nf_trace_f.fp, "%d %llu %s %d %s %s %llu %s %s %s:%d %s %llu %llu %s\n", rank,
                (unsigned long long)q->call, q->comm_name && q->comm_name[0] ? q->comm_name : "-",
                q->comm_size, nf_dtype_name(q->datatype), nf_opkind_name(q->op),
                (unsigned long long)q->bytes, nf_route_name(route), a->rule,
                a->file[0] ? a->file : "-", a->line, region != NULL ? region : "-",
                (unsigned long long)offset, (unsigned long long)elements, nf_route_name(ran));
    pthread_mutex_unlock(&nf_trace_lock);
}

void nf_trace_close(void)
{
    pthread_mutex_lock(&nf_trace_lock);
    if (nf_trace_open_ && nf_wfile_commit(&nf_trace_f) != NF_OK)
        nf_log_warn("writing the NFCOLL_TRACE file failed");
    nf_trace_open_ = 0;
    pthread_mutex_unlock(&nf_trace_lock);
}
