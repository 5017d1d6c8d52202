#!/bin/sh
# example.sh - the README's main job: set up, build tapc, compile the
# bundled GPT example for a 1x1 mesh, build the program and run its check
# against the reference outputs torch produced.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
sh "$top/.ci/setup"
cd "$top"
[ -x configure ] || autoreconf -fi >/dev/null
mkdir -p build/release
cd build/release
[ -f Makefile ] || "$top/configure" -q
make -s -j"$(nproc 2>/dev/null || echo 2)"
./tapc "$top/test/e2e/gpt/model.onnx" -mesh 1x1 -time-passes -o example
make -s -C example
example/model --check "$top/test/e2e/gpt/test_data_set_0"
example/model --bench 200
