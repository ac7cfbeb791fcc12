/* ptr_adopt.h - buf_adopt (backend.h) for the backends whose buffers are plain pointers (the host,
 * CUDA): a backend whose struct cln_buf has the members `p` (the memory), `size` (its bytes) and
 * `borrowed` (never freed by buf_free) expands CLN_PTR_BUF_ADOPT(its function's name) once. Such
 * a runtime cannot tell an array's size, so the handle covers what the caller says it holds. */
#ifndef CLN_PTR_ADOPT_H
#define CLN_PTR_ADOPT_H

#include <stdint.h>
#include <stdlib.h>

#include "backends/backend.h"

#define CLN_PTR_BUF_ADOPT(fn)                                                                      \
    clnode_status fn(cln_backend *be, void *handle, size_t offset, size_t bytes, const char *what, \
                     cln_buf **out)                                                                \
    {                                                                                              \
        *out = NULL;                                                                               \
        CLN_CHECK(be->ctx, offset <= SIZE_MAX - bytes, CLNODE_ERR_INVALID_ARGUMENT,                \
                  "%s: %zu bytes from byte %zu overflow", what, bytes, offset);                    \
        cln_buf *b = calloc(1, sizeof *b);                                                         \
        CLN_CHECK(be->ctx, b, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate a buffer handle");        \
        b->p = handle;                                                                             \
        b->size = offset + bytes;                                                                  \
        b->borrowed = 1;                                                                           \
        *out = b;                                                                                  \
        return CLNODE_OK;                                                                          \
    }

#endif /* CLN_PTR_ADOPT_H */
