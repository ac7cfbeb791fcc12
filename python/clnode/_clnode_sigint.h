/* _clnode_sigint.h - Ctrl-C while the library works without the GIL (_clnode_sigint.c): one
 * SIGINT handler of clnode's for every solve that takes Ctrl-C, eager or a custom call of
 * clnode.jax, on any thread. Python.h comes first. */
#ifndef CLNODE_PY_SIGINT_H
#define CLNODE_PY_SIGINT_H

/* The cancel callback of a solve or a reverse pass between sigint_enter and sigint_leave (or
 * under sigint_install): whether a Ctrl-C came. */
int on_cancel(void *user);

/* One more solve takes Ctrl-C (any thread, no GIL needed): the first of those running at once
 * installs clnode's handler, when Python's (or any but the default or ignore) is in place.
 * Returns 1 if clnode's handler is in place. Always paired with sigint_leave. */
int sigint_enter(void);

/* One solve less: the last puts the previous handler back. Returns 1 if a Ctrl-C came meanwhile;
 * the first to end after it hands it to Python (then PyErr_CheckSignals, on the main thread,
 * raises what Python's handler raises). */
int sigint_leave(void);

/* sigint_enter for an eager solve: only on the main thread, only when clnode's handler is in
 * place. Returns 1 if so (then sigint_restore once the solve has returned). */
int sigint_install(void);

/* sigint_leave after sigint_install. */
int sigint_restore(void);

#endif
