/* clnode/model.h - the vector field: a multilayer perceptron dy/dt = MLP(y) (or MLP([y, t]), and
 * with conditioning inputs c, constant per trajectory, MLP([y, c]) or MLP([y, t, c])), optionally
 * times an output scale: dy/dt = s (.) MLP(.).
 *
 * Layer i computes h_{i+1} = act_i(W_i h_i + b_i) with W_i of shape out_i x in_i (row-major, the
 * layout of torch.nn.Linear and equinox.nn.Linear). Every layer but the last uses `activation`;
 * the last uses `final_activation`. A model with one layer and the identity activation is the
 * linear ODE dy/dt = W y + b. A model with an output scale s (one value, or one per component)
 * multiplies the last layer's activated output by it, element by element: f = s * act_final(W_L h +
 * b_L), one multiplication in the state precision (s rounded to it like every parameter), as JAX
 * computes `s * mlp(y)`. A model without one computes no multiplication at all.
 *
 * A model keeps its parameters in float64 on the host; each solve converts them to the state
 * precision of that solve. A model is immutable once created and may be shared by solves made
 * one at a time.
 */
#ifndef CLNODE_MODEL_H
#define CLNODE_MODEL_H

#include "clnode/common.h"
#include "clnode/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clnode_model clnode_model;

/* The activations. One list expands to the enum and the names (values 0 to
 * clnode_activation_count() - 1, in this order). */
#define CLNODE_ACTIVATION_LIST(X)                                                                  \
    X(CLNODE_ACT_IDENTITY, 0, "identity")                                                          \
    X(CLNODE_ACT_RELU, 1, "relu")                                                                  \
    X(CLNODE_ACT_TANH, 2, "tanh")                                                                  \
    X(CLNODE_ACT_SIGMOID, 3, "sigmoid")                                                            \
    /* log(1 + e^x), as jax.nn.softplus */                                                         \
    X(CLNODE_ACT_SOFTPLUS, 4, "softplus")                                                          \
    /* x * sigmoid(x) */                                                                           \
    X(CLNODE_ACT_SILU, 5, "silu")                                                                  \
    /* tanh approximation, as jax.nn.gelu's default */                                             \
    X(CLNODE_ACT_GELU, 6, "gelu")

typedef enum clnode_activation {
#define CLNODE_X_ENUM(name, value, str) name = value,
    CLNODE_ACTIVATION_LIST(CLNODE_X_ENUM)
#undef CLNODE_X_ENUM
} clnode_activation;

/* The name of an activation as the list above spells it ("identity", ...); "unknown" otherwise.
 * The string is static. */
CLNODE_API const char *clnode_activation_name(clnode_activation act);

/* The number of activations: every value from 0 to clnode_activation_count() - 1 is one, so
 * (clnode_activation)i for i below it, with clnode_activation_name, lists them all. */
CLNODE_API size_t clnode_activation_count(void);

/* Parses a name as above. Returns CLNODE_OK or CLNODE_ERR_INVALID_ARGUMENT. */
CLNODE_API clnode_status clnode_activation_from_name(const char *name, clnode_activation *out);

/* Description of an MLP built from arrays. Nothing is retained: the arrays are copied. Fields
 * are only ever appended (clnode/common.h): start from the defaults, with
 * clnode_model_default_desc or, in C, the designated initialiser
 *     clnode_model_desc d = {CLNODE_MODEL_DESC_DEFAULTS, .num_layers = 1, .sizes = sizes, ...};
 * then set what you need. */
