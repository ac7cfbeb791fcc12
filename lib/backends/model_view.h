/* model_view.h - what a backend sees of a model: a read-only view of its sizes and parameters,
 * filled by the model room (cln_model_view_of, lib/model/model.h), which owns the model's struct.
 * Not installed. */
#ifndef CLN_MODEL_VIEW_H
#define CLN_MODEL_VIEW_H

#include <stddef.h>

#include "core/internal.h"

/* The MLP f = s (.) MLP([y, (t,) c]) of a model: weights sizes[l + 1] x sizes[l] (row-major) and
 * biases (NULL: none) in float64, each layer's activation (the last layer's is the model's final
 * activation), the output scale (NULL: none; out_scale_n values, 1 or the state dimension), and
 * the inputs beyond the state (time_input: t; num_inputs conditioning inputs c). The pointers are
 * the model's, valid while it lives. */
typedef struct cln_model_view {
    size_t num_layers;
    const size_t *sizes; /* num_layers + 1 */
    int act[CLN_MAX_LAYERS];
    const double *W[CLN_MAX_LAYERS], *bias[CLN_MAX_LAYERS];
    const double *out_scale;
    size_t out_scale_n;
    int time_input;
    size_t num_inputs;
} cln_model_view;

#endif /* CLN_MODEL_VIEW_H */
