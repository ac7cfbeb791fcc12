#!/bin/sh
# test_no_cuda.sh - the CUDA-enabled build on a machine without CUDA, made real in a private mount
# namespace: an empty tmpfs over every /usr/local/cuda* folder and an empty file over every CUDA
# library the dynamic loader knows elsewhere (runtime, cuBLAS, NVRTC, the driver libcuda). The
# test first checks that no CUDA library is left to load, then that libclnode links none, that
# clnode-devices lists the host and says "cuda: not available: cannot load ...", that "cuda" is
# refused with that reason, that the host solves the seed problem in 12 steps, and that every
# test program given runs as it does with CUDA (exit 0; 77 counts as a skip).
#
#   test_no_cuda.sh LIBCLNODE CLNODE_DEVICES CLNODE_SOLVE [TEST_PROGRAM ARGS... --] ...
# Exits 77 when this system does not permit unshare --mount (no privileges).
set -u

if [ "${CLN_NO_CUDA_INSIDE:-}" != 1 ]; then
    if ! unshare --mount true 2>/dev/null; then
        echo "SKIP: unshare --mount is not permitted here"
        exit 77
    fi
    CLN_NO_CUDA_INSIDE=1 exec unshare --mount sh "$0" "$@"
fi

lib=$1
devices=$2
solve=$3
shift 3
fail() {
    echo "FAIL: $*"
    exit 1
}

# ---- make the machine one without CUDA (only inside this namespace) ----
mount --make-rprivate / 2>/dev/null
scratch=$(mktemp -d) || fail "mktemp"
mount -t tmpfs -o size=1m none "$scratch" || fail "cannot mount a tmpfs"
: >"$scratch/empty"
for d in /usr/local/cuda /usr/local/cuda-*; do
    [ -d "$d" ] && [ ! -L "$d" ] && { mount -t tmpfs -o size=1m none "$d" || fail "tmpfs over $d"; }
done
cuda_libs='lib(cudart|cublas|cublasLt|nvrtc|nvrtc-builtins|cuda|nvidia-ptxjitcompiler)\.so'
for f in $(ldconfig -p | grep -E "$cuda_libs" | sed 's/.*=> //'); do
    real=$(readlink -f "$f")
    if [ -f "$real" ] && [ -s "$real" ]; then
        mount --bind "$scratch/empty" "$real" || fail "cannot hide $real"
    fi
done
# the oracle that this is a machine without CUDA: no CUDA library with any content is left
for f in $(ldconfig -p | grep -E "$cuda_libs" | sed 's/.*=> //') /usr/local/cuda*/lib*/*.so*; do
    [ -s "$f" ] && fail "$f is still loadable"
done
echo "CUDA hidden: $(ldconfig -p | grep -cE "$cuda_libs") library names in the loader cache, none loadable"

# ---- the library and the tools ----
out=$(ldd "$lib") || fail "ldd $lib"
echo "$out" | grep -E 'cuda|cublas|nvrtc|not found' && fail "libclnode links a CUDA library"

out=$("$devices" --no-probe 2>&1) || fail "clnode-devices exited with $?: $out"
echo "$out"
echo "$out" | grep -qE '^ *cuda .*not available: cannot load libcudart\.so\.[0-9]+ ' ||
    fail "clnode-devices does not say that cuda is not available for want of libcudart"
echo "$out" | grep -qE '^ *host ' || fail "clnode-devices does not list the host"

out=$("$solve" --device cuda 2>&1)
rc=$?
echo "$out"
[ $rc -eq 2 ] || fail "clnode-solve --device cuda exited with $rc, not 2"
echo "$out" | grep -qE 'cuda not available: cannot load libcudart\.so\.[0-9]+ ' ||
    fail "clnode-solve --device cuda does not give the reason"

out=$("$solve" --device host 2>&1) || fail "clnode-solve on the host exited with $?: $out"
echo "$out"
echo "$out" | grep -q "success, 12 steps" || fail "the seed problem did not take 12 steps"

# ---- test programs, each with its arguments, separated by -- ----
while [ $# -gt 0 ]; do
    prog=$1
    shift
    args=
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        args="$args $1"
        shift
    done
    [ $# -gt 0 ] && shift
    echo "== $prog$args"
    # shellcheck disable=SC2086
    "$prog" $args >"$scratch/log" 2>&1
    rc=$?
    tail -n 5 "$scratch/log"
    [ $rc -eq 0 ] || [ $rc -eq 77 ] || fail "$prog$args exited with $rc"
done
echo "OK"
