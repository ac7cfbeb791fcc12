/* model.h - the model room's own type: the library's model (clnode_model) as model.c and
 * safetensors.c build it and the rooms above read it. The backends below see a model only through
 * its read-only view (backends/model_view.h), which cln_model_view_of fills. Not installed. */
#ifndef CLN_MODEL_H
#define CLN_MODEL_H

#include "backends/model_view.h"
#include "core/internal.h"

struct clnode_model {
    size_t num_layers;
    size_t sizes[CLN_MAX_LAYERS + 1];
    double *weights[CLN_MAX_LAYERS]; /* sizes[i+1] x sizes[i], row-major, owned */
    double *biases[CLN_MAX_LAYERS];  /* sizes[i+1] or NULL, owned */
    clnode_activation activation;
    clnode_activation final_activation;
    int time_input;
    size_t num_inputs; /* conditioning inputs: the input is [y, (t,) c], c of this length */
    /* What a loaded file said beyond the parameters: every string entry of its __metadata__ in
     * the file's order (meta[2i] the key, meta[2i+1] the value; owned), and whether each weight
     * and bias was F32 there. None and float64 for a model built from arrays. */
    size_t num_meta;
    char **meta;
    unsigned char weight_f32[CLN_MAX_LAYERS], bias_f32[CLN_MAX_LAYERS];
    /* The output scale f = s (.) MLP(.): out_scale_n values (0: none, 1: one for every component,
     * else the state dimension), owned; out_scale_f32: F32 in the file it came from. */
    double *out_scale;
    size_t out_scale_n;
    unsigned char out_scale_f32;
    /* Unique among the models of the process (from 1; a model never changes after creation): a
     * backend that keeps a model's packed weights between solves recognises it by this. */
    unsigned long long serial;
    /* The first parameter that no float holds (|x| beyond CLN_FP32_LIMIT: an fp32 solve refuses
     * the model), in layer order, weight before bias; f32_over 0: every parameter fits. */
    int f32_over;
    int f32_bias;        /* 1: in the bias of f32_layer, 0: in its weight */
    int f32_scale;       /* 1: in the output scale (f32_layer and f32_bias not used) */
    size_t f32_layer;    /* the layer */
    size_t f32_index;    /* the element, row-major */
    double f32_value;    /* its value */
    char f32_where[160]; /* where it came from, e.g. "m.safetensors: tensor 'layers.0.weight'" */
};

/* Every activation's name, in the list's order, separated by ", " (lib/model/model.c). */
const char *cln_activation_list(void);

/* The backends' view of `m` in *v: its sizes, each layer's activation, its parameters and output
 * scale (pointers into the model, valid while it lives). Returns v. */
const cln_model_view *cln_model_view_of(const clnode_model *m, cln_model_view *v);

#endif /* CLN_MODEL_H */
