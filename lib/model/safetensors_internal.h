/* safetensors_internal.h - what the files of the safetensors loader share (not installed): its
 * limits, the loader's state and the tensors it found, and the functions one file defines for
 * another. The loader by concern:
 *   safetensors.c          the header and its entries, the layers, the model built, the public
 *                          loaders (memory, file, the seed model)
 *   safetensors_tensors.c  the tensor entries checked, the data section's coverage, the decode
 *   safetensors_meta.c     the metadata: activations, inputs, misspelt keys, entries kept
 */
#ifndef CLN_SAFETENSORS_INTERNAL_H
#define CLN_SAFETENSORS_INTERNAL_H

#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/internal.h"
#include "model/model.h"

/* The reference implementation's limit on the JSON header (safetensors MAX_HEADER_SIZE). */
#define CLN_ST_MAX_HEADER 100000000u
/* The largest file the path variant reads into memory. */
#define CLN_ST_MAX_FILE                                                                            \
    ((uint64_t)SIZE_MAX / 2 < ((uint64_t)4 << 30) ? (size_t)(SIZE_MAX / 2)                         \
                                                  : (size_t)((uint64_t)4 << 30))
/* Our schema nests three deep (object > tensor object > shape array); anything much deeper is
 * not a model and only costs parser recursion. */
#define CLN_ST_MAX_DEPTH 8
/* A layer has at most a weight and a bias, and the model one output scale, so more tensors than
 * this means too many layers. */
#define CLN_ST_MAX_TENSORS (2 * CLN_MAX_LAYERS + 1)
/* The name of the output scale's tensor. */
#define CLN_ST_SCALE "out_scale"

/* Longest part of a name from the file quoted in a message. */
#define CLN_ST_SHOW 96

typedef enum cln_st_scheme {
    CLN_ST_SCHEME_NONE = 0,
    CLN_ST_SCHEME_EQUINOX, /* layers.<i>.weight */
    CLN_ST_SCHEME_TORCH,   /* <i>.weight */
} cln_st_scheme;

typedef struct cln_st_tensor {
    const char *name;    /* key in the parsed JSON tree (owned by the tree) */
    unsigned long index; /* layer index taken from the name */
    int is_bias;         /* 1: "<i>.bias", 0: "<i>.weight" */
    int is_scale;        /* 1: the output scale CLN_ST_SCALE (index and is_bias not used) */
    int is_f64;          /* 1: F64, 0: F32 */
    size_t rank;         /* number of dimensions */
    size_t dims[2];      /* the first two dimensions (the only ones a layer may have) */
    size_t numel;        /* product of all dimensions */
    size_t begin, end;   /* byte range in the data section */
} cln_st_tensor;

typedef struct cln_st_loader {
    clnode_context *ctx;
    char src[CLN_ST_SHOW + 32]; /* "model file '<path>'" or "model buffer", for messages */
    const unsigned char *data;  /* the data section */
    size_t data_size;
    cln_st_tensor tensors[CLN_ST_MAX_TENSORS];
    size_t num_tensors;
    cln_st_scheme scheme;
    const char *scheme_first; /* the tensor that fixed the naming scheme */
} cln_st_loader;

/* The layers in index order, as the loader found them. */
typedef struct cln_st_layers {
    const cln_st_tensor *w[CLN_MAX_LAYERS], *b[CLN_MAX_LAYERS]; /* b[i] may be NULL */
    const cln_st_tensor *scale;                                 /* NULL: no output scale */
    size_t sizes[CLN_MAX_LAYERS + 1];
    size_t num;
} cln_st_layers;

/* ---- safetensors_tensors.c ---- */

/* At most CLN_ST_SHOW bytes of `s` into `dst` (CLN_ST_SHOW + 4 bytes), quotable in a message;
 * a little-endian 64-bit integer. */
const char *cln_st_show(char *dst, const char *s);
uint64_t cln_st_le64(const unsigned char *p);
/* The pass over the header text that json-c has no hook for (repeated keys), and the number of
 * key/value pairs of a parsed tree to compare with it. */
clnode_status cln_st_scan_header(cln_st_loader *L, const char *h, size_t n, size_t *pairs);
size_t cln_st_count_pairs(json_object *o);
/* Checks one tensor entry (name, dtype, shape, offsets) and records it. */
clnode_status cln_st_add_tensor(cln_st_loader *L, const char *name, json_object *entry);
/* qsort's order of the tensors by layer index, weight before bias. */
int cln_st_cmp_layer(const void *a, const void *b);
/* The tensors cover the data section exactly once. */
clnode_status cln_st_check_coverage(cln_st_loader *L);
/* One tensor decoded into a new float64 array, refusing NaN and infinities; a tensor's shape as
 * "[a, b]" for messages. */
clnode_status cln_st_decode(cln_st_loader *L, const cln_st_tensor *t, double **out);
const char *cln_st_shape_str(char *dst, size_t cap, const cln_st_tensor *t);

/* ---- safetensors_meta.c ---- */

/* Refuses a metadata key that resembles a known one without being it; keeps in the model what the
 * file said beyond the parameters; the activations, time_input and inputs of the metadata. */
clnode_status cln_st_meta_keys(cln_st_loader *L, json_object *meta);
clnode_status cln_st_keep(cln_st_loader *L, json_object *meta, const cln_st_layers *ly,
                          clnode_model *m);
clnode_status cln_st_meta_desc(cln_st_loader *L, json_object *meta, size_t num_layers,
                               clnode_model_desc *desc);

#endif /* CLN_SAFETENSORS_INTERNAL_H */
