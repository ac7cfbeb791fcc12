/* host_buffers.c - the host backend's buffers (plain host memory) and its grow-only GEMM
 * scratch. */
#include "backends/host/host_internal.h"
#include "backends/ptr_adopt.h"

/* bytes (> 0) of zeros aligned to `align` (a power of two, at least a cache line); NULL when out
 * of memory (or asked for none). */
void *host_zalloc(size_t bytes, size_t align)
{
    if (bytes == 0 || bytes > (size_t)-1 - align)
        return NULL;
    bytes = (bytes + align - 1) / align * align;
    void *p = aligned_alloc(align, bytes);
    if (p)
        memset(p, 0, bytes);
    return p;
}
/* Makes a grow-only GEMM scratch hold `bytes`; it grows only when a larger product is first seen
 * (solve_begin sizes both for the whole model, so steps never allocate). */
clnode_status host_grow(host_backend *hb, void **buf, size_t *cap, size_t bytes)
{
    if (bytes <= *cap)
        return CLNODE_OK;
    void *p = realloc(*buf, bytes);
    CLN_CHECK(hb->base.ctx, p, CLNODE_ERR_OUT_OF_MEMORY,
              "cannot allocate %zu bytes of GEMM scratch", bytes);
    *buf = p;
    *cap = bytes;
    return CLNODE_OK;
}

clnode_status host_scratch(host_backend *hb, size_t bytes)
{
    return host_grow(hb, &hb->scratch, &hb->scratch_cap, bytes);
}

clnode_status host_scratch_a(host_backend *hb, size_t bytes)
{
    return host_grow(hb, &hb->scratch_a, &hb->scratch_a_cap, bytes);
}
clnode_status host_buf_alloc(cln_backend *be, size_t bytes, cln_buf **out)
{
    *out = NULL;
    cln_buf *b = calloc(1, sizeof *b);
    if (!b)
        return cln_fail(be->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate a buffer handle");
    /* calloc: unused parts of the save buffers read back as zeros, never as garbage */
    b->p = calloc(bytes ? bytes : 1, 1);
    if (!b->p) {
        free(b);
        return cln_fail(be->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes on the host",
                        bytes);
    }
    b->size = bytes;
    *out = b;
    return CLNODE_OK;
}

void host_buf_free(cln_backend *be, cln_buf *b)
{
    (void)be;
    if (b && !b->borrowed)
        free(b->p);
    free(b);
}

/* A caller's host array (backend.h: buf_adopt): borrowed, never freed. */
CLN_PTR_BUF_ADOPT(host_buf_adopt)

clnode_status host_buf_write(cln_backend *be, cln_buf *b, size_t off, size_t bytes, const void *src)
{
    CLN_CHECK(be->ctx, off <= b->size && bytes <= b->size - off, CLNODE_ERR_INTERNAL,
              "host buffer write out of range (%zu + %zu > %zu)", off, bytes, b->size);
    if (bytes)
        memcpy(b->p + off, src, bytes);
    return CLNODE_OK;
}

clnode_status host_buf_read(cln_backend *be, cln_buf *b, size_t off, size_t bytes, void *dst)
{
    CLN_CHECK(be->ctx, off <= b->size && bytes <= b->size - off, CLNODE_ERR_INTERNAL,
              "host buffer read out of range (%zu + %zu > %zu)", off, bytes, b->size);
    if (bytes)
        memcpy(dst, b->p + off, bytes);
    return CLNODE_OK;
}