typedef struct clnode_model_desc {
    /* sizeof(clnode_model_desc) where the program was compiled: set by the defaults; the library
     * reads only the fields it covers. */
    size_t struct_size;
    size_t num_layers;            /* >= 1 (default 0: must be set) */
    const size_t *sizes;          /* num_layers + 1 widths: in, hidden..., out */
    const double *const *weights; /* num_layers arrays; weights[i] is sizes[i+1] x sizes[i] */
    const double *const *biases;  /* NULL (default: no biases) or num_layers arrays (NULL: none) */
    clnode_activation activation; /* between layers (default identity) */
    clnode_activation final_activation; /* after the last layer (default identity) */
    int time_input;    /* 1: the input is [y, t] (sizes[0] == sizes[num_layers] + 1); default 0 */
    size_t num_inputs; /* k conditioning inputs (default 0): the input is [y, c] or, with
                          time_input, [y, t, c]; sizes[0] == out (+1 with time_input) + k.
                          Each solve passes every trajectory's c (clnode_problem.inputs). */
    const double *out_scale; /* NULL (default): none. f = s (.) MLP(.); finite values */
    size_t out_scale_size;   /* 1 (a scalar) or the state dimension N (one per component); 0
                                with out_scale NULL */
} clnode_model_desc;

/* The defaults as the start of a designated initialiser (C only). Every default but struct_size
 * is zero, so it sets struct_size alone; a field appended later keeps a zero default. */
#define CLNODE_MODEL_DESC_DEFAULTS .struct_size = sizeof(clnode_model_desc)

/* Fills `desc` with the defaults above, struct_size included. `desc` must not be NULL. A macro: it
 * passes the size of the struct the program was compiled with. */
#define clnode_model_default_desc(desc) clnode_model_default_desc_sized((desc), sizeof *(desc))
CLNODE_API void clnode_model_default_desc_sized(clnode_model_desc *desc, size_t struct_size);

/* Creates a model from arrays. Errors: CLNODE_ERR_INVALID_ARGUMENT (inconsistent sizes: the
 * output width must equal the state dimension, sizes[0] == out (+1 with time_input, + num_inputs);
 * an out_scale_size other than 1 or N; a struct_size this library does not know),
 * CLNODE_ERR_NONFINITE_INPUT (a NaN or infinite parameter or output scale; the message names it),
 * CLNODE_ERR_OUT_OF_MEMORY. */
CLNODE_API clnode_status clnode_model_create(clnode_context *ctx, const clnode_model_desc *desc,
                                             clnode_model **out);

/* Loads a safetensors file: tensors F32 or F64 named "layers.<i>.weight"/"layers.<i>.bias"
 * (equinox) or "<i>.weight"/"<i>.bias" (torch.nn.Sequential, where non-Linear modules leave gaps
 * in the numbering), and optionally "out_scale" (F32 or F64, shape [] or [1]: a scalar, or [N]:
 * one per component; finite), the output scale; string metadata "activation", "final_activation" (default "identity") and
 * "time_input" ("true"/"false", default "false") and "inputs" (the number of conditioning inputs,
 * a decimal integer, default "0"; the first layer's width must make room for them). A metadata
 * key that is none of these but resembles one (another case, blanks or '-' for '_', or within
 * an edit or two: "Final_activation", "activation ", "final_activaton") is refused, naming both
 * keys; other keys are kept (clnode_model_metadata_key). Every length, offset, dtype and shape
 * is checked; a malformed file gives CLNODE_ERR_BAD_MODEL with a message naming the problem, an
 * unreadable one CLNODE_ERR_IO. Blocking (reads the file). */
CLNODE_API clnode_status clnode_model_load_safetensors(clnode_context *ctx, const char *path,
                                                       clnode_model **out);

/* The same from bytes in memory (`data` is not retained). */
CLNODE_API clnode_status clnode_model_load_safetensors_memory(clnode_context *ctx, const void *data,
                                                              size_t size, clnode_model **out);

/* The built-in seed model: eqx.nn.MLP(10 -> 100 -> 100 -> 10, softplus, PRNGKey(42)), the model of
 * the original TF32 failure report. Embedded in the library; also installed as
 * share/clnode/seed.safetensors. */
CLNODE_API clnode_status clnode_model_create_seed(clnode_context *ctx, clnode_model **out);

/* Destroys a model and sets *model to NULL. Accepts NULL and a pointer to NULL. */
CLNODE_API void clnode_model_destroy(clnode_model **model);

