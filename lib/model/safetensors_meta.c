/* safetensors_meta.c - the "__metadata__" of a safetensors model: the activations, time_input
 * and inputs it describes, the keys refused when they resemble a known one, and every entry kept
 * in the model. */
#include "model/safetensors_internal.h"

/* Reads a string entry of "__metadata__" (NULL object or absent key: *out = NULL). */
static const char *cln_st_meta(json_object *meta, const char *key)
{
    json_object *v;
    if (meta == NULL || !json_object_object_get_ex(meta, key, &v))
        return NULL;
    return json_object_get_string(v); /* every value was checked to be a string */
}

static clnode_status cln_st_meta_activation(cln_st_loader *L, json_object *meta, const char *key,
                                            const char *fallback, size_t num_layers,
                                            clnode_activation *out)
{
    char show[CLN_ST_SHOW + 4];
    const char *name = cln_st_meta(meta, key);
    if (name == NULL) {
        if (fallback == NULL)
            return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                            "%s: no \"%s\" in __metadata__; a model of %zu layers needs one "
                            "(one of %s)",
                            L->src, key, num_layers, cln_activation_list());
        name = fallback;
    }
    if (clnode_activation_from_name(name, out) != CLNODE_OK)
        return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: __metadata__ \"%s\" is '%s', not one of %s", L->src, key,
                        cln_st_show(show, name), cln_activation_list());
    return CLNODE_OK;
}

/* The metadata keys the loader reads. */
static const char *const cln_st_known_keys[] = {"activation", "final_activation", "time_input",
                                                "inputs"};
#define CLN_ST_KEY_MAX 64 /* longer keys resemble none of them */

/* The optimal string alignment distance of a and b (lengths at most CLN_ST_KEY_MAX): the edits
 * (insertions, deletions, substitutions, swaps of neighbours) that turn one into the other. */
static size_t cln_st_distance(const char *a, size_t na, const char *b, size_t nb)
{
    unsigned char d[CLN_ST_KEY_MAX + 1][CLN_ST_KEY_MAX + 1];
    for (size_t i = 0; i <= na; ++i)
        d[i][0] = (unsigned char)i;
    for (size_t j = 0; j <= nb; ++j)
        d[0][j] = (unsigned char)j;
    for (size_t i = 1; i <= na; ++i)
        for (size_t j = 1; j <= nb; ++j) {
            unsigned v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1u < v)
                v = d[i - 1][j] + 1u;
            if (d[i][j - 1] + 1u < v)
                v = d[i][j - 1] + 1u;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1u < v)
                v = d[i - 2][j - 2] + 1u;
            d[i][j] = (unsigned char)v;
        }
    return d[na][nb];
}

/* The known key that `key` (not itself known) resembles, or NULL: the same after trimming
 * blanks, lowering the case and reading ' ' and '-' as '_', or within 2 edits of a known key of
 * 8 or more characters (1 edit of a shorter one). */
static const char *cln_st_resembles(const char *key)
{
    const char *a = key, *e = key + strlen(key);
    while (a < e && (*a == ' ' || *a == '\t' || *a == '\n' || *a == '\r'))
        ++a;
    while (e > a && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
        --e;
    if ((size_t)(e - a) > CLN_ST_KEY_MAX)
        return NULL;
    char norm[CLN_ST_KEY_MAX + 1];
    size_t n = 0;
    for (; a < e; ++a)
        norm[n++] = *a == ' ' || *a == '-' ? '_' : *a >= 'A' && *a <= 'Z' ? (char)(*a + 32) : *a;
    for (size_t k = 0; k < sizeof cln_st_known_keys / sizeof cln_st_known_keys[0]; ++k) {
        const char *known = cln_st_known_keys[k];
        const size_t nk = strlen(known);
        if (cln_st_distance(norm, n, known, nk) <= (nk >= 8 ? 2u : 1u))
            return known;
    }
    return NULL;
}

/* Refuses a metadata key that resembles a known one without being it: a misspelt key would
 * otherwise be ignored and its default used (an identity final activation for
 * "final_activaton"). */
clnode_status cln_st_meta_keys(cln_st_loader *L, json_object *meta)
{
    if (meta == NULL)
        return CLNODE_OK;
    char show[CLN_ST_SHOW + 4];
    struct json_object_iterator it = json_object_iter_begin(meta);
    struct json_object_iterator it_end = json_object_iter_end(meta);
    for (; !json_object_iter_equal(&it, &it_end); json_object_iter_next(&it)) {
        const char *key = json_object_iter_peek_name(&it), *like = NULL;
        int known = 0;
        for (size_t k = 0; k < sizeof cln_st_known_keys / sizeof cln_st_known_keys[0]; ++k)
            known |= strcmp(key, cln_st_known_keys[k]) == 0;
        if (!known && (like = cln_st_resembles(key)) != NULL)
            return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                            "%s: __metadata__ key '%s' is not one clnode reads, but resembles "
                            "\"%s\" (keys are exact: lower case, no blanks); rename or remove it",
                            L->src, cln_st_show(show, key), like);
    }
    return CLNODE_OK;
}

