#!/usr/bin/env bash
# gpu-check.sh - the prepared check of clnode on a machine with an NVIDIA GPU: CUDA and NVIDIA
# OpenCL conformance, forward and reverse (gradient conformance: the GPU's gradients against the
# host's, bit for bit), seed-problem solves at several batch sizes and precisions, and the
# benchmarks (the forward, and the gradient at B = 1, 1024 and 10^5 against its bare loop and,
# where JAX has the GPU, against diffrax's jax.grad) and, where a CUDA jaxlib is installed, a
# shortened run of the JAX training example (examples/neural_ode.py) with JAX on the GPU, the
# solves on device memory (clnode_solve_device: test_cuda_adopt, and scripts/gpu_device_arrays.py
# for clnode.jax's forward on XLA's buffers and clnode.torch's CUDA tensors), all written to one
# report (what did not run is said so). Run from the repository root.
#
#   scripts/gpu-check.sh [BUILD_DIR]
#       BUILD_DIR: a build directory made elsewhere and copied here (default: build one in
#       $OUT/build with meson, installing what is missing with apt-get when that works).
#       Report: "$OUT/report.txt" (OUT defaults to ./gpu-report).
#   scripts/gpu-check.sh --bundle BUILD_DIR
#       On the BUILD machine: copy the non-system shared libraries the built programs need
#       (OpenBLAS, json-c, CLBlast, the OpenCL loader, cmocka, gfortran...; not glibc, not CUDA,
#       not the NVIDIA driver) into BUILD_DIR/_libs, so that a bare GPU machine can run the
#       carried build directory. The check puts BUILD_DIR/_libs on LD_LIBRARY_PATH.
#
# Environment: OUT (report folder), GPU_CHECK_BUDGET (seconds for all steps, default 480; steps
# that would start after it are skipped), CUDA_HOME (default /usr/local/cuda).
#
# Robust by design: no `set -e`; every step runs under `timeout`, its exit status is recorded and
# the next step runs whatever happened. The script itself always exits 0 after writing the
# report (the summary at the end lists each step's status).

bundle() {
    local build=$1 dest lib
    [ -d "$build" ] || { echo "no build directory $build" >&2; return 1; }
    dest="$build/_libs"
    mkdir -p "$dest"
    for f in "$build"/lib/libclnode.so* "$build"/tests/backend/test_conformance \
             "$build"/tests/backend/test_grad_conformance "$build"/tools/clnode-solve \
             "$build"/tools/clnode-bench "$build"/bench/bench_grad_worker; do
        [ -f "$f" ] || continue
        ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
    done | sort -u | while read -r lib; do
        case "$(basename "$lib")" in
            libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libgcc_s.so*|\
            libstdc++.so*|libcuda.so*|libcudart*|libcublas*|libnvrtc*|libnvidia*|libclnode*) continue ;;
        esac
        cp -L "$lib" "$dest/" && echo "bundled $lib"
    done
    du -sh "$dest"
}

if [ "${1:-}" = "--bundle" ]; then
    bundle "${2:?usage: $0 --bundle BUILD_DIR}"
    exit $?
fi

OUT=${OUT:-./gpu-report}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
REPORT="$OUT/report.txt"
: >"$REPORT"
ROOT=$(pwd)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
BUDGET=${GPU_CHECK_BUDGET:-480}
START=$(date +%s)
SUMMARY=()

say() { echo "$*" | tee -a "$REPORT"; }

# step NAME TIMEOUT_S CMD...: runs CMD with a timeout, output into the report.
step() {
    local name=$1 limit=$2 t0 rc elapsed left
    shift 2
    elapsed=$(( $(date +%s) - START ))
    left=$(( BUDGET - elapsed ))
    say ""
    say "=== $name  (\$ $*)"
    if [ "$left" -le 5 ]; then
        say "--- skipped: the budget of ${BUDGET} s is spent"
        SUMMARY+=("SKIP  $name")
        return 0
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    t0=$(date +%s)
    timeout -k 10 "$limit" "$@" >>"$REPORT" 2>&1 </dev/null
    rc=$?
    local dt=$(( $(date +%s) - t0 ))
    case $rc in
        0) SUMMARY+=("ok    $name (${dt} s)") ;;
        77) SUMMARY+=("SKIP  $name: exit 77, device absent (${dt} s)") ;;
        124|137) SUMMARY+=("TIME  $name: killed after ${limit} s") ;;
        *) SUMMARY+=("FAIL  $name: exit $rc (${dt} s)") ;;
    esac
    say "--- exit $rc after ${dt} s"
    return 0
}

