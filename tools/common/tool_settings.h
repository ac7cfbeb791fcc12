/* tool_settings.h - the solve settings a model file carries: string metadata of its safetensors
 * header, "clnode.<option>" for an option of the library's table (the text
 * clnode_solve_option_parse reads; booleans "true"/"false") and "clnode.save_ts" (save times,
 * comma-separated). Every option of the table is a setting but those that change no result
 * (CLNODE_OPTION_SAME_BITS: compact, keep_tape, checkpoint_every). The Python package writes them
 * (clnode.MLP.save(path, settings=...)); doc/deploy.md names the keys. */
#ifndef CLNODE_TOOL_SETTINGS_H
#define CLNODE_TOOL_SETTINGS_H

#include "tool_problem.h"

/* The --help lines of --model in clnode-solve, which reads the settings. */
extern const char tool_settings_model_help[];

/* The prefix of every settings key. */
#define TOOL_SETTINGS_PREFIX "clnode."
/* The key of the save times. */
#define TOOL_SETTINGS_SAVE_TS "clnode.save_ts"

typedef struct tool_settings {
    clnode_solve_options opts;           /* the library's defaults, then the file's values */
    unsigned char set[TOOL_OPTIONS_MAX]; /* by table index: the file sets the option */
    size_t count;                        /* the keys the file sets, clnode.save_ts included */
    int save;                            /* the file sets a save option or clnode.save_ts */
    double *ts;                          /* clnode.save_ts (malloc'ed), or NULL */
    size_t n_ts;
} tool_settings;

/* Reads the settings of `model`, loaded from `path` (which messages name), onto the library's
 * defaults: each key's value is checked as the option takes it, and together t0, t1 and dt0 (the
 * sign of dt0) and the save times (finite, in the direction of integration, inside [t0, t1]). A
 * key under the prefix that names no setting is refused, naming it. Returns 0, or 2 (bad input)
 * or 3 (out of memory) after printing an error "PATH: metadata KEY ...". Call
 * tool_settings_free in every case. Pure but for the message. */
int tool_settings_read(const clnode_model *model, const char *path, tool_settings *s);
void tool_settings_free(tool_settings *s);

/* Puts the settings of pb->model_path, read into `s`, under the options given on the command
 * line (pb->given): every table option not given takes the file's value, or the library's default
 * where the file has none (not the seed problem's); the save options and save times do when the
 * command line chose none (pb->save_given: --save, --ts-file, --in's ts). Records in
 * pb->settings_keys which options came from the file. The save times pass to pb (which frees
 * them). Returns 0, or 2 after an error (save times of the file outside the interval the command
 * line set). */
int tool_settings_apply(tool_problem *pb, tool_settings *s);

/* Both, for the model `model` of pb->model_path (nothing without --model: the built-in seed model
 * keeps the seed problem's defaults). Call after the per-trajectory arrays are read (their save
 * times count as the command line's). Returns 0, or 2 or 3 after an error. */
int tool_settings_load(tool_problem *pb, const clnode_model *model);

#endif /* CLNODE_TOOL_SETTINGS_H */
