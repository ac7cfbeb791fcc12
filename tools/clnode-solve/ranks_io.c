/* ranks_io.c - what every part of clnode-solve's MPI driver uses (ranks_run.h): the exit status
 * the ranks agree on, the positional writer of the arrays' shared file, the progress record's
 * paths and its atomic writes, and the test hook of a rank that dies. Uses no other ranks*.c. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ranks_run.h"
#include "tool_temp.h"

/* The same exit status on every rank: the largest. */
int ranks_agree(int rc)
{
    int all = rc;
    MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return all;
}

/* The positional writer of the array outputs: MPI_File_write_at on the shared file, in pieces
 * whose counts fit an int. */
int ranks_pwrite(void *user, const void *buf, size_t len, uint64_t offset)
{
    run *r = user;
    const char *p = buf;
    for (size_t at = 0; at < len;) {
        const size_t n = len - at < ((size_t)1 << 30) ? len - at : ((size_t)1 << 30);
        MPI_Status st;
        int done = 0;
        if (MPI_File_write_at(r->fh, (MPI_Offset)(offset + at), p + at, (int)n, MPI_BYTE, &st) !=
                MPI_SUCCESS ||
            MPI_Get_count(&st, MPI_BYTE, &done) != MPI_SUCCESS || done <= 0)
            return -1;
        at += (size_t)done;
    }
    return 0;
}

/* Writes a file of the progress record atomically and durably (atomic_file.h): its bytes on the
 * disk under NAME.tmp, then renamed, and the directory's entry on the disk too (a progress record
 * survives the machine stopping, not only the process); a rerun replaces the NAME.tmp that a
 * killed writer left. */
int ranks_write_atomic(const char *path, const void *data, size_t len)
{
    return cln_atomic_write(path, data, len, cln_atomic_new_mode(),
                            CLN_ATOMIC_DURABLE | CLN_ATOMIC_FIXED_NAME, &tool_temp_hooks);
}

/* DIR/name of the progress record (malloc'd; NULL when out of memory). */
char *ranks_record_path(const run *r, const char *name)
{
    const size_t n = strlen(r->dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", r->dir, name);
    return p;
}

char *ranks_chunk_path(const run *r, size_t c)
{
    char name[40];
    snprintf(name, sizeof name, "chunk-%zu", c);
    return ranks_record_path(r, name);
}

char *ranks_grad_path(const run *r, size_t c)
{
    char name[40];
    snprintf(name, sizeof name, "grad-%zu", c);
    return ranks_record_path(r, name);
}

/* Test hook: this rank dies (as a killed job would) after solving that many chunks. */
void ranks_test_exit_hook(run *r)
{
    if (++r->solved == r->exit_after && (r->exit_rank < 0 || r->exit_rank == r->rank))
        _exit(86);
}
