#!/usr/bin/env bash
# Installs the Debian packages clnode needs, only those missing. Needs root (or sudo) when
# something is missing; prints what it installs.
set -euo pipefail
# python3-numpy: not needed by clnode, but common on Debian machines, and its numpy 1.x headers in
# /usr/include/python3.X/numpy are the hostile case scripts/test_install.sh checks the package in.
# groff-base: the man-pages test renders the tools' man pages with groff (no man-db needed).
pkgs=(build-essential meson ninja-build pkg-config python3 python3-venv python3-dev python3-numpy
      libopenblas-dev libjson-c-dev libcmocka-dev zlib1g-dev
      ocl-icd-opencl-dev opencl-headers libclblast-dev pocl-opencl-icd clinfo oclgrind
      libopenmpi-dev openmpi-bin groff-base)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
