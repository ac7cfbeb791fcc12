/* tool_out.c - the tools' output files (tool_out.h). */
#define _XOPEN_SOURCE 700 /* realpath */
#include "tool_out.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tool_common.h"
#include "tool_temp.h"

int tool_out_check_inputs(const char *option, const char *path, const tool_input *in, size_t n)
{
    struct stat so;
    if (!path || strcmp(path, "-") == 0 || stat(path, &so) != 0 || !S_ISREG(so.st_mode))
        return 0; /* a new file, standard output or a device: no input is lost */
    for (size_t i = 0; i < n; ++i) {
        if (!in[i].path)
            continue;
        const int is_stdin = strcmp(in[i].path, "-") == 0;
        struct stat si;
        if ((is_stdin ? fstat(STDIN_FILENO, &si) : stat(in[i].path, &si)) != 0)
            continue; /* the input's reader says why it cannot be read */
        if (si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
            tool_error("%s %s is the same file as %s %s%s: an output never replaces an input; "
                       "write it elsewhere",
                       option, path, in[i].option, in[i].path, is_stdin ? " (standard input)" : "");
            return TOOL_EXIT_INPUT;
        }
    }
    return 0;
}

void tool_target_free(tool_target *t)
{
    free(t->path);
    memset(t, 0, sizeof *t);
}

int tool_target_open(tool_target *t, const char *path)
{
    memset(t, 0, sizeof *t);
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
        t->path = realpath(path, NULL); /* written through the link: its final target */
        if (!t->path) {
            tool_error("cannot write %s: it is a symbolic link whose target cannot be resolved "
                       "(%s)",
                       path, strerror(errno));
            return TOOL_EXIT_RESOURCE;
        }
    } else if (!(t->path = strdup(path))) {
        tool_error("out of memory");
        return TOOL_EXIT_RESOURCE;
    }
    const mode_t mask = umask(0);
    umask(mask);
    t->mode = 0666 & ~mask;
    if (stat(t->path, &st) != 0) {
        if (errno == ENOENT)
            return 0; /* a new file; its directory is checked when the temporary file is made */
        tool_error("cannot write %s: %s", path, strerror(errno));
        tool_target_free(t);
        return TOOL_EXIT_RESOURCE;
    }
    if (!S_ISREG(st.st_mode)) {
        t->special = 1;
        return 0;
    }
    if (faccessat(AT_FDCWD, t->path, W_OK, AT_EACCESS) != 0) {
        tool_error("cannot write %s: %s; an existing file you could not write in place is not "
                   "replaced (remove it, or write elsewhere)",
                   path, strerror(errno));
        tool_target_free(t);
        return TOOL_EXIT_RESOURCE;
    }
    if (st.st_uid != geteuid() && geteuid() != 0) { /* only root can give the new file away */
        tool_error("cannot write %s: it belongs to another user (uid %lu) and the file written in "
                   "its place would be yours; it is not replaced (remove it, or write elsewhere)",
                   path, (unsigned long)st.st_uid);
        tool_target_free(t);
        return TOOL_EXIT_RESOURCE;
    }
    t->exists = 1;
    t->mode = st.st_mode & 07777;
    t->uid = st.st_uid;
    t->gid = st.st_gid;
    return 0;
}

int tool_target_adopt(const tool_target *t, int fd, const char *shown)
{
    struct stat st;
    int ok = fstat(fd, &st) == 0;
    if (ok && t->exists && (st.st_uid != t->uid || st.st_gid != t->gid))
        ok = fchown(fd, st.st_uid != t->uid ? t->uid : (uid_t)-1,
                    st.st_gid != t->gid ? t->gid : (gid_t)-1) == 0;
    if (ok) /* after fchown, which may clear the set-user-ID and set-group-ID bits */
        ok = fchmod(fd, t->mode) == 0;
    if (!ok) {
        tool_error("cannot write %s: the new file cannot get the old one's owner, group and mode "
                   "(%s); it is not replaced",
                   shown, strerror(errno));
        return TOOL_EXIT_RESOURCE;
    }
    return 0;
}

