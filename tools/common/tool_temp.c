/* tool_temp.c - temporary files removed on a signal (tool_temp.h).
 *
 * A fixed table of names: a slot is claimed (0 -> 1) with an atomic exchange, its name written,
 * then published (2); the handler reads only published slots, with lock-free atomic loads, and
 * calls only unlink, sigaction and raise, which are async-signal-safe, then what the signal did
 * before: its default action, or the handler installed earlier (MPI installs some). Inside a
 * cooperative section the first SIGINT, SIGTERM or SIGHUP is only recorded (a lock-free atomic
 * store): the work polls it and stops, and leaving the section acts on it. */
#include "tool_temp.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TEMP_SLOTS 16
#define TEMP_NAME 4096

static char names[TEMP_SLOTS][TEMP_NAME];
static atomic_int state[TEMP_SLOTS]; /* 0 free, 1 being filled, 2 registered */
static atomic_int installed;

static const int signals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGXFSZ};
#define NSIGNALS (sizeof signals / sizeof signals[0])
static struct sigaction previous[NSIGNALS]; /* what each signal did before */
static atomic_int cooperative;              /* inside a cooperative section */
static atomic_int caught;                   /* the first signal received, or 0 */

static void remove_all(void)
{
    for (int i = 0; i < TEMP_SLOTS; ++i)
        if (atomic_load(&state[i]) == 2)
            unlink(names[i]);
}

static void on_signal(int sig, siginfo_t *info, void *uctx)
{
    int none = 0;
    const int first = atomic_compare_exchange_strong(&caught, &none, sig);
    if (first && atomic_load(&cooperative) && sig != SIGPIPE && sig != SIGXFSZ)
        return; /* the work stops at its next poll; leaving the section acts on it */
    remove_all();
    for (size_t k = 0; k < NSIGNALS; ++k) {
        if (signals[k] != sig)
            continue;
        const struct sigaction *p = &previous[k];
        if (p->sa_flags & SA_SIGINFO) {
            p->sa_sigaction(sig, info, uctx); /* a handler installed before (MPI's) goes on */
        } else if (p->sa_handler != SIG_DFL) {
            p->sa_handler(sig);
        } else {
            /* the default action: the signal, blocked while this handler runs, is delivered
               again on return and ends the process with its own status */
            sigaction(sig, p, NULL);
            raise(sig);
        }
    }
}

static void install(void)
{
    if (atomic_exchange(&installed, 1))
        return;
    for (size_t k = 0; k < NSIGNALS; ++k) {
        struct sigaction sa;
        if (sigaction(signals[k], NULL, &previous[k]) != 0 ||
            (!(previous[k].sa_flags & SA_SIGINFO) && previous[k].sa_handler == SIG_IGN))
            continue; /* ignored (nohup, a background job): it stays ignored */
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_SIGINFO;
        sigaction(signals[k], &sa, NULL);
    }
}

int tool_temp_register(const char *path)
{
    if (strlen(path) >= TEMP_NAME) {
        errno = ENAMETOOLONG;
        return -1;
    }
    install();
    for (int i = 0; i < TEMP_SLOTS; ++i) {
        int expect = 0;
        if (atomic_compare_exchange_strong(&state[i], &expect, 1)) {
            strcpy(names[i], path);
            atomic_store(&state[i], 2);
            return i;
        }
    }
    errno = EMFILE;
    return -1;
}

void tool_temp_release(int slot)
{
    if (slot >= 0 && slot < TEMP_SLOTS)
        atomic_store(&state[slot], 0);
}

int tool_temp_create(char *name, unsigned mode, int *slot)
{
    *slot = -1;
    install();
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int fd = mkstemp(name);
    int err = errno;
    if (fd >= 0) {
        *slot = tool_temp_register(name);
        err = errno;
        if (*slot < 0 || fchmod(fd, (mode_t)mode) != 0) {
            err = errno;
            unlink(name);
            close(fd);
            tool_temp_release(*slot);
            *slot = -1;
            fd = -1;
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = err;
    return fd;
}

const cln_atomic_hooks tool_temp_hooks = {tool_temp_create, tool_temp_register, tool_temp_release};

int tool_temp_cancel(void *user)
{
    (void)user;
    return atomic_load(&caught);
}

void tool_temp_cooperate(int on)
{
    if (on) {
        install();
        atomic_store(&cooperative, 1);
        return;
    }
    atomic_store(&cooperative, 0);
    const int sig = atomic_load(&caught);
    if (!sig)
        return;
    /* what the signal does outside a section, done now: the temporaries go, then its previous
       action (MPI's handler, or the default); the default if the process is still there */
    remove_all();
    for (size_t k = 0; k < NSIGNALS; ++k)
        if (signals[k] == sig)
            sigaction(sig, &previous[k], NULL);
    raise(sig);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig);
}
