/* test_stream.h - an in-memory stream for the tests of the tools' stream readers (tools/arrays):
 * `size` bytes handed out in pieces of at most `piece` bytes, then, with `endless`, zeros for ever
 * after them (/dev/zero behind a file). Counts the bytes handed out. Header-only. */
#ifndef CLNODE_TEST_STREAM_H
#define CLNODE_TEST_STREAM_H

#include <stddef.h>
#include <string.h>

typedef struct mem_stream {
    const unsigned char *p;
    size_t size, at, piece, handed;
    int endless;
} mem_stream;

/* The read callback of a mem_stream (user): at most n bytes into buf; returns how many. */
static inline long long mem_read(void *user, void *buf, size_t n)
{
    mem_stream *m = user;
    if (n > m->piece)
        n = m->piece;
    size_t k = 0;
    if (m->at < m->size) {
        k = n < m->size - m->at ? n : m->size - m->at;
        memcpy(buf, m->p + m->at, k);
        m->at += k;
    } else if (m->endless) {
        memset(buf, 0, n);
        k = n;
    }
    m->handed += k;
    return (long long)k;
}

#endif /* CLNODE_TEST_STREAM_H */
