/* clnode-devices - every backend and device clnode can use here, their floating-point facts and
 * what their GEMMs really compute (the probes of clnode/probe.h), per precision and GEMM mode.
 *
 * Usage: clnode-devices [--json] [--no-probe]. Works with no OpenCL platform and no CUDA driver
 * (the host is always there) and says what is missing. clnode-devices --model FILE [--json]
 * prints instead what a safetensors model file says, as the library reads it. Exit status: 0, or 3
 * when a listed device could not be opened or probed, 2 for bad arguments (tool_exit_help). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clnode.h"
#include "clnode/probe.h"
#include "tool_problem.h"
#include "tool_table.h"

static const char *prog = "clnode-devices";

/* The (precision, GEMM mode) pairs probed on every device. */
static const struct {
    clnode_precision prec;
    clnode_gemm_mode mode;
} combos[] = {
    {CLNODE_FP32, CLNODE_GEMM_STRICT},
    {CLNODE_FP32, CLNODE_GEMM_TF32},
    {CLNODE_FP64, CLNODE_GEMM_STRICT},
};
#define NCOMBOS (sizeof combos / sizeof combos[0])

typedef struct dev_report {
    const clnode_device_info *info;
    char open_error[512]; /* the context could not be created */
    char last_log[512];   /* the last error its logger saw */
    clnode_status facts_status;
    clnode_device_facts facts;
    char facts_error[256];
    int probed[NCOMBOS]; /* 0: not run, 1: ran (see status) */
    clnode_status probe_status[NCOMBOS];
    clnode_probe_result probe[NCOMBOS];
    char probe_error[NCOMBOS][256];
} dev_report;

static void usage(FILE *f)
{
    fputs("usage: clnode-devices [--json] [--no-probe]\n"
          "       clnode-devices --model FILE.safetensors [--json]\n"
          "  Lists every backend and device, their floating-point facts and GEMM probes\n"
          "  (per precision and GEMM mode: identity exact, k = 1 outer product exact,\n"
          "  effective mantissa bits on random MLP-shaped data, classification).\n"
          "  --json       one JSON object on stdout (below)\n"
          "  --no-probe   list devices and facts only (no GEMM is run)\n"
          "  --model FILE instead: what the model file says, as clnode reads it: each layer's\n"
          "               weight and bias with shape and dtype, the activations, the inputs\n"
          "               (state, time, conditioning), the output scale (tensor out_scale),\n"
          "               and every __metadata__ key, those clnode does not read included\n"
          "               (--json: {\"format_version\": 1, \"model\", \"dim\", \"layers\":\n"
          "               [{\"weight\": {\"shape\", \"dtype\"}, \"bias\": {...} or null}],\n"
          "               \"activation\", \"final_activation\", \"time_input\", \"inputs\",\n"
          "               \"out_scale\": null or {\"values\", \"dtype\"}, \"metadata\":\n"
          "               {key: value}})\n"
          "  --help, -h   this text      --version   the version\n"
          "\n"
          "JSON (--json): {\"format_version\": 1, \"clnode_version\", \"backends\": [{\"name\",\n"
          "  \"built\", \"status\", \"num_devices\", \"note\"}], \"devices\": [{\"spec\" (the\n"
          "  device string), \"backend\", \"engine\", \"name\", \"vendor\", \"platform\",\n"
          "  \"driver_version\", \"opencl_c_version\", \"compute_units\", \"global_mem_bytes\",\n"
          "  \"fp64\", \"open_error\" (null or why the device could not be opened),\n"
          "  \"facts_reported\": {\"fp64\", \"fma\", \"denormals\",\n"
          "  \"correctly_rounded_div_sqrt\"} (true, false or null: not reported), \"probes\":\n"
          "  [{\"precision\", \"gemm_mode\", \"status\", \"identity_exact\", \"identity_bits\",\n"
          "  \"identity_mismatches\", \"outer_exact\", \"outer_mismatches\", \"random_bits\",\n"
          "  \"range_ok\", \"class\", \"unit_roundoff\"} or {..., \"error\"}]}]}\n",
          f);
    tool_print_device_help(f);
    fputs(tool_exit_help, f);
}