say "clnode GPU check, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), in $ROOT"
say "git: $(git rev-parse --short HEAD 2>/dev/null || echo n/a) $(git status --porcelain 2>/dev/null | wc -l) changed files"

# ---------------------------------------------------------------- the machine
step "system" 20 bash -c 'uname -a; grep PRETTY /etc/os-release; nproc; free -g | head -2; id -u'
step "nvidia-smi" 30 nvidia-smi
step "nvidia-smi query" 30 nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap,clocks.max.sm --format=csv
step "CUDA toolkit" 20 bash -c "ls -d /usr/local/cuda*; '$CUDA_HOME/bin/nvcc' --version || nvcc --version"
step "CUDA libraries" 20 bash -c 'ldconfig -p | grep -E "libcuda\.so|libcudart|libcublas\.|libnvrtc\.|libnvidia-opencl|libOpenCL" || true'
step "precision environment" 5 bash -c 'env | grep -E "^(NVIDIA_TF32_OVERRIDE|CUBLAS_|CUDA_VISIBLE_DEVICES|CUDA_MODULE_LOADING|OCL_ICD|CLNODE_)" || echo "(none set)"'

# ---------------------------------------------------------------- NVIDIA OpenCL ICD
register_icd() {
    local have lib
    have=$(grep -ls nvidia /etc/OpenCL/vendors/*.icd 2>/dev/null | head -1)
    if [ -n "$have" ]; then
        echo "NVIDIA OpenCL ICD already registered: $have: $(head -1 "$have")"
        return 0
    fi
    if ldconfig -p 2>/dev/null | grep -q 'libnvidia-opencl\.so\.1'; then
        lib=libnvidia-opencl.so.1
    else
        lib=$(find /usr/lib /usr/lib64 /usr/local/nvidia /usr/local/lib -name 'libnvidia-opencl.so.1' \
              2>/dev/null | head -1)
    fi
    if [ -z "$lib" ]; then
        echo "libnvidia-opencl.so.1 not found: the driver's OpenCL part is not installed/mounted"
        echo "(containers: NVIDIA_DRIVER_CAPABILITIES must include compute)"
        return 1
    fi
    if mkdir -p /etc/OpenCL/vendors 2>/dev/null && echo "$lib" >/etc/OpenCL/vendors/nvidia.icd 2>/dev/null; then
        echo "registered /etc/OpenCL/vendors/nvidia.icd -> $lib"
    else
        local d="$OUT/icd"
        mkdir -p "$d"
        cp /etc/OpenCL/vendors/*.icd "$d"/ 2>/dev/null
        echo "$lib" >"$d/nvidia.icd"
        echo "no write access to /etc/OpenCL/vendors: OCL_ICD_VENDORS=$d"
        echo "$d" >"$OUT/.ocl_icd_vendors"
    fi
}
step "register NVIDIA OpenCL ICD" 20 bash -c "$(declare -f register_icd); OUT='$OUT' register_icd"
if [ -f "$OUT/.ocl_icd_vendors" ]; then
    OCL_ICD_VENDORS=$(cat "$OUT/.ocl_icd_vendors")
    export OCL_ICD_VENDORS
fi
if command -v clinfo >/dev/null; then
    step "clinfo -l" 30 clinfo -l
fi

# ---------------------------------------------------------------- the build
BUILD=${1:-}
if [ -n "$BUILD" ]; then
    BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || BUILD=""
    [ -z "$BUILD" ] && say "!!! the build directory '$1' does not exist; building instead"
fi
if [ -z "$BUILD" ]; then
    if ! command -v meson >/dev/null || ! command -v ninja >/dev/null; then
        step "apt-get update" 90 apt-get update
        step "apt-get install build deps" 240 env DEBIAN_FRONTEND=noninteractive apt-get install -y \
            --no-install-recommends meson ninja-build pkg-config gcc python3 libopenblas-dev \
            libjson-c-dev libcmocka-dev libclblast-dev ocl-icd-opencl-dev opencl-headers
    fi
    if command -v meson >/dev/null && command -v ninja >/dev/null; then
        BUILD="$OUT/build"
        wipe=()
        [ -f "$BUILD/build.ninja" ] && wipe=(--wipe)
        step "meson setup" 120 env CUDA_PATH="$CUDA_HOME" meson setup "${wipe[@]}" "$BUILD" "$ROOT" \
            -Dcuda=enabled -Dopencl=auto
        step "ninja" 300 ninja -C "$BUILD"
    else
        say "!!! no meson/ninja and no prebuilt build directory: nothing to run"
    fi
fi

# libraries: the CUDA toolkit's, then what --bundle carried
LD_LIBRARY_PATH="$CUDA_HOME/lib64:$CUDA_HOME/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ -n "$BUILD" ] && [ -d "$BUILD/_libs" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$BUILD/_libs"
export LD_LIBRARY_PATH
say ""
say "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

check_libs() {
    local f missing=0
    for f in "$BUILD"/lib/libclnode.so "$BUILD"/tests/backend/test_conformance "$BUILD"/tools/clnode-solve \
             "$BUILD"/tools/clnode-bench; do
        if [ ! -e "$f" ]; then
            echo "$f: not built"
            continue
        fi
        if ldd "$f" | grep 'not found'; then
            echo "  ^ missing for $f"
            missing=1
        fi
    done
    [ $missing = 0 ] && echo "every shared library resolves"
    return $missing
}

if [ -n "$BUILD" ]; then
    step "shared libraries (ldd)" 30 bash -c "$(declare -f check_libs); BUILD='$BUILD' check_libs"
    if ! (BUILD="$BUILD" check_libs >/dev/null 2>&1); then
        step "apt-get install runtime libs" 180 bash -c 'apt-get update >/dev/null 2>&1; \
            DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            libopenblas0 libjson-c5 libcmocka0 libclblast1 ocl-icd-libopencl1'
        step "shared libraries (ldd, again)" 30 bash -c "$(declare -f check_libs); BUILD='$BUILD' check_libs"
    fi
    step "ldd libclnode (CUDA part)" 10 bash -c "ldd '$BUILD/lib/libclnode.so' | grep -E 'cuda|cublas|nvrtc|OpenCL|clblast|openblas'"
    # the tests find their data through the source root compiled into them
    SRC_BUILT=$(grep -o 'CLN_SOURCE_ROOT=[^ ]*' "$BUILD/build.ninja" 2>/dev/null | head -1 |
                sed "s/^CLN_SOURCE_ROOT=//; s/[\\\\\"']//g")
    if [ -n "$SRC_BUILT" ] && [ "$SRC_BUILT" != "$ROOT" ] && [ ! -e "$SRC_BUILT/tests/data" ]; then
        if mkdir -p "$(dirname "$SRC_BUILT")" 2>/dev/null && ln -sfn "$ROOT" "$SRC_BUILT" 2>/dev/null; then
            say "linked $SRC_BUILT -> $ROOT (the source root compiled into the tests)"
        else
            say "!!! the tests look for their data under $SRC_BUILT, which does not exist here"
        fi
    fi
fi

# ---------------------------------------------------------------- the checks
if [ -n "$BUILD" ]; then
    T="$BUILD/tests/backend/test_conformance"
    S="$BUILD/tools/clnode-solve"
    BENCH="$BUILD/tools/clnode-bench"

    DEVS="$BUILD/tools/clnode-devices"
    CMP="$BUILD/tools/clnode-compare"
    # clnode-compare --plot runs this tree's plot script (the build may come from elsewhere)
    export CLNODE_PLOT_SCRIPT="$ROOT/tools/clnode-compare/plot_compare.py"
    PROBE="$BUILD/tests/backend/test_probe"

    # what each device's GEMMs really compute, then the seed problem on every device and mode
    step "clnode-devices" 120 "$DEVS"
    step "clnode-devices --json" 120 bash -c "'$DEVS' --json > '$OUT/devices.json'"
    # (the plot's data, FILE.png.json, holds the comparison as JSON)
    step "clnode-compare (seed, every device, plot)" 240 "$CMP" --plot "$OUT/compare.png"
    # diffrax itself on this GPU: the original failure (TF32 under JAX's default precision)
    if python3 -c 'import jax, diffrax, safetensors' 2>/dev/null; then
        step "diffrax seed on the GPU (default vs highest matmul precision)" 150 \
            env PYTHONUNBUFFERED=1 python3 "$ROOT/scripts/diffrax_seed.py" --json "$OUT/diffrax_seed.json"
    fi
    step "conformance cuda" 300 "$T" cuda
    # the caller's stream adopted, and a solve from and into the caller's device arrays
    # (clnode_solve_device) against clnode_solve's bits
    step "cuda-adopt (stream, device arrays)" 120 "$BUILD/tests/backend/test_cuda_adopt"
    # the reverse pass on the GPU against the host's, bit for bit (strict; tf32 is the tensor
    # cores' there and is not compared)
    GC="$BUILD/tests/backend/test_grad_conformance"
    step "gradient conformance cuda" 300 "$GC" cuda
    [ -x "$PROBE" ] && step "probe tests cuda" 120 "$PROBE" cuda
    for p in fp32 fp64; do
        for b in 1 2 1000; do
            step "seed solve cuda $p batch $b" 60 "$S" --backend cuda --precision "$p" --batch "$b"
        done
    done
    step "seed solve cuda fp32 batch 2 tf32" 60 "$S" --backend cuda --precision fp32 --batch 2 \
        --gemm-precision tf32
    step "seed solve cuda:0:cublas fp32 batch 1, 2, 1000" 60 bash -c "for b in 1 2 1000; do \
        '$S' --device cuda:0:cublas --batch \$b --json | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j[\"batch\"], sorted({t[\"num_steps\"] for t in j[\"trajectories\"]}))'; done"
    step "conformance opencl:nvidia" 300 "$T" opencl:nvidia
    step "gradient conformance opencl:nvidia" 300 "$GC" opencl:nvidia
    step "clnode-bench host, cuda, cuda:0:cublas, opencl:nvidia" 240 "$BENCH" \
        --devices host,cuda,cuda:0:cublas,opencl:nvidia --batches 1,64,4096 --repeat 2
    # the gradient: the kept solve, the reverse pass and its bare loop on each device
    step "clnode-bench --grad host, cuda, opencl:nvidia" 300 "$BENCH" --grad \
        --devices host,cuda,opencl:nvidia --batches 1,1024,100000 --repeat 2
    # against jax.grad of diffrax on the same GPU, where this Python has JAX with CUDA (JAX from
    # PyPI with its CUDA wheels; they are not on a bare GPU machine: then said, not run)
    GW="$BUILD/bench/bench_grad_worker"
    if python3 -c 'import jax, diffrax, equinox; assert jax.devices()[0].platform == "gpu"' \
        2>/dev/null; then
        for dev in cuda opencl:nvidia; do
            step "bench_peers --grad $dev vs jax.grad on the GPU" 240 env PYTHONUNBUFFERED=1 \
                python3 "$ROOT/bench/bench_peers.py" --grad --device "$dev" --precisions fp32 \
                --batches 1,1024,100000 --repeat 3 --rounds 2 --clnode-grad-worker "$GW" \
                --json "$OUT/bench_peers_grad_${dev%%:*}.json"
        done
    else
        say ""
        say "=== bench_peers --grad against jax.grad on the GPU: not run (no JAX with a GPU"
        say "    device in this Python: pip install 'jax[cuda12]' diffrax equinox where it installs)"
        SUMMARY+=("SKIP  bench_peers --grad: no JAX on the GPU here")
    fi
    # the JAX training example with JAX on the GPU and clnode on "cuda" (one shortened run; its
    # summary lines are the figures: losses, steps, time per step), where this Python has a CUDA
    # jaxlib; clnode's Python package is built into $OUT/py when this Python cannot import it (no
    # network needed: --no-build-isolation). With the CUDA plugin, clnode.jax's custom calls are
    # registered for XLA's CUDA platform: the run checks them on a real GPU and stream.
    if python3 -c 'import jax, diffrax, equinox, optax; jax.devices("gpu")' 2>/dev/null; then
        PYDIR="$OUT/py"
        if ! python3 -c 'import clnode.jax' 2>/dev/null; then
            step "pip install clnode (for the example)" 300 python3 -m pip install -q \
                --no-build-isolation --no-deps --target "$PYDIR" "$ROOT"
        fi
        step "examples/neural_ode.py, JAX on the GPU, clnode on cuda (2 x 20 steps)" 300 \
            env PYTHONPATH="$PYDIR${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 python3 \
            "$ROOT/examples/neural_ode.py" --device cuda --steps 20 --dataset-size 64 --quiet \
            --out "$OUT/neural_ode_gpu.png" --losses-out "$OUT/neural_ode_gpu.json"
    else
        say ""
        say "=== examples/neural_ode.py with JAX on the GPU: did not run (no CUDA jaxlib with"
        say "    diffrax, equinox and optax in this Python: pip install 'jax[cuda12]' diffrax optax)"
        SUMMARY+=("SKIP  examples/neural_ode.py on the GPU: no CUDA jaxlib here")
    fi
    # the front ends' solves on device memory (clnode_solve_device): clnode.jax's forward on
    # XLA's CUDA buffers, clnode.torch's CUDA tensors without a gradient, each against the same
    # solve from host arrays, bit for bit (a part without JAX on the GPU or CUDA torch says so)
    step "front ends on device memory (scripts/gpu_device_arrays.py)" 240 \
        env PYTHONPATH="$OUT/py${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 python3 \
        "$ROOT/scripts/gpu_device_arrays.py"
fi

say ""
say "=== summary ($(( $(date +%s) - START )) s)"
for line in "${SUMMARY[@]}"; do
    say "$line"
done
echo "report: $REPORT"
exit 0
