/* options.c - the solver's options from their one table (CLNODE_SOLVE_OPTION_LIST in
 * clnode/solver.h): the documented defaults, written up to the program's struct_size and read
 * back as this library's struct (the sizes policy of clnode/common.h); the table itself, by
 * name; setting, parsing and formatting an option; the validation of every value against its
 * type and range. A row appended to the table needs nothing here. The problem (clnode_problem)
 * is read as the options are, up to its struct_size. */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "core/internal.h"
#include "solver/options.h"

/* ---- the named values of the CHOICE options ---- */

static const char *const precision_names[] = {"fp32", "fp64"};
static const int precision_values[] = {CLNODE_FP32, CLNODE_FP64};
static const char *const gemm_precision_names[] = {"strict", "tf32"};
static const int gemm_precision_values[] = {CLNODE_GEMM_STRICT, CLNODE_GEMM_TF32};
static const char *const precision_guard_names[] = {"warn", "refuse", "off"};
static const int precision_guard_values[] = {CLNODE_GUARD_WARN, CLNODE_GUARD_REFUSE,
                                             CLNODE_GUARD_OFF};

/* A CHOICE row names its values NAME_names / NAME_values above; other rows have none. */
#define CLN_CHOICES_NONE(name) .n_choices = 0, .choice_names = NULL, .choice_values = NULL
#define CLN_CHOICES_REAL CLN_CHOICES_NONE
#define CLN_CHOICES_INTEGER CLN_CHOICES_NONE
#define CLN_CHOICES_BOOLEAN CLN_CHOICES_NONE
#define CLN_CHOICES_METHOD CLN_CHOICES_NONE
#define CLN_CHOICES_CHOICE(name)                                                                   \
    .n_choices = sizeof name##_names / sizeof name##_names[0], .choice_names = name##_names,       \
    .choice_values = name##_values

#define CLN_WHERE_KERNEL CLNODE_OPTION_KERNEL
#define CLN_WHERE_HOST 0u