static const char *yes_no(int v)
{
    return v < 0 ? "-" : v ? "yes" : "no";
}

static void fmt_mem(char *out, size_t cap, unsigned long long bytes)
{
    if (!bytes)
        snprintf(out, cap, "-");
    else if (bytes >= (1ull << 30))
        snprintf(out, cap, "%.1f GiB", (double)bytes / (double)(1ull << 30));
    else
        snprintf(out, cap, "%.0f MiB", (double)bytes / (double)(1ull << 20));
}

/* Records a context's last error (with the status name) into buf. */
static void fmt_error(char *buf, size_t cap, clnode_status st, const clnode_context *ctx)
{
    const char *msg = ctx ? clnode_context_last_error(ctx) : "";
    snprintf(buf, cap, "%s%s%.200s", clnode_status_name(st), msg[0] ? ": " : "", msg);
}

/* Keeps the last error message: the reason clnode_context_create failed goes only there. */
static void capture_log(void *user, clnode_log_level level, clnode_log_code code, const char *msg)
{
    if (code == CLNODE_LOG_BUILD) /* the probe's kernel builds, as they happen */
        tool_log(NULL, level, code, msg);
    if (level == CLNODE_LOG_ERROR)
        snprintf((char *)user, 512, "%s", msg);
}

static void run_device(dev_report *r, int probe, int progress)
{
    clnode_context_options co;
    tool_log_options(&co, r->info->spec, capture_log, r->last_log);
    clnode_context *ctx = NULL;
    clnode_status st = clnode_context_create(&co, &ctx);
    if (st != CLNODE_OK) {
        snprintf(r->open_error, sizeof r->open_error, "%s",
                 r->last_log[0] ? r->last_log : clnode_status_name(st));
        return;
    }
    r->facts_status = clnode_device_facts_get(ctx, &r->facts);
    if (r->facts_status != CLNODE_OK)
        fmt_error(r->facts_error, sizeof r->facts_error, r->facts_status, ctx);
    else if (r->facts.fp64 < 0)
        r->facts.fp64 = r->info->fp64; /* the device list asked the driver too */
    for (size_t c = 0; probe && c < NCOMBOS; ++c) {
        if (combos[c].prec == CLNODE_FP64 && !clnode_context_supports(ctx, CLNODE_FP64)) {
            r->probed[c] = 1;
            r->probe_status[c] = CLNODE_ERR_NO_FP64;
            snprintf(r->probe_error[c], sizeof r->probe_error[c], "no fp64 on this device");
            continue;
        }
        if (progress) {
            fprintf(stderr, "\r%s: probing %s %s %s (a first OpenCL build takes ~30 s) ...   ",
                    prog, r->info->spec, clnode_precision_name(combos[c].prec),
                    clnode_gemm_mode_name(combos[c].mode));
            fflush(stderr);
        }
        r->probed[c] = 1;
        r->probe_status[c] = clnode_probe_gemm(ctx, combos[c].prec, combos[c].mode, &r->probe[c]);
        if (r->probe_status[c] != CLNODE_OK)
            fmt_error(r->probe_error[c], sizeof r->probe_error[c], r->probe_status[c], ctx);
    }
    clnode_context_destroy(&ctx);
}

