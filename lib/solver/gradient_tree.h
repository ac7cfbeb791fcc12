/* gradient_tree.h - the pieces of the reverse pass (gradient.c) that a batch cut into chunks of
 * whole blocks uses (lib/mpi/): the gradient object, the fixed tree over the blocks' parameter
 * sums, and the reverse pass of one chunk, whose tree is left unfolded.
 *
 * The tree (clnode/gradient.h) is a binary counter over the blocks in order: every aligned run of
 * blocks [k 2^j, (k + 1) 2^j) inside [0, nblocks) is a node, the sum of its two halves, whatever
 * feeds it. A chunk of blocks [a, b) pushed block by block into a tree that starts at block a
 * holds, unfolded, the sums of the maximal aligned runs of [a, b) in block order (cln_rev_tree's
 * stack). Those runs pushed in block order into a tree that starts at block 0 merge exactly as
 * their blocks would, so the folded sum has the bits of the one-process pass. */
#ifndef CLN_GRADIENT_TREE_H
#define CLN_GRADIENT_TREE_H

#include <stddef.h>

#include "clnode/gradient.h"
#include "core/internal.h"

struct clnode_gradient {
    size_t B, N, n_in, L;
    double *y0, *inputs, *params;
    size_t nparams;
    size_t w_off[CLN_MAX_LAYERS], b_off[CLN_MAX_LAYERS], s_off;
    int has_bias[CLN_MAX_LAYERS];
    size_t scale_n;
};

/* The program's reverse-pass options (NULL: the defaults) as this library's struct
 * (cln_struct_import). */
clnode_status cln_gradient_options_import(clnode_context *ctx, const clnode_gradient_options *in,
                                          clnode_gradient_options *full);

/* A new gradient of B trajectories of `model`, every value 0 (y0 B x dim, inputs B x n_in, the
 * parameters). CLNODE_ERR_OUT_OF_MEMORY. */
clnode_status cln_gradient_alloc(clnode_context *ctx, const clnode_model *model, size_t B,
                                 clnode_gradient **out);

/* The fixed tree: a stack of runs of blocks, run k the blocks start[k] .. start[k] + size[k] - 1
 * (size a power of two, start a multiple of it), its sum of n values in the state precision
 * (esize bytes each) at cln_rev_tree_level(tr, k). */
typedef struct cln_rev_tree {
    size_t esize, n, top, cap;
    size_t next; /* the block the next pushed run starts at */
    size_t *start, *size;
    void *level; /* cap x n values */
} cln_rev_tree;

/* An empty tree for the blocks first_block .. first_block + nblocks - 1, esize bytes a value, n
 * values a sum. CLNODE_ERR_OUT_OF_MEMORY (nothing to free then). */
clnode_status cln_rev_tree_init(clnode_context *ctx, cln_rev_tree *tr, size_t esize, size_t n,
                                size_t first_block, size_t nblocks);
void cln_rev_tree_free(cln_rev_tree *tr);
void *cln_rev_tree_level(const cln_rev_tree *tr, size_t k);

/* Whether a run of `size` blocks from block `start` can be pushed next: it starts at tr->next,
 * its size is a power of two that divides start, and the stack has room. */
int cln_rev_tree_fits(const cln_rev_tree *tr, size_t start, size_t size);

/* Pushes the sum of the run of `size` blocks from tr->next (cln_rev_tree_fits), then merges the
 * top two runs while they are the two halves of an aligned run. */
void cln_rev_tree_push(cln_rev_tree *tr, const void *sum, size_t size);

/* Adds the runs from the last into level 0: the whole sum. */
void cln_rev_tree_fold(cln_rev_tree *tr);

/* The reverse pass of a chunk: sol holds the trajectories first .. first + B - 1 of a batch
 * (first a multiple of CLNODE_GRADIENT_BLOCK; the last chunk may end in a partial block), cot
 * their rows of the cotangents, as clnode_gradient_compute takes them. On success *out holds the
 * chunk's y0 and input cotangents (its parameters are left 0) and *runs (initialised here, freed
 * by the caller) its blocks' tree, unfolded: the maximal aligned runs of blocks first /
 * CLNODE_GRADIENT_BLOCK onwards. Errors as clnode_gradient_compute's, naming trajectories by
 * their index in the batch; nothing to free then. */
clnode_status cln_gradient_chunk(clnode_context *ctx, const clnode_model *model,
                                 const clnode_gradient_options *opts, const clnode_solution *sol,
                                 size_t slots, const double *cot, size_t first, cln_rev_tree *runs,
                                 clnode_gradient **out);

#endif /* CLN_GRADIENT_TREE_H */
