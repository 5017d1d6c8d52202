#!/bin/sh
# example.sh - the README's main job: set up, build tapc, compile the
# bundled GPT example and print its IR (every tensor shaped).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
sh "$top/.ci/setup"
cd "$top"
[ -x configure ] || autoreconf -fi >/dev/null
mkdir -p build/release
cd build/release
[ -f Makefile ] || "$top/configure" -q
make -s -j"$(nproc 2>/dev/null || echo 2)"
./tapc "$top/test/e2e/gpt/model.onnx" -batch=4 -time-passes -emit=ir