static void print_json(const clnode_device_list *l, const dev_report *reps, size_t n, int probe)
{
    printf("{\"format_version\": %d, \"clnode_version\": ", TOOL_JSON_FORMAT_VERSION);
    tool_json_str(stdout, clnode_version_string());
    printf(", \"backends\": [");
    for (size_t i = 0; i < clnode_device_list_num_backends(l); ++i) {
        const clnode_backend_info *b = clnode_device_list_backend(l, i);
        printf("%s\n  {\"name\": ", i ? "," : "");
        tool_json_str(stdout, b->name);
        printf(", \"built\": %s, \"status\": ", b->built ? "true" : "false");
        tool_json_str(stdout, clnode_status_name(b->status));
        printf(", \"num_devices\": %zu, \"note\": ", b->num_devices);
        tool_json_str(stdout, b->note);
        printf("}");
    }
    printf("\n], \"devices\": [");
    for (size_t i = 0; i < n; ++i) {
        const dev_report *r = &reps[i];
        const clnode_device_info *d = r->info;
        static const char *const keys[] = {"spec",           "backend",         "engine",
                                           "name",           "vendor",          "platform",
                                           "driver_version", "opencl_c_version"};
        const char *vals[] = {d->spec,   d->backend,  d->engine,         d->name,
                              d->vendor, d->platform, d->driver_version, d->opencl_c_version};
        printf("%s\n  {", i ? "," : "");
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; ++k) {
            printf("%s\"%s\": ", k ? ", " : "", keys[k]);
            tool_json_str(stdout, vals[k]);
        }
        if (d->cc_major)
            printf(", \"compute_capability\": \"%d.%d\"", d->cc_major, d->cc_minor);
        printf(", \"compute_units\": %u, \"global_mem_bytes\": %llu, \"fp64\": %s",
               d->compute_units, d->global_mem, d->fp64 ? "true" : "false");
        printf(", \"open_error\": ");
        if (r->open_error[0])
            tool_json_str(stdout, r->open_error);
        else
            printf("null");
        printf(", \"facts_reported\": ");
        if (!r->open_error[0] && r->facts_status == CLNODE_OK) {
            const int v[] = {r->facts.fp64, r->facts.fma, r->facts.denormals,
                             r->facts.correctly_rounded_div_sqrt};
            static const char *const fk[] = {"fp64", "fma", "denormals",
                                             "correctly_rounded_div_sqrt"};
            printf("{");
            for (size_t k = 0; k < 4; ++k)
                printf("%s\"%s\": %s", k ? ", " : "", fk[k],
                       v[k] < 0 ? "null"
                       : v[k]   ? "true"
                                : "false");
            printf("}");
        } else {
            printf("null");
        }
        printf(", \"probes\": [");
        int first = 1;
        for (size_t c = 0; probe && c < NCOMBOS; ++c) {
            if (!r->probed[c])
                continue;
            const clnode_probe_result *p = &r->probe[c];
            printf("%s\n    {\"precision\": \"%s\", \"gemm_mode\": \"%s\", \"status\": \"%s\"",
                   first ? "" : ",", clnode_precision_name(combos[c].prec),
                   clnode_gemm_mode_name(combos[c].mode), clnode_status_name(r->probe_status[c]));
            first = 0;
            if (r->probe_status[c] != CLNODE_OK) {
                printf(", \"error\": ");
                tool_json_str(stdout, r->probe_error[c]);
                printf("}");
                continue;
            }
            printf(", \"identity_exact\": %s, \"identity_bits\": ",
                   p->identity_exact ? "true" : "false");
            tool_json_num(stdout, p->identity_bits);
            printf(", \"identity_mismatches\": %ld, \"outer_exact\": %s, \"outer_mismatches\": %ld"
                   ", \"random_bits\": ",
                   p->identity_mismatches, p->outer_exact ? "true" : "false", p->outer_mismatches);
            tool_json_num(stdout, p->random_bits);
            printf(", \"range_ok\": %s, \"class\": ", p->range_ok ? "true" : "false");
            tool_json_str(stdout, clnode_gemm_class_name(p->gemm_class));
            printf(", \"unit_roundoff\": ");
            tool_json_num(stdout, p->unit_roundoff);
            printf("}");
        }
        printf("%s]}", first ? "" : "\n  ");
    }
    printf("\n]}\n");
}

