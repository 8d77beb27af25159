#!/usr/bin/env bash
# pack_ggml_src.sh [DEST] — copy the pinned module's ggml sources (the tree the
# Go build compiles, github.com/ollama/ollama .../ml/backend/ggml/ggml) into
# DEST (default ggml/vendor/ggml-src, git-ignored and skipped by `go` commands)
# so that `make cuda` can build the CUDA backend on a machine without Go.
# DEST/DA3_VERSION names the module version; ggml/cmake reads it.
#
# Only what CMake needs travels: headers, the base and CPU sources, the CUDA
# backend (and HIP, which reuses the CUDA sources), Vulkan and Metal sources
# and the cmake helpers, with the fixes of ggml/patches applied; Go files are
# dropped. About 9 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-ggml/vendor/ggml-src}
module=github.com/ollama/ollama
go=${GO:-go}
dir=$("$go" list -m -f '{{.Dir}}' "$module")
version=$("$go" list -m -f '{{.Path}} {{.Version}}' "$module")
if [ -z "$dir" ]; then
	"$go" mod download "$module"
	dir=$("$go" list -m -f '{{.Dir}}' "$module")
fi
src="$dir/ml/backend/ggml/ggml"
[ -f "$src/src/ggml-backend-reg.cpp" ] || { echo "pack_ggml_src: $src is not a ggml tree" >&2; exit 1; }
rm -rf "$dest"
# The GPU backends' patched stage (ggml/patches: scripts/stage_ggml.py copies
# without Go files and writes DA3_VERSION and DA3_PATCHES), which make cuda and
# make vulkan then build from as it is.
DA3_GGML_VERSION="$version" python3 scripts/stage_ggml.py "$src" "$dest" ggml/patches/cuda ggml/patches/vulkan >&2
size=$(du -sm "$dest" | cut -f1)
if [ "$size" -ge 64 ]; then
	echo "pack_ggml_src: $dest is ${size} MiB, over the 64 MiB a carried folder may hold" >&2
	exit 1
fi
echo "pack_ggml_src: $version ggml sources in $dest (${size} MiB)"
