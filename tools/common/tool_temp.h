/* tool_temp.h - temporary files that a signal does not leave behind: the tools register each
 * temporary output file while it exists, and SIGINT, SIGTERM, SIGHUP, SIGPIPE and SIGXFSZ remove
 * every registered file, then do what they did before: the default action (the exit status is
 * still the signal's), or the handler installed earlier. Free of libclnode (the .npy writer uses
 * it too): it links the library's small, libc-only atomic-file helper (lib/core/atomic_file.h)
 * alone. */
#ifndef CLNODE_TOOL_TEMP_H
#define CLNODE_TOOL_TEMP_H

#include "atomic_file.h"

/* Creates a temporary file from the mkstemp template `name` (its last six characters "XXXXXX",
 * replaced in place) with permissions `mode`, registered for removal on a signal. The first call
 * installs the handlers, except for a signal that is ignored (it stays ignored). Signals are
 * blocked in the calling thread between the creation and the registration. Returns the open
 * descriptor and the registration in *slot, or -1 with errno set (EMFILE: every slot is taken). */
int tool_temp_create(char *name, unsigned mode, int *slot);

/* Unregisters a file (it was renamed or removed). Accepts -1. */
void tool_temp_release(int slot);

/* Registers an existing path (a name made otherwise, e.g. by MPI-IO). Returns the slot, or -1
 * with errno set. */
int tool_temp_register(const char *path);

/* Cooperative interruption, for work that polls a cancel flag (the library's solves and reverse
 * passes) and for the renames of outputs that must appear together. tool_temp_cooperate(1)
 * enters a section (installing the handlers): there the first SIGINT, SIGTERM or SIGHUP is only
 * recorded (tool_temp_cancel returns it), so that the work stops at its next poll and the caller
 * unwinds with nothing removed under it; a second signal acts at once. tool_temp_cooperate(0)
 * leaves it and, if a signal was received (in the section or before), acts on it now: every
 * registered file is removed and the process ends with the signal's status (after the handler
 * installed before, as outside a section). A signal that was ignored stays ignored. */
void tool_temp_cooperate(int on);

/* A clnode_cancel_fn: the signal received (SIGINT, SIGTERM, ...), or 0. */
int tool_temp_cancel(void *user);

/* The hooks of the files the tools write atomically (atomic_file.h, lib/core/): their temporary
 * files made by tool_temp_create, or registered by tool_temp_register, and released by
 * tool_temp_release. */
extern const cln_atomic_hooks tool_temp_hooks;

#endif /* CLNODE_TOOL_TEMP_H */