/* The backends table, then the notes too long for it in full. */
static void print_backends(const clnode_device_list *l)
{
    tool_table t;
    tool_table_init(&t, 4);
    const size_t r0 = tool_table_row(&t);
    const char *h1[] = {"backend", "built", "devices", "note"};
    for (size_t c = 0; c < 4; ++c)
        tool_table_set(&t, r0, c, "%s", h1[c]);
    for (size_t i = 0; i < clnode_device_list_num_backends(l); ++i) {
        const clnode_backend_info *b = clnode_device_list_backend(l, i);
        size_t r = tool_table_row(&t);
        tool_table_set(&t, r, 0, "%s", b->name);
        tool_table_set(&t, r, 1, "%s", b->built ? "yes" : "no");
        tool_table_set(&t, r, 2, "%zu", b->num_devices);
        tool_table_set(&t, r, 3, "%.180s", b->note);
    }
    tool_table_print(stdout, &t, "  ");
    tool_table_free(&t);
    for (size_t i = 0; i < clnode_device_list_num_backends(l); ++i) {
        const clnode_backend_info *b = clnode_device_list_backend(l, i);
        if (strlen(b->note) > 180)
            printf("  %s: %s\n", b->name, b->note);
    }
}

/* The devices table: one row per device and GEMM engine. */
static void print_devices(const dev_report *reps, size_t n)
{
    printf("\nDevices (host and CUDA devices appear once per GEMM engine, the host once more "
           "per ISA of its ordered GEMM that this machine runs)\n");
    tool_table t;
    tool_table_init(&t, 9);
    const size_t r0 = tool_table_row(&t);
    const char *h2[] = {"device",   "engine", "name",   "vendor", "driver",
                        "OpenCL C", "units",  "memory", "fp64"};
    for (size_t c = 0; c < 9; ++c)
        tool_table_set(&t, r0, c, "%s", h2[c]);
    for (size_t i = 0; i < n; ++i) {
        const clnode_device_info *d = reps[i].info;
        size_t r = tool_table_row(&t);
        char mem[32];
        fmt_mem(mem, sizeof mem, d->global_mem);
        tool_table_set(&t, r, 0, "%s", d->spec);
        tool_table_set(&t, r, 1, "%s", d->engine);
        tool_table_set(&t, r, 2, "%.60s", d->name);
        tool_table_set(&t, r, 3, "%.40s", d->vendor[0] ? d->vendor : "-");
        if (d->cc_major)
            tool_table_set(&t, r, 4, "cc %d.%d", d->cc_major, d->cc_minor);
        else
            tool_table_set(&t, r, 4, "%.40s", d->driver_version[0] ? d->driver_version : "-");
        tool_table_set(&t, r, 5, "%s", d->opencl_c_version[0] ? d->opencl_c_version : "-");
        if (d->compute_units)
            tool_table_set(&t, r, 6, "%u", d->compute_units);
        else
            tool_table_set(&t, r, 6, "-");
        tool_table_set(&t, r, 7, "%s", mem);
        tool_table_set(&t, r, 8, "%s", d->fp64 ? "yes" : "no");
    }
    tool_table_print(stdout, &t, "  ");
    tool_table_free(&t);
}

/* The floating-point facts table, then why a device has none. */
static void print_facts(const dev_report *reps, size_t n)
{
    printf("\nFloating-point facts, as the driver reports them (\"-\": not reported; measured: "
           "the probes below)\n");
    tool_table t;
    tool_table_init(&t, 5);
    const size_t r0 = tool_table_row(&t);
    const char *h3[] = {"device", "fp64", "FMA", "fp32 denormals", "div/sqrt correctly rounded"};
    for (size_t c = 0; c < 5; ++c)
        tool_table_set(&t, r0, c, "%s", h3[c]);
    for (size_t i = 0; i < n; ++i) {
        const dev_report *rp = &reps[i];
        size_t r = tool_table_row(&t);
        tool_table_set(&t, r, 0, "%s", rp->info->spec);
        if (rp->open_error[0] || rp->facts_status != CLNODE_OK) {
            tool_table_set(&t, r, 1, "? (below)");
        } else {
            tool_table_set(&t, r, 1, "%s", yes_no(rp->facts.fp64));
            tool_table_set(&t, r, 2, "%s", yes_no(rp->facts.fma));
            tool_table_set(&t, r, 3, "%s", yes_no(rp->facts.denormals));
            tool_table_set(&t, r, 4, "%s", yes_no(rp->facts.correctly_rounded_div_sqrt));
        }
    }
    tool_table_print(stdout, &t, "  ");
    tool_table_free(&t);
    for (size_t i = 0; i < n; ++i) {
        if (reps[i].open_error[0])
            printf("  %s: cannot open: %s\n", reps[i].info->spec, reps[i].open_error);
        else if (reps[i].facts_status != CLNODE_OK)
            printf("  %s: no facts: %s\n", reps[i].info->spec, reps[i].facts_error);
    }
}

