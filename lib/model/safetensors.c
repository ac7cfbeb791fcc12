/* safetensors.c - loading an MLP vector field from a safetensors file (DESIGN.md §5), and the
 * built-in seed model (lib/model/seed.safetensors, embedded at build time) through that loader.
 *
 * Layout (https://github.com/huggingface/safetensors): an unsigned 64-bit little-endian header
 * length L, L bytes of UTF-8 JSON, then the data section. The JSON object maps each tensor name to
 * {"dtype", "shape", "data_offsets": [begin, end]} with offsets relative to the data section, plus
 * an optional "__metadata__" object of strings. The tensors must index the data section fully:
 * no overlap, no hole, no unused byte at the end (as the reference implementation requires).
 *
 * The file is hostile until proven otherwise: every length, offset, shape and dtype is checked
 * before any byte of the data section is read, and the payload is decoded byte by byte in
 * little-endian order, so neither alignment nor host byte order matters.
 *
 * The loader's other files by concern: safetensors_internal.h.
 */
#include "model/safetensors_internal.h"

/* The 8-byte header length and the header it announces; sets L->data and L->data_size. */
static clnode_status cln_st_header(cln_st_loader *L, const unsigned char *bytes, size_t size,
                                   const char **header, size_t *header_len)
{
    clnode_context *ctx = L->ctx;
    if (size < 8)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: only %zu bytes, shorter than the 8-byte header length", L->src, size);
    uint64_t hlen = cln_st_le64(bytes);
    if (hlen == 0)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL, "%s: header length is 0", L->src);
    if (hlen > CLN_ST_MAX_HEADER)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: header length %llu exceeds the limit of %u bytes", L->src,
                        (unsigned long long)hlen, CLN_ST_MAX_HEADER);
    if (hlen > size - 8)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: header length %llu runs past the end (only %zu bytes follow the "
                        "length field)",
                        L->src, (unsigned long long)hlen, size - 8);
    *header = (const char *)bytes + 8;
    *header_len = (size_t)hlen;
    L->data = bytes + 8 + *header_len;
    L->data_size = size - 8 - *header_len;
    const char *nul = memchr(*header, '\0', *header_len);
    if (nul != NULL)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL, "%s: JSON header has a NUL byte at byte %zu",
                        L->src, (size_t)(nul - *header));
    return CLNODE_OK;
}

/* The header as one JSON object with distinct keys. *tok and *root are the caller's to free,
 * also on failure. */
static clnode_status cln_st_parse(cln_st_loader *L, const char *header, size_t header_len,
                                  json_tokener **tok, json_object **root)
{
    clnode_context *ctx = L->ctx;
    size_t pairs_written = 0;
    clnode_status st = cln_st_scan_header(L, header, header_len, &pairs_written);
    if (st != CLNODE_OK)
        return st;
    *tok = json_tokener_new_ex(CLN_ST_MAX_DEPTH);
    if (*tok == NULL)
        return cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "%s: cannot allocate a JSON parser", L->src);
    json_tokener_set_flags(*tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    /* The exact length (at most CLN_ST_MAX_HEADER, so it fits an int): the header is not NUL
     * terminated, and a complete object needs no terminator. */
    *root = json_tokener_parse_ex(*tok, header, (int)header_len);
    enum json_tokener_error jerr = json_tokener_get_error(*tok);
    if (*root == NULL) {
        if (jerr == json_tokener_continue)
            return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                            "%s: JSON header is incomplete (it ends inside a value after %zu "
                            "bytes)",
                            L->src, header_len);
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL, "%s: JSON parse error at byte %zu: %s", L->src,
                        json_tokener_get_parse_end(*tok), json_tokener_error_desc(jerr));
    }
    if (json_tokener_get_parse_end(*tok) != header_len)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: JSON header has trailing characters after byte %zu", L->src,
                        json_tokener_get_parse_end(*tok));
    if (!json_object_is_type(*root, json_type_object))
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL, "%s: JSON header is %s, not an object", L->src,
                        json_type_to_name(json_object_get_type(*root)));
    size_t pairs_kept = cln_st_count_pairs(*root);
    if (pairs_kept != pairs_written)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: JSON header has duplicate keys (%zu key/value pairs written, %zu "
                        "distinct)",
                        L->src, pairs_written, pairs_kept);
    return CLNODE_OK;
}

