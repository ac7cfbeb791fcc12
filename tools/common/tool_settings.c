/* tool_settings.c - the solve settings a model file carries (tool_settings.h). */
#include "tool_settings.h"

#include <stdlib.h>
#include <string.h>

const char tool_settings_model_help[] =
    "  --model FILE            safetensors MLP (default: the built-in seed model). The\n"
    "                          solve settings it carries (metadata clnode.<option> and\n"
    "                          clnode.save_ts: its training's, see clnode.MLP.save)\n"
    "                          replace the defaults below, which are the seed problem's;\n"
    "                          one it lacks takes the library's default (that of\n"
    "                          clnode_solve_default_options and of clnode.solve's\n"
    "                          options: t0 0, t1 1, dt0 0.01, rtol 1e-3, atol 1e-6,\n"
    "                          tsit5, fp32; clnode.solve itself asks for t0 and t1);\n"
    "                          every option given wins, and --save, --ts-file or --in's\n"
    "                          ts replace its save settings\n";

/* The table option that `key` (under the prefix) names when it is a setting, with its index in
 * the table; NULL for a key that names none. */
static const clnode_option_info *setting_option(const char *key, size_t *index)
{
    const clnode_option_info *in = clnode_solve_option_find(key + strlen(TOOL_SETTINGS_PREFIX));
    if (!in || (in->flags & CLNODE_OPTION_SAME_BITS))
        return NULL;
    *index = (size_t)(in - clnode_solve_option_at(0));
    return *index < TOOL_OPTIONS_MAX ? in : NULL;
}

/* Refuses a key under the prefix that names no setting, listing the settings. */
static int unknown_key(const char *path, const char *key)
{
    char all[1024];
    size_t used = 0;
    for (size_t i = 0; i < clnode_solve_option_count() && used < sizeof all; ++i) {
        const clnode_option_info *in = clnode_solve_option_at(i);
        if (!(in->flags & CLNODE_OPTION_SAME_BITS))
            used += (size_t)snprintf(all + used, sizeof all - used, "%s%s", in->name, ", ");
    }
    if (used < sizeof all)
        snprintf(all + used, sizeof all - used, "save_ts");
    const clnode_option_info *in = clnode_solve_option_find(key + strlen(TOOL_SETTINGS_PREFIX));
    tool_error("%s: metadata key '%s' is no solve setting%s (the settings are %s followed by one "
               "of: %s)",
               path, key,
               in && (in->flags & CLNODE_OPTION_SAME_BITS)
                   ? " (it says how the work is done, and changes no result: give it on the "
                     "command line)"
                   : "",
               TOOL_SETTINGS_PREFIX, all);
    return TOOL_EXIT_INPUT;
}

/* One option's key: its value as the option takes it (booleans "true" or "false", as the other
 * metadata of the file). */
static int read_option(tool_settings *s, const char *path, const char *key, const char *value)
{
    size_t i = 0;
    const clnode_option_info *in = setting_option(key, &i);
    if (!in)
        return unknown_key(path, key);
    if (s->set[i]) {
        tool_error("%s: metadata key '%s' is given twice", path, key);
        return TOOL_EXIT_INPUT;
    }
    if (in->type == CLNODE_OPTION_BOOLEAN && strcmp(value, "true") != 0 &&
        strcmp(value, "false") != 0) {
        tool_error("%s: metadata %s takes \"true\" or \"false\", not \"%s\"", path, key, value);
        return TOOL_EXIT_INPUT;
    }
    char msg[320];
    if (clnode_solve_option_parse(&s->opts, in->name, value, msg, sizeof msg) != CLNODE_OK) {
        tool_error("%s: metadata %s: %s", path, key, msg);
        return TOOL_EXIT_INPUT;
    }
    s->set[i] = 1;
    s->save |= (in->flags & CLNODE_OPTION_SAVE) != 0;
    return 0;
}

/* The save times "T1,T2,...": finite numbers, at least one. */
static int read_save_ts(tool_settings *s, const char *path, const char *value)
{
    if (s->ts) {
        tool_error("%s: metadata key '%s' is given twice", path, TOOL_SETTINGS_SAVE_TS);
        return TOOL_EXIT_INPUT;
    }
    char err[256];
    const int rc = tool_parse_list(value, TOOL_SETTINGS_SAVE_TS, &s->ts, &s->n_ts, err, sizeof err);
    if (rc) {
        tool_error("%s: metadata %s", path, err);
        return rc;
    }
    s->save = 1;
    return 0;
}

/* Save times in the direction of integration and inside [t0, t1]. Returns 0, or 2 after an error
 * naming the key and `why` (where the interval came from). */