/* The GEMM probes table, then the error of each probe that failed. */
static void print_probes(const dev_report *reps, size_t n)
{
    printf("\nGEMM probes: identity = A.I == A and I.B == B bit for bit; outer = every k = 1 "
           "product correctly rounded;\nbits = effective mantissa bits on random MLP-shaped "
           "data; range = products past 65504 stay finite\n");
    tool_table t;
    tool_table_init(&t, 9);
    const size_t r0 = tool_table_row(&t);
    const char *h4[] = {"device", "precision", "GEMM",  "identity",     "outer",
                        "bits",   "range",     "class", "unit roundoff"};
    for (size_t c = 0; c < 9; ++c)
        tool_table_set(&t, r0, c, "%s", h4[c]);
    for (size_t i = 0; i < n; ++i) {
        const dev_report *rp = &reps[i];
        if (rp->open_error[0])
            continue;
        for (size_t c = 0; c < NCOMBOS; ++c) {
            if (!rp->probed[c])
                continue;
            const clnode_probe_result *p = &rp->probe[c];
            size_t r = tool_table_row(&t);
            tool_table_set(&t, r, 0, "%s", rp->info->spec);
            tool_table_set(&t, r, 1, "%s", clnode_precision_name(combos[c].prec));
            tool_table_set(&t, r, 2, "%s", clnode_gemm_mode_name(combos[c].mode));
            if (rp->probe_status[c] == CLNODE_ERR_UNSUPPORTED ||
                rp->probe_status[c] == CLNODE_ERR_NO_FP64) {
                tool_table_set(&t, r, 3, "n/a");
                tool_table_set(&t, r, 7, "(not available: below)");
                continue;
            }
            if (rp->probe_status[c] != CLNODE_OK) {
                tool_table_set(&t, r, 3, "error");
                tool_table_set(&t, r, 7, "(below)");
                continue;
            }
            if (p->identity_exact)
                tool_table_set(&t, r, 3, "exact");
            else
                tool_table_set(&t, r, 3, "%ld differ", p->identity_mismatches);
            if (p->outer_exact)
                tool_table_set(&t, r, 4, "exact");
            else
                tool_table_set(&t, r, 4, "%ld differ", p->outer_mismatches);
            tool_table_set(&t, r, 5, "%.1f", p->random_bits);
            tool_table_set(&t, r, 6, "%s", p->range_ok ? "ok" : "overflow");
            tool_table_set(&t, r, 7, "%s", clnode_gemm_class_name(p->gemm_class));
            tool_table_set(&t, r, 8, "%.2g", p->unit_roundoff);
        }
    }
    tool_table_print(stdout, &t, "  ");
    tool_table_free(&t);
    for (size_t i = 0; i < n; ++i)
        for (size_t c = 0; c < NCOMBOS; ++c)
            if (!reps[i].open_error[0] && reps[i].probed[c] && reps[i].probe_status[c] != CLNODE_OK)
                printf("  %s %s %s: %s\n", reps[i].info->spec,
                       clnode_precision_name(combos[c].prec), clnode_gemm_mode_name(combos[c].mode),
                       reps[i].probe_error[c]);
}

