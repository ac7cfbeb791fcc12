/* test_atomic_file.c - the helper of every file written whole (lib/core/atomic_file.h: the probe
 * cache, the tools' outputs and .npy files, clnode-solve's progress record): a new file and a
 * replaced one hold exactly the bytes written, with the permissions asked; each way of failing
 * (a missing folder, a folder that is a file, a folder the user cannot write, a write cut short
 * by the file size limit, a rename over a folder) returns -1 with errno, leaves the existing file
 * as it was and no temporary file behind; the hooks register each temporary file and release it
 * once, whatever the outcome; a fixed name replaces what a killed writer left; an abandoned file
 * is removed unless kept. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "atomic_file.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/clnode-atomic-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "chmod -R u+w %s && rm -rf %s", dir, dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

/* The number of entries of the test folder (dot files included, . and .. not). */
static int entries(void)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void write_plain(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

static void assert_holds(const char *path, const char *text)
{
    char buf[256] = "";
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    assert_string_equal(buf, text);
}

static unsigned mode_of(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (unsigned)(st.st_mode & 07777);
}

static void test_new_and_replaced(void **state)
{
    (void)state;
    char p[128];
    path_of(p, sizeof p, "a.txt");
    const mode_t old = umask(027);
    assert_int_equal(cln_atomic_new_mode(), 0640u);
    assert_int_equal(cln_atomic_write(p, "first", 5, cln_atomic_new_mode(), 0, NULL), 0);
    umask(old);
    assert_holds(p, "first");
    assert_int_equal(mode_of(p), 0640u);
    /* replaced: the new bytes exactly (shorter than the old ones), the mode asked */
    assert_int_equal(cln_atomic_write(p, "2nd", 3, 0600, CLN_ATOMIC_DURABLE, NULL), 0);
    assert_holds(p, "2nd");
    assert_int_equal(mode_of(p), 0600u);
    assert_int_equal(entries(), 1); /* no temporary file left */
    /* a path without a folder (the directory synced is ".") */
    char cwd[512];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(dir), 0);
    assert_int_equal(cln_atomic_write("b.txt", "here", 4, 0644, CLN_ATOMIC_DURABLE, NULL), 0);
    assert_int_equal(chdir(cwd), 0);
    path_of(p, sizeof p, "b.txt");
    assert_holds(p, "here");
    assert_int_equal(entries(), 2);
    unlink(p);
    path_of(p, sizeof p, "a.txt");
    unlink(p);
}

static void test_stream(void **state)
{
    (void)state;
    char p[128];
    path_of(p, sizeof p, "s.txt");
    write_plain(p, "old contents");
    cln_atomic_file a;
    assert_int_equal(cln_atomic_open(&a, p, 0644, 0, NULL), 0);
    assert_non_null(a.tmp);
    assert_true(a.fd >= 0);
    FILE *f = cln_atomic_stream(&a, "w");
    assert_non_null(f);
    assert_int_equal(a.fd, -1); /* the stream owns the descriptor */
    fprintf(f, "x=%d", 42);
    assert_holds(p, "old contents"); /* nothing replaced before the commit */
    assert_int_equal(fclose(f), 0);
    assert_int_equal(cln_atomic_commit(&a, p), 0);
    assert_null(a.tmp);
    assert_holds(p, "x=42");
    assert_int_equal(entries(), 1);
    cln_atomic_abort(&a); /* after a commit: nothing */
    assert_holds(p, "x=42");
    unlink(p);
}

/* Each failure: -1 with errno, the existing file untouched, no temporary file. */
static void test_failures(void **state)
{
    (void)state;
    char p[128], bad[192];
    path_of(p, sizeof p, "keep.txt");
    write_plain(p, "precious");
    const int before = entries();

    /* a folder that does not exist */
    path_of(bad, sizeof bad, "no/such/folder/x.txt");
    errno = 0;
    assert_int_equal(cln_atomic_write(bad, "x", 1, 0644, 0, NULL), -1);
    assert_int_equal(errno, ENOENT);
    /* a folder that is a file */
    snprintf(bad, sizeof bad, "%s/sub.txt", p);
    errno = 0;
    assert_int_equal(cln_atomic_write(bad, "x", 1, 0644, CLN_ATOMIC_FIXED_NAME, NULL), -1);
    assert_int_equal(errno, ENOTDIR);
    assert_int_equal(entries(), before);
    assert_holds(p, "precious");

    /* a folder the user cannot write (root writes anyway: then the case says nothing) */
    if (geteuid() != 0) {
        assert_int_equal(chmod(dir, 0555), 0);
        errno = 0;
        assert_int_equal(cln_atomic_write(p, "lost", 4, 0644, 0, NULL), -1);
        assert_int_equal(errno, EACCES);
        assert_int_equal(cln_atomic_write(p, "lost", 4, 0644, CLN_ATOMIC_FIXED_NAME, NULL), -1);
        assert_int_equal(errno, EACCES);
        assert_int_equal(chmod(dir, 0755), 0);
        assert_holds(p, "precious");
        assert_int_equal(entries(), before);
    }

    /* a write cut short (the file size limit, which binds root too): the existing file stays */
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = 4;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    errno = 0;
    const int rc = cln_atomic_write(p, "too long for the limit", 22, 0644, 0, NULL);
    const int e = errno;
    const int rc2 = cln_atomic_write(p, "too long for the limit", 22, 0644,
                                     CLN_ATOMIC_FIXED_NAME | CLN_ATOMIC_DURABLE, NULL);
    const int e2 = errno;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    assert_int_equal(rc, -1);
    assert_int_equal(e, EFBIG);
    assert_int_equal(rc2, -1);
    assert_int_equal(e2, EFBIG);
    assert_holds(p, "precious");
    assert_int_equal(entries(), before);

    /* a rename over a folder that holds a file */
    char d[128], inner[192];
    path_of(d, sizeof d, "folder");
    assert_int_equal(mkdir(d, 0755), 0);
    snprintf(inner, sizeof inner, "%s/inside", d);
    write_plain(inner, "in");
    errno = 0;
    assert_int_equal(cln_atomic_write(d, "x", 1, 0644, 0, NULL), -1);
    assert_true(errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST);
    assert_holds(inner, "in");
    assert_int_equal(entries(), before + 1); /* the folder; no temporary file */
    unlink(inner);
    rmdir(d);
    unlink(p);
}

