/* probe_cache.h - the GEMM probe results kept across processes (backends/probe_cache.c), below
 * the public context constructors (backends/context_open.c), which read them into a new context,
 * and the probes (precision/probe.c), which store what they measure. Not installed. */
#ifndef CLN_PROBE_CACHE_H
#define CLN_PROBE_CACHE_H

#include "core/internal.h"

/* load returns 1 and fills *out when a stored result for the context's device, (prec, mode) and
 * this library build exists, 0 otherwise; store writes one (atomically). Both do nothing when
 * CLNODE_PROBE_CACHE=0 or the backend has no cache_id, and fail silently. */
int cln_probe_cache_load(const clnode_context *ctx, clnode_precision prec, clnode_gemm_mode mode,
                         clnode_probe_result *out);
void cln_probe_cache_store(const clnode_context *ctx, clnode_precision prec, clnode_gemm_mode mode,
                           const clnode_probe_result *r);

/* Reads the probe cache's stored results for every (precision, mode) of the context's device into
 * the context, once at its creation (by the public constructors, backends/context_open.c), so
 * that a solve's first use of a probe result reads no file (cln_probe_cached, precision/probe.c,
 * takes them from there; a missing one is still measured on first use). */
void cln_probe_preload(clnode_context *ctx);

#endif /* CLN_PROBE_CACHE_H */