/* The text report: backends, devices, facts and, unless --no-probe, the GEMM probes. */
static void print_text(const clnode_device_list *l, const dev_report *reps, size_t n, int probe)
{
    printf("clnode %s: backends and devices\n\nBackends\n", clnode_version_string());
    print_backends(l);
    print_devices(reps, n);
    print_facts(reps, n);
    if (!probe) {
        printf("\n(GEMM probes not run: --no-probe)\n");
        return;
    }
    print_probes(reps, n);
}

/* The model's output scale: JSON null or {"values": [...], "dtype"}; text "none" or the values
 * and their dtype. */
static void print_scale(const clnode_model *m, int json)
{
    size_t n = 0;
    const double *s = clnode_model_out_scale(m, &n);
    if (!s) {
        fputs(json ? "null" : "none", stdout);
        return;
    }
    fputs(json ? "{\"values\": [" : "", stdout);
    for (size_t i = 0; i < n; ++i)
        printf("%s%.17g", i ? ", " : "", s[i]);
    if (json)
        printf("], \"dtype\": \"%s\"}", clnode_model_out_scale_dtype(m));
    else
        printf(" (%zu value%s, %s)", n, n == 1 ? ": one for every component" : "s",
               clnode_model_out_scale_dtype(m));
}

/* --model FILE: everything the loader read from a safetensors file, as text or JSON. Returns
 * the exit status. */
static int print_model(const char *path, int json)
{
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "host";
    co.log = tool_log;
    co.log_user = (void *)prog;
    clnode_context *ctx = NULL;
    clnode_model *m = NULL;
    clnode_status st = clnode_context_create(&co, &ctx);
    if (st == CLNODE_OK)
        st = clnode_model_load_safetensors(ctx, path, &m);
    if (st != CLNODE_OK) {
        clnode_context_destroy(&ctx);
        return tool_exit_status(st); /* the logger printed why */
    }
    const size_t L = clnode_model_num_layers(m), nm = clnode_model_metadata_count(m);
    const char *act = clnode_activation_name(clnode_model_activation(m));
    const char *fin = clnode_activation_name(clnode_model_final_activation(m));
    if (json) {
        printf("{\"format_version\": %d, \"model\": ", TOOL_JSON_FORMAT_VERSION);
        tool_json_str(stdout, path);
        printf(", \"dim\": %zu, \"layers\": [", clnode_model_dim(m));
        for (size_t i = 0; i < L; ++i) {
            const size_t in = clnode_model_layer_in(m, i), out = clnode_model_layer_out(m, i);
            printf("%s{\"weight\": {\"shape\": [%zu, %zu], \"dtype\": \"%s\"}, \"bias\": ",
                   i ? ", " : "", out, in, clnode_model_tensor_dtype(m, i, 0));
            if (clnode_model_tensor_dtype(m, i, 1))
                printf("{\"shape\": [%zu], \"dtype\": \"%s\"}}", out,
                       clnode_model_tensor_dtype(m, i, 1));
            else
                printf("null}");
        }
        printf("], \"activation\": \"%s\", \"final_activation\": \"%s\", \"time_input\": %s, "
               "\"inputs\": %zu, \"out_scale\": ",
               act, fin, clnode_model_time_input(m) ? "true" : "false", clnode_model_num_inputs(m));
        print_scale(m, 1);
        printf(", \"metadata\": {");
        for (size_t i = 0; i < nm; ++i) {
            fputs(i ? ", " : "", stdout);
            tool_json_str(stdout, clnode_model_metadata_key(m, i));
            fputs(": ", stdout);
            tool_json_str(stdout, clnode_model_metadata_value(m, i));
        }
        printf("}}\n");
    } else {
        printf("model %s: %zu layer%s, state dimension %zu\n", path, L, L == 1 ? "" : "s",
               clnode_model_dim(m));
        for (size_t i = 0; i < L; ++i) {
            const size_t in = clnode_model_layer_in(m, i), out = clnode_model_layer_out(m, i);
            printf("  layer %zu: weight (%zu, %zu) %s", i, out, in,
                   clnode_model_tensor_dtype(m, i, 0));
            if (clnode_model_tensor_dtype(m, i, 1))
                printf(", bias (%zu,) %s\n", out, clnode_model_tensor_dtype(m, i, 1));
            else
                printf(", no bias\n");
        }
        printf("  activation %s, final activation %s\n", act, fin);
        printf("  input: state (%zu)%s, %zu conditioning input%s\n", clnode_model_dim(m),
               clnode_model_time_input(m) ? " and time (1)" : ", no time",
               clnode_model_num_inputs(m), clnode_model_num_inputs(m) == 1 ? "" : "s");
        fputs("  output scale: ", stdout);
        print_scale(m, 0);
        printf("\nmetadata: %zu key%s\n", nm, nm == 1 ? "" : "s");
        for (size_t i = 0; i < nm; ++i) {
            fputs("  ", stdout);
            tool_json_str(stdout, clnode_model_metadata_key(m, i));
            fputs(": ", stdout);
            tool_json_str(stdout, clnode_model_metadata_value(m, i));
            fputc('\n', stdout);
        }
    }
    clnode_model_destroy(&m);
    clnode_context_destroy(&ctx);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        tool_error("cannot write standard output");
        return TOOL_EXIT_RESOURCE;
    }
    return TOOL_EXIT_OK;
}