/* Every entry of the header: "__metadata__" (an object of strings, into *meta) or a tensor of a
 * layer (into L->tensors), which must cover the data section. */
static clnode_status cln_st_entries(cln_st_loader *L, json_object *root, json_object **meta)
{
    clnode_context *ctx = L->ctx;
    char show[CLN_ST_SHOW + 4];
    clnode_status st;
    *meta = NULL;
    struct json_object_iterator it = json_object_iter_begin(root);
    struct json_object_iterator it_end = json_object_iter_end(root);
    for (; !json_object_iter_equal(&it, &it_end); json_object_iter_next(&it)) {
        const char *key = json_object_iter_peek_name(&it);
        json_object *val = json_object_iter_peek_value(&it);
        if (strcmp(key, "__metadata__") == 0) {
            *meta = val;
            continue;
        }
        if ((st = cln_st_add_tensor(L, key, val)) != CLNODE_OK)
            return st;
    }
    if (*meta != NULL) {
        if (!json_object_is_type(*meta, json_type_object))
            return cln_fail(ctx, CLNODE_ERR_BAD_MODEL, "%s: __metadata__ is %s, not an object",
                            L->src, json_type_to_name(json_object_get_type(*meta)));
        struct json_object_iterator mi = json_object_iter_begin(*meta);
        struct json_object_iterator mi_end = json_object_iter_end(*meta);
        for (; !json_object_iter_equal(&mi, &mi_end); json_object_iter_next(&mi)) {
            json_object *v = json_object_iter_peek_value(&mi);
            if (!json_object_is_type(v, json_type_string))
                return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                                "%s: __metadata__ value of '%s' is %s, not a string", L->src,
                                cln_st_show(show, json_object_iter_peek_name(&mi)),
                                json_type_to_name(json_object_get_type(v)));
        }
    }
    if (L->num_tensors == 0)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: no tensors; a model needs at least one layer", L->src);
    return cln_st_check_coverage(L);
}

/* Checks layer `w` (with bias `b` or NULL) and appends it to `ly`: shapes, and the chain. */
static clnode_status cln_st_add_layer(cln_st_loader *L, const cln_st_tensor *w,
                                      const cln_st_tensor *b, cln_st_layers *ly)
{
    clnode_context *ctx = L->ctx;
    char show[CLN_ST_SHOW + 4], show2[CLN_ST_SHOW + 4], shape[64];
    if (ly->num == CLN_MAX_LAYERS)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL, "%s: more than the limit of %d layers", L->src,
                        CLN_MAX_LAYERS);
    if (w->rank != 2)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: weight '%s' has shape %s of %zu dimensions, expected 2 (out x in)",
                        L->src, cln_st_show(show, w->name),
                        cln_st_shape_str(shape, sizeof shape, w), w->rank);
    if (w->dims[0] == 0 || w->dims[1] == 0)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL, "%s: weight '%s' has an empty shape %s", L->src,
                        cln_st_show(show, w->name), cln_st_shape_str(shape, sizeof shape, w));
    if (b != NULL && b->rank != 1)
        return cln_fail(
            ctx, CLNODE_ERR_BAD_MODEL, "%s: bias '%s' has shape %s of %zu dimensions, expected 1",
            L->src, cln_st_show(show, b->name), cln_st_shape_str(shape, sizeof shape, b), b->rank);
    if (b != NULL && b->dims[0] != w->dims[0])
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: bias '%s' has %zu entries but weight '%s' has %zu rows", L->src,
                        cln_st_show(show, b->name), b->dims[0], cln_st_show(show2, w->name),
                        w->dims[0]);
    if (ly->num > 0 && w->dims[1] != ly->sizes[ly->num])
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: layers do not chain: weight '%s' (shape %s) takes %zu inputs but "
                        "the previous layer '%s' gives %zu outputs",
                        L->src, cln_st_show(show, w->name),
                        cln_st_shape_str(shape, sizeof shape, w), w->dims[1],
                        cln_st_show(show2, ly->w[ly->num - 1]->name), ly->sizes[ly->num]);
    if (ly->num == 0)
        ly->sizes[0] = w->dims[1];
    ly->sizes[ly->num + 1] = w->dims[0];
    ly->w[ly->num] = w;
    ly->b[ly->num] = b;
    ly->num++;
    return CLNODE_OK;
}