static int check_save_ts(const char *path, const double *ts, size_t n, double t0, double t1,
                         const char *why)
{
    const double lo = t0 < t1 ? t0 : t1, hi = t0 < t1 ? t1 : t0, dir = t1 < t0 ? -1.0 : 1.0;
    for (size_t k = 0; k < n; ++k) {
        if (ts[k] < lo || ts[k] > hi) {
            tool_error("%s: metadata %s: %g lies outside the interval [%g, %g]%s", path,
                       TOOL_SETTINGS_SAVE_TS, ts[k], t0, t1, why);
            return TOOL_EXIT_INPUT;
        }
        if (k && (ts[k] - ts[k - 1]) * dir < 0) {
            tool_error("%s: metadata %s: %g follows %g, against the direction of integration "
                       "(t0 %g to t1 %g)",
                       path, TOOL_SETTINGS_SAVE_TS, ts[k], ts[k - 1], t0, t1);
            return TOOL_EXIT_INPUT;
        }
    }
    return 0;
}

int tool_settings_read(const clnode_model *model, const char *path, tool_settings *s)
{
    memset(s, 0, sizeof *s);
    clnode_solve_default_options(&s->opts);
    const size_t plen = strlen(TOOL_SETTINGS_PREFIX);
    for (size_t k = 0; k < clnode_model_metadata_count(model); ++k) {
        const char *key = clnode_model_metadata_key(model, k);
        const char *value = clnode_model_metadata_value(model, k);
        if (strncmp(key, TOOL_SETTINGS_PREFIX, plen) != 0)
            continue;
        const int rc = strcmp(key, TOOL_SETTINGS_SAVE_TS) == 0 ? read_save_ts(s, path, value)
                                                               : read_option(s, path, key, value);
        if (rc)
            return rc;
        s->count++;
    }
    const clnode_solve_options *o = &s->opts;
    if (o->dt0 != 0.0 && (o->t1 - o->t0) * o->dt0 < 0) {
        tool_error("%s: metadata clnode.dt0 = %g has not the sign of t1 - t0 (t0 %g, t1 %g)", path,
                   o->dt0, o->t0, o->t1);
        return TOOL_EXIT_INPUT;
    }
    return check_save_ts(path, s->ts, s->n_ts, o->t0, o->t1,
                         " (t0, t1: the file's, else the library's defaults)");
}

void tool_settings_free(tool_settings *s)
{
    free(s->ts);
    s->ts = NULL;
    s->n_ts = 0;
}

/* Appends an option's name to pb->settings_keys. */
static void note_key(tool_problem *pb, const char *name)
{
    const size_t n = strlen(pb->settings_keys);
    snprintf(pb->settings_keys + n, sizeof pb->settings_keys - n, "%s%s", n ? " " : "", name);
}

int tool_settings_apply(tool_problem *pb, tool_settings *s)
{
    pb->settings_from = pb->model_path;
    pb->settings_keys[0] = '\0';
    for (size_t i = 0; i < clnode_solve_option_count() && i < TOOL_OPTIONS_MAX; ++i) {
        const clnode_option_info *in = clnode_solve_option_at(i);
        if (pb->given[i] || (in->flags & CLNODE_OPTION_SAME_BITS) ||
            ((in->flags & CLNODE_OPTION_SAVE) && pb->save_given))
            continue;
        double v = 0.0;
        clnode_solve_option_get(&s->opts, in->name, &v);
        clnode_solve_option_set(&pb->opts, in->name, v, NULL, 0); /* read: in its range */
        if (s->set[i])
            note_key(pb, in->name);
    }
    if (pb->save_given || !s->ts)
        return 0;
    pb->ts = s->ts; /* pb frees them (tool_problem_free) */
    pb->n_ts = s->n_ts;
    s->ts = NULL;
    pb->prob.save_ts = pb->ts;
    pb->prob.n_save_ts = pb->n_ts;
    note_key(pb, "save_ts");
    if (pb->prob.t0s || pb->prob.t1s) /* each trajectory saves the times inside its interval */
        return 0;
    return check_save_ts(pb->model_path, pb->ts, pb->n_ts, pb->opts.t0, pb->opts.t1,
                         " that the command line sets: give --save too");
}

int tool_settings_load(tool_problem *pb, const clnode_model *model)
{
    if (!pb->model_path)
        return 0; /* the built-in seed model: the seed problem's defaults */
    if (clnode_solve_option_count() > TOOL_OPTIONS_MAX) { /* pb->given would miss options */
        tool_error("the library has %zu solve options, more than the %d this tool was built for",
                   clnode_solve_option_count(), TOOL_OPTIONS_MAX);
        return TOOL_EXIT_INPUT;
    }
    tool_settings s;
    int rc = tool_settings_read(model, pb->model_path, &s);
    if (!rc)
        rc = tool_settings_apply(pb, &s);
    tool_settings_free(&s);
    return rc;
}
