/* host_mlp.h - the host's fused vector-field pass (lib/backends/host/host_mlp.inc): a stage of
 * the method and the whole MLP on it, row block by row block. */
#ifndef CLN_HOST_MLP_H
#define CLN_HOST_MLP_H

#include <stddef.h>
#include <stdint.h>

#include "backends/host/host_gemm.h"
#include "backends/host/host_gemv.h"

#define CLN_HOST_MLP_MAX_LAYERS 64 /* = CLN_MAX_LAYERS (checked in host.c) */

/* Rows evaluated together through every layer: their activations (2 x rows x ldh) stay in L1
 * while the weights stream from L2. A multiple of the 6- and 4-row GEMM tiles. */
#define CLN_HOST_MLP_ROWS 24

/* The model as the fused pass reads it, prepared once per model: the weights of layer l packed
 * by cln_gemm_pack (k = in[l] x ldw[l]) for the GEMM's tiles and again in the row kernels'
 * panels (Wr[l]: cln_gemv_pack_panels of the n columns the pass computes, see below), its bias
 * (NULL: none) and activation code. A hidden
 * layer computes wide[l] >= out[l] columns (out rounded up to 32 bytes, <= ldw; its bias is
 * zero-padded to match) so that its GEMM stores and its activation run on whole vectors; the
 * extra columns are never read by the next layer (its k is out[l]). */
typedef struct cln_host_mlp {
    size_t layers;
    size_t in[CLN_HOST_MLP_MAX_LAYERS], out[CLN_HOST_MLP_MAX_LAYERS], ldw[CLN_HOST_MLP_MAX_LAYERS];
    size_t wide[CLN_HOST_MLP_MAX_LAYERS];
    const void *Wt[CLN_HOST_MLP_MAX_LAYERS];
    const void *Wr[CLN_HOST_MLP_MAX_LAYERS];
    size_t panels[CLN_HOST_MLP_MAX_LAYERS];               /* cln_gemv_panel_count of the layer */
    const cln_gemv_panel *panel[CLN_HOST_MLP_MAX_LAYERS]; /* and each one's columns */
    const void *bias[CLN_HOST_MLP_MAX_LAYERS];
    int act[CLN_HOST_MLP_MAX_LAYERS];
    /* The output scale (cln_solve_dev.scale, scale_n values; scale_n 0: none), set by every
     * solve (not part of the packed model a backend keeps). */
    const void *scale;
    size_t scale_n;
    size_t ldh;     /* leading dimension of the activation scratch: the widest wide[l] */
    size_t stage_n; /* the state size whose stage scratch follows it (see below) */
} cln_host_mlp;

/* For rows r0 .. r1 - 1: stage i (cln_stage_elem of cl/cln_step.h, skipping frozen rows as the
 * stage pass does) into Z, then F block i = MLP(Z) layer by layer: the ordered GEMM
 * (cln_gemm_packed, and cln_gemv_packed for the rows its tiles leave) and bias + activation
 * (cln_host_bias_act) on blocks of CLN_HOST_MLP_ROWS rows, and the output scale on the last
 * layer's (cln_host_out_scale) where the model has one. i < 0: no stage (Z as it is, RS and IS
 * not read), F block 0 = MLP(Z): the bare vector field of the benchmarks.
 * The rows the tiles leave run on the row kernels panel by panel, each panel's bias and
 * activation right after it; `flip` reverses the order of the panels (a caller alternates it
 * between evaluations: see cln_gemv_panel_count).
 * Every element is computed exactly as by the separate passes, so the bits do not depend on the
 * rows' grouping nor on the order of the panels. H is scratch of 2 x CLN_HOST_MLP_ROWS x ldh
 * elements for the activations, then CLN_HOST_MLP_ROWS x stage_n for the stage (a solve whose N
 * is larger runs its stage row by row). */
#define CLN_HOST_MLP_DECLARE(real, sfx)                                                            \
    void cln_host_stage_mlp_##sfx(cln_gemm_isa isa, int i, int flip, size_t r0, size_t r1,         \
                                  const cln_host_mlp *mlp, const real *CR, const int32_t *CI,      \
                                  const real *RS, const int32_t *IS, const real *Y, real *F,       \
                                  real *Z, real *H);

CLN_HOST_MLP_DECLARE(float, f32)
CLN_HOST_MLP_DECLARE(double, f64)

#endif /* CLN_HOST_MLP_H */
