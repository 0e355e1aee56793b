/* The traffic model (nf_traffic.h). No MPI: nfcoll_replay uses it too. */
#include "config.h"

#include "nf_kernels.h"
#include "nf_traffic.h"

/*
 * Bytes per rank for a call of `bytes` of user data (low-bit routes: floats).
 * Ring FP32: reduce-scatter sends (n-1)/n of the vector
 * (upstream), allgather as much again. libnfcoll's routes write their
 * contribution into the shared buffer (upstream) and read the result lines
 * back (downstream): fp32 full floats; binary one sign line per 512
 * elements up and k count planes down; ternary two planes up, 2k down; one
 * double of scale up and n down.
 */
void nf_traffic_model(nf_route_t route, uint64_t bytes, unsigned n, unsigned k, nf_traffic_t *t)
{
    uint64_t fp32 = bytes;
    uint64_t lines = nf_lines(bytes / sizeof(float)) * NF_LINE_BYTES;
    uint64_t ring_up = n > 1 ? fp32 * (n - 1) / n : 0;
    t->ring = 2 * ring_up;
    switch (route) {
    case NF_ROUTE_FP32:
        t->upstream = n > 1 ? fp32 : 0;
        t->total = 2 * t->upstream;
        break;
    case NF_ROUTE_BINARY:
        t->upstream = lines + sizeof(double);
        t->total = t->upstream + k * lines + n * sizeof(double);
        break;
    case NF_ROUTE_TERNARY:
        t->upstream = 2 * lines + sizeof(double);
        t->total = t->upstream + 2 * k * lines + n * sizeof(double);
        break;
    case NF_ROUTE_BF16: /* half of fp32's up, float results back */
        t->upstream = n > 1 ? fp32 / 2 : 0;
        t->total = t->upstream + (n > 1 ? fp32 : 0);
        break;
    default:
        t->upstream = ring_up;
        t->total = t->ring;
        break;
    }
}

