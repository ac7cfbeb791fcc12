/* _clnode_sigint.c - Ctrl-C: while the main thread solves without the GIL, a SIGINT handler of
 * ours only sets a flag that the solve's cancel callback reads. Once the solve has returned and
 * the previous handler is back, the interrupt is handed to Python (PyErr_SetInterrupt),
 * whose SIGINT handler then runs as for any Ctrl-C: KeyboardInterrupt by default. The previous C
 * handler is never called from ours: drivers loaded by the device listing install one-shot
 * handlers of their own. */
#include "_clnode_internal.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t g_sigint;
static struct sigaction g_prev_sigint;

static void on_sigint(int sig)
{
    (void)sig;
    g_sigint = 1;
}

int on_cancel(void *user)
{
    (void)user;
    return g_sigint != 0;
}

int sigint_install(void)
{
    if (!PyGILState_Check() ||
        PyThreadState_GetInterpreter(PyThreadState_Get()) != PyInterpreterState_Main())
        return 0;
    PyObject *threading = PyImport_AddModule("threading"); /* borrowed; may be absent */
    if (threading) {
        PyObject *cur = PyObject_CallMethod(threading, "current_thread", NULL);
        PyObject *main = PyObject_CallMethod(threading, "main_thread", NULL);
        int is_main = cur && cur == main;
        Py_XDECREF(cur);
        Py_XDECREF(main);
        PyErr_Clear();
        if (!is_main)
            return 0;
    }
    struct sigaction prev, sa;
    if (sigaction(SIGINT, NULL, &prev) != 0)
        return 0;
    if (!(prev.sa_flags & SA_SIGINFO) && (prev.sa_handler == SIG_DFL || prev.sa_handler == SIG_IGN))
        return 0; /* Ctrl-C kills or is ignored: leave that alone */
    g_sigint = 0;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, &g_prev_sigint) != 0)
        return 0;
    return 1;
}

int sigint_restore(void)
{
    sigaction(SIGINT, &g_prev_sigint, NULL);
    if (!g_sigint)
        return 0;
    g_sigint = 0;
    PyErr_SetInterrupt();
    return 1;
}