static const clnode_option_info cln_options[] = {
#define CLN_X_INFO(ctype, name_, type_, where, def, min_, max_, flags_, doc_)                      \
    {.struct_size = sizeof(clnode_option_info),                                                    \
     .name = #name_,                                                                               \
     .type = CLNODE_OPTION_##type_,                                                                \
     .flags = (flags_) | CLN_WHERE_##where,                                                        \
     .default_value = (double)(def),                                                               \
     .min = (double)(min_),                                                                        \
     .max = (double)(max_),                                                                        \
     .doc = doc_,                                                                                  \
     CLN_CHOICES_##type_(name_)},
    CLNODE_SOLVE_OPTION_LIST(CLN_X_INFO)
#undef CLN_X_INFO
};

#define CLN_NUM_OPTIONS (sizeof cln_options / sizeof cln_options[0])

size_t clnode_solve_option_count(void)
{
    return CLN_NUM_OPTIONS;
}

const clnode_option_info *clnode_solve_option_at(size_t i)
{
    return i < CLN_NUM_OPTIONS ? &cln_options[i] : NULL;
}

const clnode_option_info *clnode_solve_option_find(const char *name)
{
    for (size_t i = 0; name && i < CLN_NUM_OPTIONS; ++i)
        if (strcmp(cln_options[i].name, name) == 0)
            return &cln_options[i];
    return NULL;
}

/* ---- values in and out of the struct, by the row's type ---- */

#define CLN_STORE_REAL(field, v) ((field) = (v))
#define CLN_STORE_INTEGER(field, v) ((field) = (long)(v))
#define CLN_STORE_BOOLEAN(field, v) ((field) = (int)(v))
#define CLN_STORE_CHOICE(field, v) ((field) = (int)(v))
#define CLN_STORE_METHOD(field, v) ((field) = clnode_method_at((size_t)(v)))

/* The index of method m in clnode_method_at, or -1. */
static double cln_method_index(const clnode_method *m)
{
    for (size_t i = 0; clnode_method_at(i); ++i)
        if (clnode_method_at(i) == m)
            return (double)i;
    return -1.0;
}

#define CLN_LOAD_REAL(field) (field)
#define CLN_LOAD_INTEGER(field) ((double)(field))
#define CLN_LOAD_BOOLEAN(field) ((double)(field))
#define CLN_LOAD_CHOICE(field) ((double)(field))
#define CLN_LOAD_METHOD(field) cln_method_index(field)

/* Option i's value in o (a valid value: set through cln_store). */
static double cln_load(const clnode_solve_options *o, size_t i)
{
    size_t k = 0;
#define CLN_X_LOAD(ctype, name, type, where, def, min, max, flags, doc)                                   \
    if (k++ == i)                                                                                  \
        return CLN_LOAD_##type(o->name);
    CLNODE_SOLVE_OPTION_LIST(CLN_X_LOAD)
#undef CLN_X_LOAD
    return NAN;
}

static void cln_store(clnode_solve_options *o, size_t i, double v)
{
    size_t k = 0;
#define CLN_X_STORE(ctype, name, type, where, def, min, max, flags, doc)                                  \
    if (k++ == i) {                                                                                \
        CLN_STORE_##type(o->name, v);                                                              \
        return;                                                                                    \
    }
    CLNODE_SOLVE_OPTION_LIST(CLN_X_STORE)
#undef CLN_X_STORE
}

/* ---- checking a value against its row ---- */

static void cln_message(char *message, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void cln_message(char *message, size_t size, const char *fmt, ...)
{
    if (!message || size == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, size, fmt, ap);
    va_end(ap);
}

/* A bound as text: "inf" for an unbounded end. */
static void cln_bound(char *buf, size_t n, double b, int integer)
{
    if (b >= DBL_MAX || b <= -DBL_MAX)
        snprintf(buf, n, "%sinf", b < 0 ? "-" : "");
    else if (integer)
        snprintf(buf, n, "%.0f", b);
    else
        snprintf(buf, n, "%g", b);
}

/* "one of a, b, c" for a CHOICE or METHOD option. */
static void cln_choices_text(const clnode_option_info *in, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    const size_t count = in->type == CLNODE_OPTION_METHOD ? SIZE_MAX : in->n_choices;
    for (size_t k = 0; k < count && used < n; ++k) {
        const char *name = in->type == CLNODE_OPTION_METHOD
                               ? (clnode_method_at(k) ? clnode_method_at(k)->name : NULL)
                               : in->choice_names[k];
        if (!name)
            break;
        used += (size_t)snprintf(buf + used, n - used, "%s%s", k ? ", " : "", name);
    }
}

/* Whether v is a value of option `in`; if not, the message says what it takes. */
static int cln_value_ok(const clnode_option_info *in, double v, char *message, size_t size)
{
    char lo[32], hi[32], all[160];
    switch (in->type) {
    case CLNODE_OPTION_REAL:
    case CLNODE_OPTION_INTEGER: {
        const int integer = in->type == CLNODE_OPTION_INTEGER;
        const int ok = isfinite(v) && (integer ? v == floor(v) : 1) &&
                       ((in->flags & CLNODE_OPTION_MIN_OPEN) ? v > in->min : v >= in->min) &&
                       ((in->flags & CLNODE_OPTION_MAX_OPEN) ? v < in->max : v <= in->max);
        if (ok)
            return 1;
        cln_bound(lo, sizeof lo, in->min, integer);
        cln_bound(hi, sizeof hi, in->max, integer);
        cln_message(message, size, "%s = %.17g is out of range %c%s, %s%c%s", in->name, v,
                    (in->flags & CLNODE_OPTION_MIN_OPEN) || in->min <= -DBL_MAX ? '(' : '[', lo, hi,
                    (in->flags & CLNODE_OPTION_MAX_OPEN) || in->max >= DBL_MAX ? ')' : ']',
                    integer ? " (an integer)" : " (a finite number)");
        return 0;
    }
    case CLNODE_OPTION_BOOLEAN:
        if (v == 0.0 || v == 1.0)
            return 1;
        cln_message(message, size, "%s = %.17g must be 0 or 1", in->name, v);
        return 0;
    case CLNODE_OPTION_CHOICE:
        for (size_t k = 0; k < in->n_choices; ++k)
            if (v == (double)in->choice_values[k])
                return 1;
        break;
    case CLNODE_OPTION_METHOD:
        if (v >= 0.0 && v == floor(v) && v < (double)SIZE_MAX && clnode_method_at((size_t)v))
            return 1;
        break;
    }
    cln_choices_text(in, all, sizeof all);
    cln_message(message, size, "%s takes one of %s (not the value %.17g)", in->name, all, v);
    return 0;
}

clnode_status clnode_solve_option_set(clnode_solve_options *opts, const char *name, double value,
                                      char *message, size_t size)
{
    const clnode_option_info *in = clnode_solve_option_find(name);
    if (!opts || !in) {
        cln_message(message, size, "no solve option called \"%s\"", name ? name : "(null)");
        return CLNODE_ERR_INVALID_ARGUMENT;
    }
    if (!cln_value_ok(in, value, message, size))
        return CLNODE_ERR_INVALID_ARGUMENT;
    cln_store(opts, (size_t)(in - cln_options), value);
    return CLNODE_OK;
}

/* The named value `text` of a CHOICE or METHOD option, or -1. */
static double cln_choice_of(const clnode_option_info *in, const char *text)
{
    if (in->type == CLNODE_OPTION_METHOD) {
        const clnode_method *m = clnode_method_by_name(text);
        return m ? cln_method_index(m) : -1.0;
    }
    for (size_t k = 0; k < in->n_choices; ++k)
        if (strcmp(in->choice_names[k], text) == 0)
            return (double)in->choice_values[k];
    return -1.0;
}

/* text as a BOOLEAN: 1, 0, or -1. */
static double cln_boolean_of(const char *text)
{
    static const char *const yes[] = {"1", "yes", "true", "on"}, *const no[] = {"0", "no",
                                                                                   "false", "off"};
    for (size_t k = 0; k < 4; ++k) {
        if (strcasecmp(text, yes[k]) == 0)
            return 1.0;
        if (strcasecmp(text, no[k]) == 0)
            return 0.0;
    }
    return -1.0;
}

clnode_status clnode_solve_option_parse(clnode_solve_options *opts, const char *name,
                                        const char *text, char *message, size_t size)
{
    const clnode_option_info *in = clnode_solve_option_find(name);
    if (!opts || !in || !text) {
        cln_message(message, size, "no solve option called \"%s\"", name ? name : "(null)");
        return CLNODE_ERR_INVALID_ARGUMENT;
    }
    double v;
    char all[160];
    if (strcmp(in->name, "dt0") == 0 && strcmp(text, "auto") == 0) {
        /* both values are in range: neither store fails */
        const clnode_status st = clnode_solve_option_set(opts, "dt0", 0.0, message, size);
        return st == CLNODE_OK ? clnode_solve_option_set(opts, "dt0_auto", 1.0, message, size) : st;
    }
    if (in->type == CLNODE_OPTION_CHOICE || in->type == CLNODE_OPTION_METHOD) {
        if ((v = cln_choice_of(in, text)) < 0.0) {
            cln_choices_text(in, all, sizeof all);
            cln_message(message, size, "%s takes one of %s, not \"%s\"", in->name, all, text);
            return CLNODE_ERR_INVALID_ARGUMENT;
        }
    } else if (in->type == CLNODE_OPTION_BOOLEAN) {
        if ((v = cln_boolean_of(text)) < 0.0) {
            cln_message(message, size, "%s takes yes or no (1/0, true/false, on/off), not \"%s\"",
                        in->name, text);
            return CLNODE_ERR_INVALID_ARGUMENT;
        }
    } else {
        char *end = NULL;
        errno = 0;
        v = strtod(text, &end);
        if (end == text || *end != '\0' || (errno == ERANGE && isinf(v)) ||
            isspace((unsigned char)text[0])) {
            cln_message(message, size, "%s takes %s, not \"%s\"", in->name,
                        in->type == CLNODE_OPTION_INTEGER ? "an integer" : "a number", text);
            return CLNODE_ERR_INVALID_ARGUMENT;
        }
    }
    return clnode_solve_option_set(opts, name, v, message, size);
}

clnode_status clnode_solve_option_get(const clnode_solve_options *opts, const char *name,
                                      double *value)
{
    const clnode_option_info *in = clnode_solve_option_find(name);
    if (!opts || !in || !value)
        return CLNODE_ERR_INVALID_ARGUMENT;
    *value = cln_load(opts, (size_t)(in - cln_options));
    return CLNODE_OK;
}

clnode_status clnode_solve_option_format(const clnode_solve_options *opts, const char *name,
                                         char *text, size_t size)
{
    const clnode_option_info *in = clnode_solve_option_find(name);
    double v;
    if (!in || !text || size == 0 || clnode_solve_option_get(opts, name, &v) != CLNODE_OK)
        return CLNODE_ERR_INVALID_ARGUMENT;
    int n;
    if (in->type == CLNODE_OPTION_METHOD) {
        const clnode_method *m = v >= 0.0 ? clnode_method_at((size_t)v) : NULL;
        n = snprintf(text, size, "%s", m ? m->name : "?");
    } else if (in->type == CLNODE_OPTION_CHOICE) {
        const char *s = "?";
        for (size_t k = 0; k < in->n_choices; ++k)
            if (v == (double)in->choice_values[k])
                s = in->choice_names[k];
        n = snprintf(text, size, "%s", s);
    } else if (in->type == CLNODE_OPTION_REAL) {
        n = snprintf(text, size, "%.17g", v);
    } else {
        n = snprintf(text, size, "%.0f", v);
    }
    return n >= 0 && (size_t)n < size ? CLNODE_OK : CLNODE_ERR_INVALID_ARGUMENT;
}

clnode_status cln_validate_options(clnode_context *ctx, const clnode_solve_options *o,
                                   int controller)
{
    char message[256];
    for (size_t i = 0; i < CLN_NUM_OPTIONS; ++i) {
        const clnode_option_info *in = &cln_options[i];
        if ((in->flags & CLNODE_OPTION_PROBLEM) || in->type == CLNODE_OPTION_METHOD ||
            !(in->flags & CLNODE_OPTION_CONTROLLER) != !controller)
            continue;
        CLN_CHECK(ctx, cln_value_ok(in, cln_load(o, i), message, sizeof message),
                  CLNODE_ERR_INVALID_ARGUMENT, "%s", message);
    }
    return CLNODE_OK;
}

/* ---- defaults and the program's struct ---- */

#define CLN_X_DEFAULT(ctype, name, type, where, def, min, max, flags, doc) CLN_STORE_##type(o->name, def);

void cln_solve_defaults(clnode_solve_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    CLNODE_SOLVE_OPTION_LIST(CLN_X_DEFAULT)
}

void cln_solve_seed_defaults(clnode_solve_options *o)
{
    cln_solve_defaults(o);
    o->t0 = 0.0;
    o->t1 = 50.0;
    o->dt0 = 0.02;
    o->rtol = 1e-4;
    o->atol = 1e-6;
}

CLN_DEFAULTS_SIZED(clnode_solve_default_options_sized, clnode_solve_options, cln_solve_defaults)
CLN_DEFAULTS_SIZED(clnode_solve_seed_options_sized, clnode_solve_options, cln_solve_seed_defaults)

clnode_status cln_solve_options_import(clnode_context *ctx, const clnode_solve_options *in,
                                       clnode_solve_options *full)
{
    cln_solve_defaults(full);
    return cln_struct_import(ctx, "clnode_solve_options", in, CLN_SOLVE_OPTIONS_MIN, full,
                             sizeof *full);
}

/* A problem's defaults: no trajectories, every array NULL. */
static void problem_defaults(clnode_problem *p)
{
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
}

CLN_DEFAULTS_SIZED(clnode_problem_default_sized, clnode_problem, problem_defaults)

clnode_status cln_problem_import(clnode_context *ctx, const clnode_problem *in,
                                 clnode_problem *full)
{
    problem_defaults(full);
    CLN_CHECK(ctx, in, CLNODE_ERR_INVALID_ARGUMENT, "no problem (clnode_problem is NULL)");
    return cln_struct_import(ctx, "clnode_problem", in, CLN_PROBLEM_MIN, full, sizeof *full);
}
