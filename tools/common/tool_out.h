/* tool_out.h - the tools' output files.
 *
 * An output is written to a temporary file ".NAME.XXXXXX" beside its target and renamed over the
 * target when complete, so that a failed run leaves no partial file and an existing file
 * untouched. An output never destroys an input or another file's identity:
 *   - an output that is the same file as an input (the same device and inode, whatever path
 *     names either: relative, absolute, a hard link, a symbolic link) is refused
 *     (tool_out_check_inputs), before anything is read or written;
 *   - a symbolic link is written through: its final target is replaced and the link stays
 *     (a link to a file that does not exist is refused);
 *   - an existing target keeps its permission bits, owner and group; a new one gets
 *     0666 & ~umask, as fopen would give;
 *   - an existing target the user could not write in place is refused: one without write
 *     permission, or (for a user other than root, who cannot give a file away) one owned by
 *     another user;
 *   - the temporary file is removed on SIGINT, SIGTERM, SIGHUP, SIGPIPE and SIGXFSZ
 *     (tool_temp.h).
 * "-" is standard output; an existing target that is not a regular file (/dev/null, a pipe) is
 * written directly. Failures to write are exit status 3 (TOOL_EXIT_RESOURCE), an output naming
 * an input 2 (TOOL_EXIT_INPUT). */
#ifndef CLNODE_TOOL_OUT_H
#define CLNODE_TOOL_OUT_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "atomic_file.h"

/* One input file of a run: the option that names it and the path as given (NULL: not given;
 * "-": standard input, compared through its descriptor). */
typedef struct tool_input {
    const char *option;
    const char *path;
} tool_input;

/* Refuses the output `path` of option `option` (NULL or "-": nothing to check) when it is the
 * same file as one of the n inputs. Returns 0, or 2 after printing an error naming the option
 * and both paths. */
int tool_out_check_inputs(const char *option, const char *path, const tool_input *in, size_t n);

/* The file an output replaces, checked as above. */
typedef struct tool_target {
    char *path;  /* the output's path, or its symbolic link's final target (malloc'd) */
    int exists;  /* a regular file is there: its mode, owner and group are kept */
    int special; /* it exists and is not a regular file: written directly, not replaced */
    mode_t mode; /* permission bits of the new file */
    uid_t uid;
    gid_t gid;
} tool_target;

/* Resolves and checks the target of the output `path`. Returns 0, or 3 after printing an
 * error. */
int tool_target_open(tool_target *t, const char *path);
/* Creates the temporary file beside t->path (atomic_file.h: registered for removal on a signal)
 * and gives it the target's mode, owner and group. shown: the path as the user gave it, for
 * messages. Returns its descriptor (a->fd), or -1 after printing an error. */
int tool_target_mktemp(const tool_target *t, const char *shown, cln_atomic_file *a);
/* Gives the open file fd the target's mode, owner and group. Returns 0, or 3 after printing an
 * error. */
int tool_target_adopt(const tool_target *t, int fd, const char *shown);
void tool_target_free(tool_target *t);

/* An output file opened by tool_out_open. */
typedef struct tool_out {
    FILE *f;
    char *path; /* as given */
    /* the temporary file (a.tmp NULL: written directly); a.keep: it is not removed when the
       output is abandoned (a progress record's) */
    cln_atomic_file a;
    tool_target t;
    int is_stdout;
} tool_out;

/* Returns 0, or 2 (an empty name) or 3 (the target cannot be written, or not in place) after
 * printing an error. */
int tool_out_open(tool_out *o, const char *path);
/* Flushes, closes and renames. Returns 0, or 3 after printing an error (the temporary file is
 * removed). */
int tool_out_commit(tool_out *o);
/* Commits n outputs together (a run's outputs appear together or not at all): each is flushed
 * and closed (an entry whose f is NULL is taken as closed), then, unless a signal was received
 * (tool_temp.h), each temporary file is renamed over its target, a signal arriving meanwhile
 * acted on once every rename is done. Every output is then released (tool_out_abort: the
 * temporary files of a failure are removed). Returns 0, or 3 after printing an error. */
int tool_out_commit_all(tool_out *const *o, size_t n);
/* Closes and removes the temporary file. Accepts an output never opened (zeroed). */
void tool_out_abort(tool_out *o);

#endif /* CLNODE_TOOL_OUT_H */
