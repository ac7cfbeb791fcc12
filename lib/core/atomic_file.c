/* atomic_file.c - files written atomically (atomic_file.h). */
#include "atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

unsigned cln_atomic_new_mode(void)
{
    const mode_t mask = umask(0);
    umask(mask);
    return 0666 & ~(unsigned)mask;
}

/* mkstemp with permissions `mode` (mkstemp's are 0600). */
static int plain_create(char *name, unsigned mode)
{
    const int fd = mkstemp(name);
    if (fd >= 0 && fchmod(fd, (mode_t)mode) != 0) {
        const int e = errno;
        unlink(name);
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static void release(cln_atomic_file *a)
{
    if (a->slot >= 0 && a->hooks && a->hooks->release)
        a->hooks->release(a->slot);
    a->slot = -1;
}

int cln_atomic_open(cln_atomic_file *a, const char *path, unsigned mode, int flags,
                    const cln_atomic_hooks *hooks)
{
    memset(a, 0, sizeof *a);
    a->fd = -1;
    a->slot = -1;
    a->flags = flags;
    a->hooks = hooks;
    const size_t len = strlen(path) + 9; /* ".NAME.XXXXXX" or "PATH.tmp", and the NUL */
    char *tmp = malloc(len);
    if (!tmp) {
        errno = ENOMEM;
        return -1;
    }
    if (flags & CLN_ATOMIC_FIXED_NAME) {
        snprintf(tmp, len, "%s.tmp", path);
        if (hooks && hooks->track)
            a->slot = hooks->track(tmp);
        a->fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, (mode_t)mode);
    } else {
        /* in the target's directory, so that rename() replaces it atomically */
        const char *slash = strrchr(path, '/');
        const size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
        snprintf(tmp, len, "%.*s.%s.XXXXXX", (int)dirlen, path, path + dirlen);
        a->fd =
            hooks && hooks->create ? hooks->create(tmp, mode, &a->slot) : plain_create(tmp, mode);
    }
    if (a->fd < 0) {
        const int e = errno;
        release(a);
        free(tmp);
        errno = e;
        return -1;
    }
    a->tmp = tmp;
    return 0;
}

FILE *cln_atomic_stream(cln_atomic_file *a, const char *mode)
{
    FILE *f = a->fd >= 0 ? fdopen(a->fd, mode) : NULL;
    if (a->fd < 0)
        errno = EBADF;
    if (f)
        a->fd = -1;
    return f;
}

int cln_atomic_close(cln_atomic_file *a)
{
    if (a->fd < 0)
        return 0;
    int ok = !(a->flags & CLN_ATOMIC_DURABLE) || fsync(a->fd) == 0;
    int e = errno;
    if (close(a->fd) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    a->fd = -1;
    errno = e;
    return ok ? 0 : -1;
}

/* Syncs the directory entry of `path`: its directory up to the last slash ("/" for "/NAME",
 * "." for "NAME"). */
static int sync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash && slash != path ? strndup(path, (size_t)(slash - path)) : NULL;
    if (slash && slash != path && !dir) {
        errno = ENOMEM;
        return -1;
    }
    const int dfd = open(dir ? dir : slash ? "/" : ".", O_RDONLY | O_DIRECTORY);
    free(dir);
    int rc = dfd >= 0 && fsync(dfd) == 0 ? 0 : -1;
    const int e = errno;
    if (dfd >= 0)
        close(dfd);
    errno = e;
    return rc;
}

int cln_atomic_commit(cln_atomic_file *a, const char *path)
{
    if (!a->tmp) {
        errno = EINVAL;
        return -1;
    }
    if (cln_atomic_close(a) != 0 || rename(a->tmp, path) != 0)
        return -1;
    release(a);
    free(a->tmp);
    a->tmp = NULL;
    return (a->flags & CLN_ATOMIC_DURABLE) ? sync_dir(path) : 0;
}

void cln_atomic_abort(cln_atomic_file *a)
{
    if (!a->tmp)
        return;
    if (a->fd >= 0)
        close(a->fd);
    a->fd = -1;
    if (!a->keep)
        unlink(a->tmp);
    release(a);
    free(a->tmp);
    a->tmp = NULL;
}

int cln_atomic_write(const char *path, const void *data, size_t len, unsigned mode, int flags,
                     const cln_atomic_hooks *hooks)
{
    cln_atomic_file a;
    if (cln_atomic_open(&a, path, mode, flags, hooks) != 0)
        return -1;
    const char *p = data;
    int rc = 0;
    for (size_t done = 0; done < len && !rc;) {
        const ssize_t n = write(a.fd, p + done, len - done);
        if (n > 0) {
            done += (size_t)n;
        } else if (n == 0 || errno != EINTR) {
            if (n == 0)
                errno = EIO;
            rc = -1;
        }
    }
    if (!rc)
        rc = cln_atomic_commit(&a, path);
    if (rc) {
        const int e = errno;
        cln_atomic_abort(&a);
        errno = e;
    }
    return rc;
}
