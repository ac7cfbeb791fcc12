/* host_rows.c - the host backend's row operations: the active count, compaction's row swaps and
 * the saved steps' row copies. */
#include "backends/host/host_internal.h"

clnode_status host_count_active(cln_backend *be, cln_solve_dev *sd, size_t *active)
{
    (void)be;
    const cln_istate *is = (const cln_istate *)(const void *)HOST_I32(sd->IS);
    size_t n = 0;
    for (size_t b = 0; b < sd->live; ++b)
        n += is[b].done == 0;
    *active = n;
    return CLNODE_OK;
}

/* Compaction (backend.h): the pairs' rows swapped through a small buffer on the stack. */
clnode_status host_swap_rows(cln_backend *be, cln_solve_dev *sd, cln_buf *buf, size_t off,
                             size_t stride, size_t len, size_t npairs)
{
    const int32_t *pairs = HOST_I32(sd->PAIRS);
    CLN_CHECK(be->ctx, 2 * npairs * sizeof(int32_t) <= sd->PAIRS->size, CLNODE_ERR_INTERNAL,
              "%zu row pairs overflow their buffer", npairs);
    for (size_t p = 0; p < 2 * npairs; ++p)
        CLN_CHECK(be->ctx,
                  pairs[p] >= 0 && len <= stride && off + len <= buf->size &&
                      (size_t)pairs[p] <= (buf->size - off - len) / (stride ? stride : 1),
                  CLNODE_ERR_INTERNAL, "row %d out of range of a %zu-byte buffer", (int)pairs[p],
                  buf->size);
    unsigned char tmp[512];
    for (size_t p = 0; p < npairs; ++p) {
        unsigned char *a = buf->p + off + (size_t)pairs[2 * p] * stride;
        unsigned char *b = buf->p + off + (size_t)pairs[2 * p + 1] * stride;
        for (size_t done = 0; done < len; done += sizeof tmp) {
            const size_t n = len - done < sizeof tmp ? len - done : sizeof tmp;
            memcpy(tmp, a + done, n);
            memcpy(a + done, b + done, n);
            memcpy(b + done, tmp, n);
        }
    }
    return CLNODE_OK;
}

/* The saved steps' growth (backend.h): a memcpy per row. */
clnode_status host_copy_rows(cln_backend *be, cln_buf *dst, size_t dst_off, size_t dst_stride,
                             cln_buf *src, size_t src_off, size_t src_stride, size_t len,
                             size_t rows)
{
    CLN_CHECK(be->ctx,
              dst != src && cln_rows_fit(dst->size, dst_off, dst_stride, len, rows) &&
                  cln_rows_fit(src->size, src_off, src_stride, len, rows),
              CLNODE_ERR_INTERNAL, "copy_rows of %zu rows of %zu bytes out of range", rows, len);
    if (len == 0)
        return CLNODE_OK;
    for (size_t r = 0; r < rows; ++r)
        memcpy(dst->p + dst_off + r * dst_stride, src->p + src_off + r * src_stride, len);
    return CLNODE_OK;
}
