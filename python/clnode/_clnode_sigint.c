/* _clnode_sigint.c - Ctrl-C while the library works without the GIL. Every solve or reverse pass
 * that takes Ctrl-C (an eager one on the main thread, clnode.jax's custom calls on any thread, any
 * number at once) runs under one SIGINT handler of ours, installed by the first to start and put
 * back by the last to end (a count under a mutex), so that the process's handler is Python's again
 * once none runs, whatever the order in which they start and end. The handler only sets one flag,
 * which every running one's cancel callback reads: one Ctrl-C stops them all. The interrupt is
 * handed to Python once (PyErr_SetInterrupt, which needs no GIL) by the first to end after it,
 * whose SIGINT handler then runs as for any Ctrl-C: KeyboardInterrupt by default. The previous C
 * handler is never called from ours: drivers loaded by the device listing install one-shot
 * handlers of their own. */
#include "_clnode_internal.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

static pthread_mutex_t g_sig_lock = PTHREAD_MUTEX_INITIALIZER; /* guards every g_ but g_sigint */
static atomic_int g_sigint; /* lock-free: set by the signal handler, read by every cancel poll */
static int g_users;         /* solves between sigint_enter and sigint_leave */
static int g_installed;     /* ours is the process's handler (g_prev the one before) */
static int g_handed;        /* this Ctrl-C is handed to Python already */
static struct sigaction g_prev;

static void on_sigint(int sig)
{
    (void)sig;
    atomic_store(&g_sigint, 1);
}

int on_cancel(void *user)
{
    (void)user;
    return atomic_load(&g_sigint) != 0;
}

int sigint_enter(void)
{
    pthread_mutex_lock(&g_sig_lock);
    if (g_users++ == 0) {
        struct sigaction prev, sa;
        g_installed = 0;
        g_handed = 0;
        atomic_store(&g_sigint, 0);
        /* Ctrl-C that kills or is ignored is left alone */
        if (sigaction(SIGINT, NULL, &prev) == 0 &&
            ((prev.sa_flags & SA_SIGINFO) ||
             (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN))) {
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_sigint;
            sa.sa_flags = SA_ONSTACK;
            sigemptyset(&sa.sa_mask);
            g_installed = sigaction(SIGINT, &sa, &g_prev) == 0;
        }
    }
    const int on = g_installed;
    pthread_mutex_unlock(&g_sig_lock);
    return on;
}

int sigint_leave(void)
{
    pthread_mutex_lock(&g_sig_lock);
    const int hit = g_installed && atomic_load(&g_sigint) != 0;
    if (hit && !g_handed) {
        g_handed = 1;
        PyErr_SetInterrupt(); /* Python's handler: KeyboardInterrupt by default */
    }
    if (--g_users == 0) {
        if (g_installed)
            sigaction(SIGINT, &g_prev, NULL);
        g_installed = 0;
        atomic_store(&g_sigint, 0);
    }
    pthread_mutex_unlock(&g_sig_lock);
    return hit;
}

static int on_main_thread(void)
{
    if (!PyGILState_Check() ||
        PyThreadState_GetInterpreter(PyThreadState_Get()) != PyInterpreterState_Main())
        return 0;
    PyObject *threading = PyImport_AddModule("threading"); /* borrowed; may be absent */
    if (!threading)
        return 1;
    PyObject *cur = PyObject_CallMethod(threading, "current_thread", NULL);
    PyObject *main = PyObject_CallMethod(threading, "main_thread", NULL);
    const int is_main = cur && cur == main;
    Py_XDECREF(cur);
    Py_XDECREF(main);
    PyErr_Clear();
    return is_main;
}

int sigint_install(void)
{
    if (!on_main_thread())
        return 0;
    if (sigint_enter())
        return 1;
    sigint_leave(); /* no handler of ours: Ctrl-C kills or is ignored */
    return 0;
}

int sigint_restore(void)
{
    return sigint_leave();
}
