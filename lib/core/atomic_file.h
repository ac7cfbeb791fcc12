/* atomic_file.h - a file written atomically: its bytes go to a temporary file in the same
 * directory, which is then renamed over it, so that a reader sees the old file or the whole new
 * one, and a failed write leaves the old one untouched and no temporary file behind.
 *
 * The one helper of every file that clnode writes whole: the library's probe cache
 * (backends/probe_cache.c) and, through the static library clnode_atomic_file, the tools' output
 * files (tools/common/tool_out.c), their .npy files (tools/arrays/npy.c) and clnode-solve's
 * progress record (tools/clnode-solve/ranks_record.c). libc (POSIX) only: it logs and prints
 * nothing; each function returns 0 or -1 with errno set, and the caller says what failed. */
#ifndef CLNODE_CORE_ATOMIC_FILE_H
#define CLNODE_CORE_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

/* How the temporary file is made and forgotten; a NULL member does the plain thing. The tools
 * register their temporary files for removal on a signal (tools/common/tool_temp.h). */
typedef struct cln_atomic_hooks {
    /* Creates the file from the mkstemp template `name` (replaced in place) with permissions
     * `mode`, registered. Returns its descriptor and the registration in *slot, or -1 with errno
     * set. NULL: mkstemp, then fchmod. */
    int (*create)(char *name, unsigned mode, int *slot);
    /* Registers a fixed name before it is created (CLN_ATOMIC_FIXED_NAME). Returns the
     * registration, or -1 (the file is then written unregistered). NULL: nothing. */
    int (*track)(const char *name);
    /* Forgets a registration (the file was renamed or removed); accepts -1. NULL: nothing. */
    void (*release)(int slot);
} cln_atomic_hooks;

enum {
    /* The bytes on the disk (fsync) before the rename, and the directory's entry after it: the
       file survives the machine stopping, not only the process. */
    CLN_ATOMIC_DURABLE = 1,
    /* The temporary file is PATH.tmp (created or truncated), for a path that one writer alone
       writes: a rerun's write replaces what a killed one left there. Without it the temporary
       file is ".NAME.XXXXXX" beside PATH, made by mkstemp: writers of the same path at once each
       write their own. */
    CLN_ATOMIC_FIXED_NAME = 2,
};

/* A file being written. */
typedef struct cln_atomic_file {
    char *tmp; /* the temporary file (malloc'd), or NULL: none (committed, abandoned, or none
                  opened) */
    int fd;    /* its descriptor until closed (or handed to a stream), or -1 */
    int slot;  /* its registration (hooks), or -1 */
    int flags; /* CLN_ATOMIC_* */
    int keep;  /* cln_atomic_abort leaves the temporary file where it is */
    const cln_atomic_hooks *hooks;
} cln_atomic_file;

/* The permissions fopen gives a new file: 0666 less the process's umask. */
unsigned cln_atomic_new_mode(void);

/* Creates the temporary file of `path` (flags: CLN_ATOMIC_*) with permissions `mode`, open for
 * writing in a->fd. hooks may be NULL. Returns 0, or -1 with errno set (nothing left behind). */
int cln_atomic_open(cln_atomic_file *a, const char *path, unsigned mode, int flags,
                    const cln_atomic_hooks *hooks);

/* A stdio stream ("w" or "wb") on a->fd, which it then owns (a->fd becomes -1): the caller
 * flushes and closes it (fclose) before cln_atomic_commit. Returns NULL with errno set. */
FILE *cln_atomic_stream(cln_atomic_file *a, const char *mode);

/* Closes a->fd if it is open, after fsync with CLN_ATOMIC_DURABLE. Returns 0 or -1. */
int cln_atomic_close(cln_atomic_file *a);

/* Closes a->fd if it is open (cln_atomic_close) and renames the temporary file over `path`; with
 * CLN_ATOMIC_DURABLE the directory's entry is then synced too (a failure there returns -1, the
 * file already in place). Returns 0, or -1 with errno set: a failed close or rename keeps the
 * temporary file for cln_atomic_abort. */
int cln_atomic_commit(cln_atomic_file *a, const char *path);

/* Abandons the file: closes a->fd, removes the temporary file (unless a->keep) and releases its
 * registration. Does nothing after a commit, or on a file never opened (a->tmp NULL). */
void cln_atomic_abort(cln_atomic_file *a);

/* The whole of data (len bytes) written to `path` atomically: cln_atomic_open, the bytes,
 * cln_atomic_commit, and cln_atomic_abort on a failure. Returns 0, or -1 with errno set. */
int cln_atomic_write(const char *path, const void *data, size_t len, unsigned mode, int flags,
                     const cln_atomic_hooks *hooks);

#endif /* CLNODE_CORE_ATOMIC_FILE_H */
