#!/usr/bin/env bash
# Installs a build into a temporary prefix, then builds and runs tests/install/example.c against
# it with pkg-config only (no path into the source or build tree), as a user of the library would.
# usage: tests/install/check.sh BUILD_DIR
set -euo pipefail
build=$1
src=$(cd "$(dirname "$0")" && pwd)
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
meson install -C "$build" --destdir "$prefix" --quiet >/dev/null
root="$prefix$(meson introspect "$build" --buildoptions | python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"][0])')"
# a DESTDIR install: point the .pc file's prefix at where the files really are
mkdir -p "$prefix/pc"
sed "s|^prefix=.*|prefix=$root|" "$(find "$root" -name clnode.pc | head -n1)" >"$prefix/pc/clnode.pc"
export PKG_CONFIG_PATH="$prefix/pc"
cflags=$(pkg-config --cflags clnode)
libs=$(pkg-config --libs clnode)
libdir=$(pkg-config --variable=libdir clnode)
cc -std=c11 -Wall -Wextra -Werror $cflags "$src/example.c" -o "$prefix/example" $libs -lm
LD_LIBRARY_PATH="$libdir" "$prefix/example"
# the installed clnode-compare runs the installed plot script, not the source tree's
compare=$(find "$root" -name clnode-compare -type f | head -n1)
if [ -n "$compare" ]; then
  want=$(find "$root" -name plot_compare.py | head -n1)
  got=$(LD_LIBRARY_PATH="$libdir" "$compare" --version | sed -n 's/^plot script: //p')
  if [ -z "$want" ] || [ "$got" != "$want" ]; then
    echo "install check: FAIL: the installed clnode-compare runs '$got', not '$want'"
    exit 1
  fi
fi
echo "install check: OK (clnode $(pkg-config --modversion clnode), built with: cc $cflags example.c $libs)"