/* The output scale's shape: [] or [1] (a scalar) or [N] (one per component of the state). */
static clnode_status cln_st_scale_shape(cln_st_loader *L, const cln_st_layers *ly)
{
    const cln_st_tensor *t = ly->scale;
    if (t == NULL)
        return CLNODE_OK;
    char shape[64];
    const size_t n = ly->sizes[ly->num];
    if (t->rank == 0 || (t->rank == 1 && (t->dims[0] == 1 || t->dims[0] == n)))
        return CLNODE_OK;
    return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                    "%s: tensor '" CLN_ST_SCALE "' has shape %s; the output scale is a scalar "
                    "(shape [] or [1]) or one value per component of the state (shape [%zu])",
                    L->src, cln_st_shape_str(shape, sizeof shape, t), n);
}

/* The tensors paired into layers in index order (torch.nn.Sequential leaves gaps for activation
 * modules). */
static clnode_status cln_st_layers_of(cln_st_loader *L, cln_st_layers *ly)
{
    char show[CLN_ST_SHOW + 4];
    qsort(L->tensors, L->num_tensors, sizeof L->tensors[0], cln_st_cmp_layer);
    for (size_t i = 0; i < L->num_tensors;) {
        const cln_st_tensor *w = &L->tensors[i], *b = NULL;
        if (w->is_scale) { /* the last (cln_st_cmp_layer), and only one (json-c de-duplicates) */
            ly->scale = w;
            break;
        }
        if (w->is_bias)
            return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                            "%s: tensor '%s' is the bias of layer index %lu, which has no weight",
                            L->src, cln_st_show(show, w->name), w->index);
        i++;
        if (i < L->num_tensors && !L->tensors[i].is_scale && L->tensors[i].index == w->index) {
            b = &L->tensors[i];
            if (!b->is_bias) /* cannot happen after json-c's de-duplication; kept as a guard */
                return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL, "%s: tensor '%s' appears twice",
                                L->src, cln_st_show(show, b->name));
            i++;
        }
        const clnode_status st = cln_st_add_layer(L, w, b, ly);
        if (st != CLNODE_OK)
            return st;
    }
    if (ly->num == 0)
        return cln_fail(L->ctx, CLNODE_ERR_BAD_MODEL,
                        "%s: no layers beside '" CLN_ST_SCALE "'; a model needs at least one",
                        L->src);
    return cln_st_scale_shape(L, ly);
}

/* The model of the layers, with the parameters converted to float64 (exactly) and checked
 * finite. */
static clnode_status cln_st_build(cln_st_loader *L, const cln_st_layers *ly,
                                  clnode_model_desc *desc, clnode_model **out)
{
    clnode_context *ctx = L->ctx;
    char show[CLN_ST_SHOW + 4];
    double *weights[CLN_MAX_LAYERS] = {0};
    double *biases[CLN_MAX_LAYERS] = {0};
    double *scale = NULL;
    clnode_status st = CLNODE_OK;
    for (size_t k = 0; k < ly->num; k++) {
        CLN_TRY(st, cln_st_decode(L, ly->w[k], &weights[k]));
        if (ly->b[k] != NULL)
            CLN_TRY(st, cln_st_decode(L, ly->b[k], &biases[k]));
    }
    if (ly->scale != NULL) {
        CLN_TRY(st, cln_st_decode(L, ly->scale, &scale));
        desc->out_scale = scale;
        desc->out_scale_size = ly->scale->numel;
    }
    desc->num_layers = ly->num;
    desc->sizes = ly->sizes;
    desc->weights = (const double *const *)weights;
    desc->biases = (const double *const *)biases;
    st = clnode_model_create(ctx, desc, out);
    if (st == CLNODE_OK && (*out)->f32_over) { /* named by its tensor in an fp32 solve's refusal */
        const clnode_model *m = *out;
        const cln_st_tensor *t = m->f32_scale  ? ly->scale
                                 : m->f32_bias ? ly->b[m->f32_layer]
                                               : ly->w[m->f32_layer];
        snprintf((*out)->f32_where, sizeof(*out)->f32_where, "%s: tensor '%s'", L->src,
                 cln_st_show(show, t->name));
    }
    if (st == CLNODE_ERR_INVALID_ARGUMENT) {
        char why[sizeof ctx->last_error], k[40] = "";
        snprintf(why, sizeof why, "%s", ctx != NULL ? ctx->last_error : "");
        if (desc->num_inputs)
            snprintf(k, sizeof k, ", inputs %zu", desc->num_inputs);
        st = cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                      "%s: the dimensions do not make a vector field (input width %zu, output "
                      "width %zu, time_input %s%s): %s",
                      L->src, ly->sizes[0], ly->sizes[ly->num], desc->time_input ? "true" : "false",
                      k, why);
    }
