/*
 * libFuzzer harness for the policy parser and matcher (make fuzz). Any input
 * must either load or be refused with diagnostics; a loaded policy must match,
 * explain and hash without faults. The input's last bytes also feed the
 * query strings, so the glob matcher sees hostile names; datatypes and ops
 * run over their enums and one past (not known).
 */
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nf_policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void ignore(const nf_policy_diag_t *d, void *arg)
{
    size_t *n = arg;
    *n += strlen(d->message) + strlen(d->file);
}

/* Past nf_policy_calls_settled, the call index changes nothing; the size
 * class is a search over the policy's bounds, which must stay in them. */
static void settled_check(const nf_policy_t *p, const nf_policy_query_t *q, const nf_policy_action_t *a)
{
    nf_policy_query_t later = *q;
    nf_policy_action_t b;

    (void)nf_policy_size_class(p, q->bytes);
    if (q->call < nf_policy_calls_settled(p))
        return;
    later.call = q->call + 1000;
    nf_policy_match(p, &later, &b);
    if (b.index != a->index)
        __builtin_trap();
}

static void exercise(const nf_policy_t *p, const uint8_t *data, size_t size)
{
    char name[64], buf[512];
    size_t n = size < sizeof(name) - 1 ? size : sizeof(name) - 1;
    nf_policy_action_t a;

    memcpy(name, data + size - n, n);
    name[n] = '\0';
    for (unsigned i = 0; i < 40; i++) {
        nf_policy_query_t q = {
            i % 3 == 0 ? NULL : name, i % 2 ? "MPI_COMM_WORLD" : name, (int)(i % 9),
            (nf_dtype_t)(i * 7 % (NF_DT_N + 1)), (nf_opkind_t)(i * 3 % (NF_OP_N + 1)),
            (uint64_t)1 << (i % 34), i % 7};
        nf_policy_match(p, &q, &a);
        if (a.route >= NF_ROUTE_COUNT || a.rule == NULL || a.file == NULL)
            __builtin_trap();
        settled_check(p, &q, &a);
        if (i % 8 == 0)
            nf_policy_explain(p, &q, &a, buf, sizeof(buf));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nf_policy_t *p = NULL;
    size_t sink = 0;

    if (nf_policy_parse((const char *)data, size, "fuzz.policy", ignore, &sink, &p) == NF_OK) {
        if (p == NULL || nf_policy_hash(p) == 0)
            __builtin_trap();
        exercise(p, data, size);
        nf_policy_free(p);
    } else if (p != NULL) {
        __builtin_trap();
    }
    return 0;
}
