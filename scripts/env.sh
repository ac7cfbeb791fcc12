# Sourced by the scripts in scripts/: a persistent PoCL kernel cache (the first CLBlast GEMM per
# precision costs ~12 s to compile on PoCL; the cache makes later runs take milliseconds).
export POCL_CACHE_DIR="${POCL_CACHE_DIR:-$HOME/.cache/pocl}"
mkdir -p "$POCL_CACHE_DIR"