/* Hooks that count: the tools' register each temporary file for removal on a signal. */
static int created, tracked, released, last_slot;
static char created_name[192], tracked_name[192];

static int count_create(char *name, unsigned mode, int *slot)
{
    ++created;
    const int fd = mkstemp(name);
    if (fd >= 0)
        fchmod(fd, (mode_t)mode);
    snprintf(created_name, sizeof created_name, "%s", name);
    *slot = 7;
    return fd;
}

static int count_track(const char *name)
{
    ++tracked;
    snprintf(tracked_name, sizeof tracked_name, "%s", name);
    return 9;
}

static void count_release(int slot)
{
    ++released;
    last_slot = slot;
}

static const cln_atomic_hooks hooks = {count_create, count_track, count_release};

static void test_hooks(void **state)
{
    (void)state;
    char p[128], want[192];
    path_of(p, sizeof p, "h.npy");
    created = tracked = released = 0;
    assert_int_equal(cln_atomic_write(p, "data", 4, 0644, 0, &hooks), 0);
    assert_int_equal(created, 1);
    assert_int_equal(tracked, 0);
    assert_int_equal(released, 1);
    assert_int_equal(last_slot, 7);
    /* ".NAME.XXXXXX" beside the target, the X's replaced */
    snprintf(want, sizeof want, "%s/.h.npy.", dir);
    assert_memory_equal(created_name, want, strlen(want));
    assert_int_equal(strlen(created_name), strlen(want) + 6);
    assert_null(strstr(created_name, "XXXXXX"));
    assert_int_equal(access(created_name, F_OK), -1);

    /* a fixed name: a killed writer's longer leftover is truncated, then renamed */
    snprintf(want, sizeof want, "%s.tmp", p);
    write_plain(want, "a longer leftover of a killed writer");
    created = tracked = released = 0;
    assert_int_equal(cln_atomic_write(p, "new", 3, 0644, CLN_ATOMIC_FIXED_NAME, &hooks), 0);
    assert_int_equal(tracked, 1);
    assert_int_equal(created, 0);
    assert_string_equal(tracked_name, want);
    assert_int_equal(released, 1);
    assert_int_equal(last_slot, 9);
    assert_holds(p, "new");
    assert_int_equal(access(want, F_OK), -1);

    /* released on a failure too (the rename over a folder) */
    char d[128], inner[192];
    path_of(d, sizeof d, "hd");
    assert_int_equal(mkdir(d, 0755), 0);
    snprintf(inner, sizeof inner, "%s/inside", d);
    write_plain(inner, "in");
    created = tracked = released = 0;
    assert_int_equal(cln_atomic_write(d, "x", 1, 0644, 0, &hooks), -1);
    assert_int_equal(created, 1);
    assert_int_equal(released, 1);
    assert_int_equal(access(created_name, F_OK), -1);
    unlink(inner);
    rmdir(d);
    unlink(p);
    assert_int_equal(entries(), 0);
}

static void test_abandoned(void **state)
{
    (void)state;
    char p[128];
    path_of(p, sizeof p, "k.txt");
    write_plain(p, "old");
    cln_atomic_file a;
    /* abandoned: removed, the target as it was */
    assert_int_equal(cln_atomic_open(&a, p, 0644, 0, NULL), 0);
    assert_int_equal(write(a.fd, "new", 3), 3);
    char *tmp = strdup(a.tmp);
    assert_non_null(tmp);
    cln_atomic_abort(&a);
    assert_null(a.tmp);
    assert_int_equal(a.fd, -1);
    assert_int_equal(access(tmp, F_OK), -1);
    free(tmp);
    assert_holds(p, "old");
    /* kept (a progress record's data file): it stays, the target as it was */
    assert_int_equal(cln_atomic_open(&a, p, 0644, 0, NULL), 0);
    assert_int_equal(write(a.fd, "new", 3), 3);
    assert_int_equal(cln_atomic_close(&a), 0);
    tmp = strdup(a.tmp);
    assert_non_null(tmp);
    a.keep = 1;
    cln_atomic_abort(&a);
    assert_holds(tmp, "new");
    assert_holds(p, "old");
    unlink(tmp);
    free(tmp);
    unlink(p);
    /* a commit with nothing open is refused */
    memset(&a, 0, sizeof a);
    a.fd = -1;
    errno = 0;
    assert_int_equal(cln_atomic_commit(&a, p), -1);
    assert_int_equal(errno, EINVAL);
    cln_atomic_abort(&a);
    assert_int_equal(entries(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_new_and_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hooks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abandoned, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
