#!/usr/bin/env bash
# Builds the C++ engine depth-anything.cpp (its da3-cli) for the optional C++ column of `make bench-compare`.
# Its sources are not part of this repository: pass a checkout with its ggml submodule present
# (git clone --recursive), or the engine's tree and a ggml tree at the commit its submodule pins.
#   bash benchmarks/build_cpp.sh SRC [GGML_SRC]
# The build goes to benchmarks/out/cpp/build (git-ignored) and the binary to benchmarks/out/cpp/da3-cli, where
# benchmarks/compare.py finds it. Release build with ggml's default native CPU flags, as the engine's README says.
set -euo pipefail
src=$(cd "${1:?usage: build_cpp.sh SRC [GGML_SRC]}" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/benchmarks/out/cpp"
mkdir -p "$out"
if [ $# -ge 2 ]; then
    # A copy of the engine's tree with the given ggml in third_party/ggml (the source folders stay untouched).
    rm -rf "$out/src"
    cp -r "$src" "$out/src"
    rm -rf "$out/src/third_party/ggml"
    cp -r "$(cd "$2" && pwd)" "$out/src/third_party/ggml"
    src="$out/src"
fi
[ -f "$src/third_party/ggml/CMakeLists.txt" ] || { echo "build_cpp.sh: $src/third_party/ggml is empty (clone with --recursive or pass GGML_SRC)" >&2; exit 1; }
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$src" -B "$out/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DDA_BUILD_TESTS=OFF
cmake --build "$out/build" -j "$(nproc)" --target da3-cli
cp "$(find "$out/build" -name da3-cli -type f -perm -u+x | head -1)" "$out/da3-cli"
echo "built $out/da3-cli"
