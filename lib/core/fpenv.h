/* fpenv.h - the floating-point environment the library computes in: IEEE 754's default, round to
 * nearest with subnormal numbers kept, on every thread that computes, whatever the caller's
 * thread was set to.
 *
 * A caller may run with subnormals flushed: XLA's CPU runtime sets flush-to-zero and
 * denormals-are-zero (x86's MXCSR FTZ and DAZ) on the threads that run a jitted program, custom
 * calls included, and torch.set_flush_denormal(True) sets them on the caller's thread. Computed
 * so, a solve of a model whose values pass through the subnormal range would give other bits (a
 * subnormal bias read as zero) than the same solve called from numpy; clnode's promise is the same
 * bits from every front end. So every entry point that computes on the host sets the default for
 * its duration and gives the caller's back (CLN_FPENV_SCOPE). The pool's workers are started
 * inside such a call and inherit its environment (POSIX threads inherit their creator's).
 * Only the rounding mode and the flushing bits are touched: the exception masks stay as they are,
 * and the exception flags the computation raises stay raised.
 * x86-64 (SSE's MXCSR: FTZ, DAZ, RC) and AArch64 (FPCR: FZ, RMode); elsewhere the rounding mode
 * through <fenv.h>. */
#ifndef CLN_FPENV_H
#define CLN_FPENV_H

#include <fenv.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <xmmintrin.h>
#define CLN_FPENV_BITS 0xE040u /* FTZ (15), RC (13-14), DAZ (6) */
#elif defined(__aarch64__) && defined(__GNUC__)
#define CLN_FPENV_BITS ((1ull << 24) | (3ull << 22)) /* FZ, RMode */
#endif

typedef struct cln_fpenv {
    unsigned long long saved; /* the caller's control word */
    int changed;              /* whether it differed from the default (and must be restored) */
} cln_fpenv;

/* Sets the default environment on this thread; returns what cln_fpenv_restore gives back. */
static inline cln_fpenv cln_fpenv_ieee(void)
{
    cln_fpenv e = {0, 0};
#if defined(__x86_64__) && defined(__GNUC__)
    const unsigned csr = _mm_getcsr();
    e.saved = csr;
    if (csr & CLN_FPENV_BITS) {
        _mm_setcsr(csr & ~CLN_FPENV_BITS);
        e.changed = 1;
    }
#elif defined(__aarch64__) && defined(__GNUC__)
    unsigned long long fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    e.saved = fpcr;
    if (fpcr & CLN_FPENV_BITS) {
        __asm__ volatile("msr fpcr, %0" : : "r"(fpcr & ~CLN_FPENV_BITS));
        e.changed = 1;
    }
#else
    const int r = fegetround();
    e.saved = (unsigned long long)(long long)r;
    if (r != FE_TONEAREST) {
        fesetround(FE_TONEAREST);
        e.changed = 1;
    }
#endif
    return e;
}

/* Gives the caller's environment back (when cln_fpenv_ieee changed it). */
static inline void cln_fpenv_restore(const cln_fpenv *e)
{
    if (!e->changed)
        return;
#if defined(__x86_64__) && defined(__GNUC__)
    /* the control bits only: the exception flags raised meanwhile stay raised */
    _mm_setcsr((_mm_getcsr() & ~CLN_FPENV_BITS) | ((unsigned)e->saved & CLN_FPENV_BITS));
#elif defined(__aarch64__) && defined(__GNUC__)
    __asm__ volatile("msr fpcr, %0" : : "r"(e->saved));
#else
    fesetround((int)(long long)e->saved);
#endif
}

/* The default environment for the rest of the enclosing block, the caller's given back when it
 * is left (by any return). */
#define CLN_FPENV_SCOPE                                                                            \
    const cln_fpenv cln_fpenv_scope_ __attribute__((cleanup(cln_fpenv_restore), unused)) =         \
        cln_fpenv_ieee()

#endif /* CLN_FPENV_H */