fail:
    for (size_t k = 0; k < CLN_MAX_LAYERS; k++) {
        free(weights[k]);
        free(biases[k]);
    }
    free(scale);
    return st;
}

/* Loads a model from `size` bytes. With `declared` non-zero, `bytes` holds only the length field
 * and the header of a file of `declared` bytes: the header alone is checked against that size
 * (its tensors must cover the data section the file would have) and no model is built. */
static clnode_status cln_st_load_ex(clnode_context *ctx, const unsigned char *bytes, size_t size,
                                    const char *path, size_t declared, clnode_model **out)
{
    char show[CLN_ST_SHOW + 4];
    clnode_status st = CLNODE_OK;
    json_tokener *tok = NULL;
    json_object *root = NULL, *meta = NULL;
    const char *header = NULL;
    size_t header_len = 0;
    cln_st_layers *ly = NULL;
    clnode_model_desc desc;
    clnode_model_default_desc(&desc);

    cln_st_loader *L = calloc(1, sizeof *L);
    if (L == NULL)
        return cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the safetensors loader");
    L->ctx = ctx;
    if (path != NULL)
        snprintf(L->src, sizeof L->src, "model file '%s'", cln_st_show(show, path));
    else
        snprintf(L->src, sizeof L->src, "model buffer");
    ly = calloc(1, sizeof *ly);
    if (ly == NULL) {
        st = cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the safetensors loader");
        goto fail;
    }
    CLN_TRY(st, cln_st_header(L, bytes, size, &header, &header_len));
    if (declared != 0) {
        L->data = NULL; /* not read yet: only offsets are checked */
        L->data_size = declared - 8 - header_len;
    }
    CLN_TRY(st, cln_st_parse(L, header, header_len, &tok, &root));
    CLN_TRY(st, cln_st_entries(L, root, &meta));
    CLN_TRY(st, cln_st_layers_of(L, ly));
    CLN_TRY(st, cln_st_meta_keys(L, meta));
    CLN_TRY(st, cln_st_meta_desc(L, meta, ly->num, &desc));
    if (declared == 0 && (st = cln_st_build(L, ly, &desc, out)) == CLNODE_OK &&
        (st = cln_st_keep(L, meta, ly, *out)) != CLNODE_OK)
        clnode_model_destroy(out);
fail:
    json_object_put(root);
    if (tok != NULL)
        json_tokener_free(tok);
    free(ly);
    free(L);
    return st;
}

static clnode_status cln_st_load(clnode_context *ctx, const unsigned char *bytes, size_t size,
                                 const char *path, clnode_model **out)
{
    return cln_st_load_ex(ctx, bytes, size, path, 0, out);
}

clnode_status clnode_model_load_safetensors_memory(clnode_context *ctx, const void *data,
                                                   size_t size, clnode_model **out)
{
    cln_clear_error(ctx);
    if (out == NULL)
        return cln_fail(ctx, CLNODE_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (data == NULL && size != 0)
        return cln_fail(ctx, CLNODE_ERR_INVALID_ARGUMENT, "data is NULL but size is %zu", size);
    return cln_st_load(ctx, data, size, NULL, out);
}

/* Grows the read buffer of a model file (doubling from 64 KiB, to one byte past the limit so that
 * a too-large file is told). */
static clnode_status cln_st_grow(clnode_context *ctx, const char *path, unsigned char **buf,
                                 size_t *cap)
{
    char show[CLN_ST_SHOW + 4];
    if (*cap > CLN_ST_MAX_FILE)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "model file '%s' is larger than the limit of %zu bytes",
                        cln_st_show(show, path), (size_t)CLN_ST_MAX_FILE);
    size_t grown = *cap == 0 ? (size_t)1 << 16 : *cap * 2;
    if (grown > CLN_ST_MAX_FILE + 1 || grown < *cap)
        grown = CLN_ST_MAX_FILE + 1;
    unsigned char *p = realloc(*buf, grown);
    if (p == NULL)
        return cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY,
                        "cannot allocate %zu bytes to read model file '%s'", grown,
                        cln_st_show(show, path));
    *buf = p;
    *cap = grown;
    return CLNODE_OK;
}

