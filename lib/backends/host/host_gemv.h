/* host_gemv.h - the host's row-at-a-time products for small batches
 * (lib/backends/host/host_gemv.c). */
#ifndef CLN_HOST_GEMV_H
#define CLN_HOST_GEMV_H

#include <stddef.h>

#include "backends/host/host_gemm.h"

/* Vectors of columns one pass over k accumulates in registers (AVX2: 14 accumulators and the
 * broadcast in 16 registers). */
#define CLN_GEMV_MAX_VECS 14

/* C[m x n] = A[m x k] . B[n x k]^T on B packed as Wt (cln_gemm_pack_*, leading dimension ldw),
 * exactly as cln_gemm_packed_*: each element summed over k in order with fma, from 0, so the bits
 * are those of the GEMM. Each row is computed on its own, with up to CLN_GEMV_MAX_VECS vectors of
 * its columns in one pass over k (a matrix-vector product reads each weight once and keeps enough
 * independent sums in flight to reach the FMA throughput); the last vector of a row is stored
 * under a mask, so nothing past column n of C is written. For the few rows the GEMM's 6- and
 * 4-row tiles leave (and a batch of one). */
void cln_gemv_packed_f32(cln_gemm_isa isa, size_t m, size_t n, size_t k, const float *A, size_t lda,
                         const float *Wt, size_t ldw, float *C, size_t ldc);
void cln_gemv_packed_f64(cln_gemm_isa isa, size_t m, size_t n, size_t k, const double *A,
                         size_t lda, const double *Wt, size_t ldw, double *C, size_t ldc);

/* Panels: the row kernels' own layout of a layer's packed weights, for the few rows the GEMM's
 * tiles leave (above all a batch of one, where the weights are streamed once per evaluation and
 * every byte counts). The n columns are split into cln_gemv_panel_count panels of whole vectors of
 * the ISA; panel p holds columns [j0, j0 + nc) as a k x ld block (ld: its vectors times the
 * lanes; the columns past n are zero), the panels one after the other, panel p at element k * j0.
 * Each panel's weights are contiguous, so a row's pass over k reads them in order without the
 * padding of cln_gemm_packed_ld. A product on one panel is cln_gemv_packed_* on (P + k * j0, ld)
 * with nc columns: the same ordered sums, so the same bits. A wide layer has two panels or more:
 * its panels may be passed over in any order (the MLP alternates it, so that the panel read last
 * is still in L1 when the next evaluation starts with it). */
typedef struct cln_gemv_panel {
    size_t j0, nc, ld;
} cln_gemv_panel;
size_t cln_gemv_panel_count(cln_gemm_isa isa, size_t esize, size_t n);
cln_gemv_panel cln_gemv_panel_at(cln_gemm_isa isa, size_t esize, size_t n, size_t p);
/* Elements of the panels of an n x k layer: k times the columns rounded up to whole vectors. */
size_t cln_gemv_panels_elems(cln_gemm_isa isa, size_t esize, size_t n, size_t k);
/* The panels of an ncols-column layer from its weights packed by cln_gemm_pack_* (Wt, k x ldw,
 * the columns past the layer's own zero; ldw >= ncols rounded up to whole vectors, which
 * cln_gemm_packed_ld(n) is for every ncols up to n rounded up to 32 bytes): row by row copies. */
void cln_gemv_pack_panels_f32(cln_gemm_isa isa, size_t ncols, size_t k, const float *Wt, size_t ldw,
                              float *P);
void cln_gemv_pack_panels_f64(cln_gemm_isa isa, size_t ncols, size_t k, const double *Wt,
                              size_t ldw, double *P);

/* The rows of an m-row product that cln_gemm_packed_* covers with its 6- and 4-row tiles (the rest
 * go to cln_gemv_packed_*): 0 below 4 rows. */
size_t cln_gemv_tiled_rows(size_t m);

#endif /* CLN_HOST_GEMV_H */
