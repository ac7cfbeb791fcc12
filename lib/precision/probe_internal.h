/* probe_internal.h - the GEMM precision probes' internals (lib/precision/probe.c), exposed so that
 * the tests can run the same measurement and classification on injected (emulated) GEMMs. Not
 * installed. */
#ifndef CLN_PROBE_INTERNAL_H
#define CLN_PROBE_INTERNAL_H

#include <stddef.h>

#include "backends/probe_cache.h"
#include "core/internal.h"

/* One GEMM as the probes need it: C[m x n] = A[m x k] . B[n x k]^T with packed row-major host
 * arrays (leading dimensions k, k and n) of float (CLNODE_FP32) or double (CLNODE_FP64). */
typedef clnode_status (*cln_probe_gemm_fn)(void *user, clnode_precision prec, size_t m, size_t n,
                                           size_t k, const void *A, const void *B, void *C);

/* Runs every probe (identity both ways, k = 1 outer product, random effective bits on the seed
 * MLP's shapes, range, subnormals) through `gemm` in precision `prec` and classifies the result:
 * fills every field of *out but gemm_mode (left as found). Returns the first error of `gemm`,
 * or CLNODE_ERR_OUT_OF_MEMORY; ctx (may be NULL) receives the messages. Deterministic data. */
clnode_status cln_probe_measure(clnode_context *ctx, cln_probe_gemm_fn gemm, void *user,
                                clnode_precision prec, clnode_probe_result *out);

/* The decision rule of shared/reference/precision-and-blas.md §3.2 on the measured fields of *r:
 * sets gemm_class and unit_roundoff. */
void cln_probe_classify(clnode_probe_result *r);

/* The context's probe result for (precision, mode), measured on first use and cached in the
 * context. Does not clear the context's last error. */
clnode_status cln_probe_cached(clnode_context *ctx, clnode_precision prec, clnode_gemm_mode mode,
                               const clnode_probe_result **out);

/* The context's probe result for (precision, mode) if it was measured already, else NULL (runs
 * nothing). */
const clnode_probe_result *cln_probe_peek(const clnode_context *ctx, clnode_precision prec,
                                          clnode_gemm_mode mode);

#endif /* CLN_PROBE_INTERNAL_H */