/* The 8-byte header length of a model file being read (its first len >= 8 bytes in buf), checked
 * before the rest is read: against the format's limit, and against the file's size when `sb`
 * (a regular file's) is given. */
static clnode_status cln_st_check_length(clnode_context *ctx, const char *path,
                                         const unsigned char *buf, size_t len,
                                         const struct stat *sb)
{
    char show[CLN_ST_SHOW + 4];
    const uint64_t hlen = cln_st_le64(buf);
    if (hlen == 0 || hlen > CLN_ST_MAX_HEADER) {
        clnode_model *m = NULL;
        clnode_status st = cln_st_load(ctx, buf, len, path, &m); /* refuses it, with the message */
        if (st == CLNODE_OK) {                                   /* cannot happen */
            clnode_model_destroy(&m);
            st = cln_fail(ctx, CLNODE_ERR_INTERNAL, "header length check");
        }
        return st;
    }
    if (sb && hlen > (uint64_t)sb->st_size - 8)
        return cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                        "model file '%s': header length %llu runs past the end (only %llu bytes "
                        "follow the length field)",
                        cln_st_show(show, path), (unsigned long long)hlen,
                        (unsigned long long)sb->st_size - 8);
    return CLNODE_OK;
}

clnode_status clnode_model_load_safetensors(clnode_context *ctx, const char *path,
                                            clnode_model **out)
{
    char show[CLN_ST_SHOW + 4];
    cln_clear_error(ctx);
    if (out == NULL)
        return cln_fail(ctx, CLNODE_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (path == NULL)
        return cln_fail(ctx, CLNODE_ERR_INVALID_ARGUMENT, "path is NULL");

    clnode_status st = CLNODE_OK;
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return cln_fail(ctx, CLNODE_ERR_IO, "cannot open model file '%s': %s",
                        cln_st_show(show, path), strerror(errno));
    /* Read to the end rather than trusting a size from the file system: it works on pipes. One
     * byte past the limit tells a too-large file. The 8-byte header length is checked as soon as
     * it is read, against the file's size where the file system knows it, so that a stream
     * (/dev/zero) or a large file that is no model is refused without reading it. */
    struct stat sb;
    const int sized = fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size >= 0;
    int header_checked = 0, layout_checked = !sized;
    for (;;) {
        if (len == cap)
            CLN_TRY(st, cln_st_grow(ctx, path, &buf, &cap));
        size_t want = cap - len;
        errno = 0;
        size_t got = fread(buf + len, 1, want, f);
        len += got;
        if (!header_checked && len >= 8) {
            header_checked = 1;
            CLN_TRY(st, cln_st_check_length(ctx, path, buf, len, sized ? &sb : NULL));
        }
        /* Once the header is in, a regular file's size must be the one its tensors describe:
         * a large file that is no model is refused before its data section is read. */
        if (!layout_checked && len >= 8 && len - 8 >= cln_st_le64(buf)) {
            layout_checked = 1;
            const size_t hend = 8 + (size_t)cln_st_le64(buf);
            CLN_TRY(st, cln_st_load_ex(ctx, buf, hend, path, (size_t)sb.st_size, NULL));
        }
        if (got < want) {
            if (ferror(f)) {
                int err = errno;
                st = cln_fail(ctx, CLNODE_ERR_IO, "cannot read model file '%s': %s",
                              cln_st_show(show, path), err != 0 ? strerror(err) : "read error");
                goto fail;
            }
            break; /* end of file */
        }
    }
    if (len > CLN_ST_MAX_FILE) {
        st = cln_fail(ctx, CLNODE_ERR_BAD_MODEL,
                      "model file '%s' is larger than the limit of %zu bytes",
                      cln_st_show(show, path), (size_t)CLN_ST_MAX_FILE);
        goto fail;
    }
    st = cln_st_load(ctx, buf, len, path, out);

fail:
    free(buf);
    fclose(f);
    return st;
}

/* The seed model's safetensors bytes, embedded at build time (lib/model/seed.safetensors). */
extern const unsigned char cln_seed_safetensors[];
extern const size_t cln_seed_safetensors_size;

clnode_status clnode_model_create_seed(clnode_context *ctx, clnode_model **out)
{
    return clnode_model_load_safetensors_memory(ctx, cln_seed_safetensors,
                                                cln_seed_safetensors_size, out);
}