int main(int argc, char **argv)
{
    tool_prog = prog;
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"no-probe", no_argument, NULL, 'n'},
        {"model", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, TOOL_OPT_HELP},
        {"version", no_argument, NULL, TOOL_OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    int json = 0, probe = 1, started = 0, c;
    const char *model = NULL;
    while ((c = tool_getopt(argc, argv, longopts, &started)) != -1) {
        switch (c) {
        case 'j':
            json = 1;
            break;
        case 'm':
            model = optarg;
            break;
        case 'n':
            probe = 0;
            break;
        case TOOL_OPT_HELP:
            usage(stdout);
            return TOOL_EXIT_OK;
        case TOOL_OPT_VERSION:
            tool_print_version();
            return TOOL_EXIT_OK;
        default:
            return TOOL_EXIT_INPUT;
        }
    }
    if (model && !probe) {
        tool_error("--no-probe has no meaning with --model (no device is listed or probed)");
        return TOOL_EXIT_INPUT;
    }
    if (model)
        return print_model(model, json);
    clnode_device_list *l = NULL;
    clnode_status st = clnode_device_list_create(tool_log, (void *)prog, &l);
    if (st != CLNODE_OK) {
        tool_error("cannot list devices: %s", clnode_status_string(st));
        return TOOL_EXIT_RESOURCE;
    }
    const size_t n = clnode_device_list_count(l);
    dev_report *reps = calloc(n ? n : 1, sizeof *reps);
    if (!reps) {
        tool_error("out of memory");
        clnode_device_list_destroy(&l);
        return TOOL_EXIT_RESOURCE;
    }
    const int progress = isatty(STDERR_FILENO);
    int rc = 0;
    for (size_t i = 0; i < n; ++i) {
        reps[i].info = clnode_device_list_get(l, i);
        run_device(&reps[i], probe, progress);
        if (reps[i].open_error[0])
            rc = TOOL_EXIT_RESOURCE;
        for (size_t k = 0; k < NCOMBOS; ++k)
            if (reps[i].probed[k] && reps[i].probe_status[k] != CLNODE_OK &&
                reps[i].probe_status[k] != CLNODE_ERR_UNSUPPORTED &&
                reps[i].probe_status[k] != CLNODE_ERR_NO_FP64)
                rc = TOOL_EXIT_RESOURCE;
    }
    if (progress && probe)
        fprintf(stderr, "\r%80s\r", "");
    if (json)
        print_json(l, reps, n, probe);
    else
        print_text(l, reps, n, probe);
    free(reps);
    clnode_device_list_destroy(&l);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        tool_error("cannot write standard output");
        rc = TOOL_EXIT_RESOURCE;
    }
    return rc;
}