/* Keeps in the model what the file said beyond the parameters: every metadata entry in the
 * file's order, and each tensor's dtype. */
clnode_status cln_st_keep(cln_st_loader *L, json_object *meta, const cln_st_layers *ly,
                          clnode_model *m)
{
    for (size_t k = 0; k < ly->num; ++k) {
        m->weight_f32[k] = !ly->w[k]->is_f64;
        m->bias_f32[k] = ly->b[k] != NULL && !ly->b[k]->is_f64;
    }
    m->out_scale_f32 = ly->scale != NULL && !ly->scale->is_f64;
    const size_t n = meta != NULL ? (size_t)json_object_object_length(meta) : 0;
    if (n == 0)
        return CLNODE_OK;
    m->meta = calloc(2 * n, sizeof *m->meta);
    if (m->meta == NULL)
        return cln_fail(L->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate %zu metadata entries",
                        n);
    struct json_object_iterator it = json_object_iter_begin(meta);
    struct json_object_iterator it_end = json_object_iter_end(meta);
    for (; !json_object_iter_equal(&it, &it_end) && m->num_meta < n; json_object_iter_next(&it)) {
        const char *key = json_object_iter_peek_name(&it);
        const char *val = json_object_get_string(json_object_iter_peek_value(&it));
        char *k = strdup(key), *v = strdup(val ? val : "");
        if (k == NULL || v == NULL) {
            free(k);
            free(v);
            return cln_fail(L->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot copy the metadata");
        }
        m->meta[2 * m->num_meta] = k;
        m->meta[2 * m->num_meta + 1] = v;
        ++m->num_meta;
    }
    return CLNODE_OK;
}

/* The activations, time_input and inputs of the metadata. Other keys are the writer's own (e.g.
 * "format": "pt"), kept by cln_st_keep once cln_st_meta_keys has refused the misspelt. */
clnode_status cln_st_meta_desc(cln_st_loader *L, json_object *meta, size_t num_layers,
                               clnode_model_desc *desc)
{
    char show[CLN_ST_SHOW + 4];
    clnode_status st = cln_st_meta_activation(
        L, meta, "activation", num_layers == 1 ? "identity" : NULL, num_layers, &desc->activation);
    if (st == CLNODE_OK)
        st = cln_st_meta_activation(L, meta, "final_activation", "identity", num_layers,
                                    &desc->final_activation);
    if (st != CLNODE_OK)
        return st;
    const char *time_input = cln_st_meta(meta, "time_input");
    if (time_input == NULL || strcmp(time_input, "false") == 0)
        desc->time_input = 0;
    else if (strcmp(time_input, "true") == 0)
        desc->time_input = 1;
    else
        return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: __metadata__ \"time_input\" is '%s', expected 'true' or 'false'",
                        L->src, cln_st_show(show, time_input));
    const char *inputs = cln_st_meta(meta, "inputs");
    if (inputs != NULL) {
        /* a decimal count, digits only (no sign, no spaces), at most 16777216 */
        size_t k = 0;
        int ok = inputs[0] != '\0' && strlen(inputs) <= 8;
        for (const char *c = inputs; ok && *c; ++c) {
            ok = *c >= '0' && *c <= '9';
            k = k * 10 + (size_t)(*c - '0');
        }
        if (!ok || k > (1u << 24))
            return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                            "%s: __metadata__ \"inputs\" is '%s', expected the number of "
                            "conditioning inputs (0 to 16777216)",
                            L->src, cln_st_show(show, inputs));
        desc->num_inputs = k;
    }
    return CLNODE_OK;
}