/* State dimension N (the output width). */
CLNODE_API size_t clnode_model_dim(const clnode_model *model);
/* Number of Linear layers. */
CLNODE_API size_t clnode_model_num_layers(const clnode_model *model);
/* Input and output width of layer i (0-based); 0 if i is out of range. */
CLNODE_API size_t clnode_model_layer_in(const clnode_model *model, size_t i);
CLNODE_API size_t clnode_model_layer_out(const clnode_model *model, size_t i);
/* Read-only parameters of layer i (row-major out x in) and its bias (NULL when absent). */
CLNODE_API const double *clnode_model_weight(const clnode_model *model, size_t i);
CLNODE_API const double *clnode_model_bias(const clnode_model *model, size_t i);
CLNODE_API clnode_activation clnode_model_activation(const clnode_model *model);
CLNODE_API clnode_activation clnode_model_final_activation(const clnode_model *model);
CLNODE_API int clnode_model_time_input(const clnode_model *model);
/* Number of conditioning inputs k (0: none). */
CLNODE_API size_t clnode_model_num_inputs(const clnode_model *model);

/* What a model loaded from a safetensors file read there beyond its parameters: every string
 * entry of the file's "__metadata__", in the file's order, the keys the loader reads and the
 * ones it does not know alike (a writer's own, e.g. "format": "pt"). Index i from 0 to count - 1;
 * key and value are owned by the model (valid until it is destroyed), NULL for an index out of
 * range. A model built from arrays, or from a file without metadata, has none. */
CLNODE_API size_t clnode_model_metadata_count(const clnode_model *model);
CLNODE_API const char *clnode_model_metadata_key(const clnode_model *model, size_t i);
CLNODE_API const char *clnode_model_metadata_value(const clnode_model *model, size_t i);

/* The dtype layer i's weight (bias = 0) or bias (bias != 0) had where the model came from: "F32"
 * or "F64" for a file, "F64" for a model built from arrays (its parameters are float64). NULL
 * for a layer out of range or a bias the layer lacks. */
CLNODE_API const char *clnode_model_tensor_dtype(const clnode_model *model, size_t i, int bias);

/* The model's output scale: its values (1, or one per component; owned by the model) and their
 * count in *n (n may be NULL); NULL and *n = 0 for a model without one. */
CLNODE_API const double *clnode_model_out_scale(const clnode_model *model, size_t *n);

/* The dtype the output scale had where the model came from: "F32" or "F64" for a file, "F64" for
 * a model built from arrays; NULL for a model without one. */
CLNODE_API const char *clnode_model_out_scale_dtype(const clnode_model *model);

/* Evaluates the vector field at n points in float64 on the host, with the activations every
 * backend uses (cl/cln_activation.h) and products summed in order with fused multiply-adds, as
 * the host GEMM does, and the output scale, if any, as the solves apply it: dydt[p] = s *
 * MLP(y[p]) (or MLP([y[p], t[p]]) for a time-input model), y and dydt n x dim row-major, t n
 * values (ignored, and may be NULL, without time input). For checking that a model is the one
 * meant (the Python package compares it with the framework's own function); solves never call
 * it. Errors: CLNODE_ERR_INVALID_ARGUMENT (NULL pointers, t NULL with time input),
 * CLNODE_ERR_UNSUPPORTED (a model with conditioning inputs: see clnode_model_eval_inputs),
 * CLNODE_ERR_OUT_OF_MEMORY. Thread-safety: as the context. */
CLNODE_API clnode_status clnode_model_eval(clnode_context *ctx, const clnode_model *model, size_t n,
                                           const double *y, const double *t, double *dydt);

/* clnode_model_eval for any model: c holds each point's k = clnode_model_num_inputs conditioning
 * inputs (n x k row-major; ignored, and may be NULL, when k is 0), the input of point p being
 * [y[p], (t[p],) c[p]]. Errors: as clnode_model_eval, and CLNODE_ERR_INVALID_ARGUMENT for c NULL
 * with conditioning inputs (no CLNODE_ERR_UNSUPPORTED). */
CLNODE_API clnode_status clnode_model_eval_inputs(clnode_context *ctx, const clnode_model *model,
                                                  size_t n, const double *y, const double *t,
                                                  const double *c, double *dydt);

#ifdef __cplusplus
}
#endif

#endif /* CLNODE_MODEL_H */
