/* mlp.c - the layer loop every backend runs over its own ops (backend.h: cln_mlp_layers): the
 * driver's vector field, and the backends' stage_rhs after their stage. */
#include "backends/backend.h"

clnode_status cln_mlp_layers(cln_backend *be, cln_solve_dev *sd, int i, int fuse_next)
{
    const size_t L = sd->num_layers;
    const int fused = fuse_next && be->ops->last_layer_fused && (size_t)i + 1 < sd->stages;
    clnode_status st = CLNODE_OK;
    for (size_t l = 0; l < L && st == CLNODE_OK; ++l) {
        cln_buf *A = l == 0 ? sd->Z : sd->H[(l - 1) % 2];
        const int last = l + 1 == L;
        cln_buf *C = last ? sd->F : sd->H[l % 2];
        const size_t c_off = last ? (size_t)i * sd->B * sd->N : 0;
        const size_t k = sd->sizes[l], n = sd->sizes[l + 1];
        st = be->ops->gemm(be, sd->prec, sd->gemm_mode, sd->live, n, k, A, 0, l == 0 ? sd->ldz : k,
                           sd->W[l], 0, k, C, c_off, n);
        if (st != CLNODE_OK)
            break;
        if (last && fused) {
            st = be->ops->last_layer_fused(be, sd, i);
            break;
        }
        if (sd->bias[l] || sd->act[l] != CLNODE_ACT_IDENTITY)
            st = be->ops->bias_act(be, sd, C, c_off, n, sd->live, n, sd->bias[l], sd->act[l]);
        if (st == CLNODE_OK && last && sd->scale_n)
            st = be->ops->out_scale(be, sd, C, c_off, n, sd->live, n);
    }
    return st;
}