int tool_target_mktemp(const tool_target *t, const char *shown, cln_atomic_file *a)
{
    /* ".NAME.XXXXXX" in the target's directory, so that rename() replaces it atomically */
    if (cln_atomic_open(a, t->path, 0600, 0, &tool_temp_hooks) != 0) {
        if (errno == ENOMEM)
            tool_error("out of memory");
        else
            tool_error("cannot write %s: %s (a temporary file in its directory)", shown,
                       strerror(errno));
        return -1;
    }
    if (tool_target_adopt(t, a->fd, shown) != 0) {
        cln_atomic_abort(a);
        return -1;
    }
    return a->fd;
}

int tool_out_open(tool_out *o, const char *path)
{
    memset(o, 0, sizeof *o);
    o->a.fd = -1;
    o->a.slot = -1;
    if (strcmp(path, "-") == 0) {
        o->f = stdout;
        o->is_stdout = 1;
        return 0;
    }
    if (!path[0]) {
        tool_error("an output file name is empty");
        return TOOL_EXIT_INPUT;
    }
    if (!(o->path = strdup(path))) {
        tool_error("out of memory");
        return TOOL_EXIT_RESOURCE;
    }
    int rc = tool_target_open(&o->t, path);
    if (rc) {
        tool_out_abort(o);
        return rc;
    }
    if (o->t.special) {
        if (!(o->f = fopen(o->t.path, "w"))) {
            tool_error("cannot write %s: %s", path, strerror(errno));
            tool_out_abort(o);
            return TOOL_EXIT_RESOURCE;
        }
        return 0;
    }
    if (tool_target_mktemp(&o->t, path, &o->a) < 0) {
        tool_out_abort(o);
        return TOOL_EXIT_RESOURCE;
    }
    if (!(o->f = cln_atomic_stream(&o->a, "w"))) {
        tool_error("cannot write %s: %s", path, strerror(errno));
        tool_out_abort(o);
        return TOOL_EXIT_RESOURCE;
    }
    return 0;
}

/* Flushes and closes o's file (standard output: flushes it). Returns 0, or 3 after printing an
 * error. */
static int out_close(tool_out *o)
{
    int ok = fflush(o->f) == 0 && !ferror(o->f);
    int err = ok ? 0 : errno;
    if (!o->is_stdout) {
        if (fclose(o->f) != 0 && ok) {
            ok = 0;
            err = errno;
        }
        o->f = NULL;
    }
    if (!ok)
        tool_error("cannot write %s: %s", o->is_stdout ? "standard output" : o->path,
                   err ? strerror(err) : "write error");
    return ok ? 0 : TOOL_EXIT_RESOURCE;
}

/* Renames o's temporary file (if any) over its target. Returns 0, or 3 after printing an
 * error. */
static int out_rename(tool_out *o)
{
    if (!o->a.tmp)
        return 0;
    if (cln_atomic_commit(&o->a, o->t.path) != 0) {
        tool_error("cannot write %s: %s", o->path, strerror(errno));
        return TOOL_EXIT_RESOURCE;
    }
    return 0;
}

int tool_out_commit_all(tool_out *const *o, size_t n)
{
    int rc = 0;
    for (size_t i = 0; i < n && !rc; ++i)
        if (o[i]->f)
            rc = out_close(o[i]);
    /* a signal now waits until every rename is done (tool_temp.h); one received before (its
       previous handler let the process go on) renames nothing */
    tool_temp_cooperate(1);
    if (!rc && tool_temp_cancel(NULL)) {
        tool_error("interrupted by a signal: no output written");
        rc = TOOL_EXIT_RESOURCE;
    }
    for (size_t i = 0; i < n && !rc; ++i)
        rc = out_rename(o[i]);
    for (size_t i = 0; i < n; ++i)
        tool_out_abort(o[i]);
    tool_temp_cooperate(0);
    return rc;
}

int tool_out_commit(tool_out *o)
{
    return tool_out_commit_all(&o, 1);
}

void tool_out_abort(tool_out *o)
{
    if (o->f && !o->is_stdout)
        fclose(o->f);
    cln_atomic_abort(&o->a);
    free(o->path);
    tool_target_free(&o->t);
    memset(o, 0, sizeof *o);
    o->a.fd = -1;
    o->a.slot = -1;
}
