#!/bin/sh
# Wall time and peak RSS of `da3-go depth -tile on` against a plain run, with the
# spec-size DA2-Small (random weights) on synthetic JPEGs; see docs/tiling.md.
# Usage: benchmarks/tile_figures.sh [WxH[,WxH...]]   (default 4000x3000)
set -eu
cd "$(dirname "$0")/.."
export CGO_CFLAGS="${CGO_CFLAGS:--O3 -march=native}" CGO_CXXFLAGS="${CGO_CXXFLAGS:--O3 -march=native}"
DA3_TILE_FIGURES="${1:-4000x3000}" go test ./cmd/da3-go -run '^TestTileFigures$' -count=1 -v -timeout 2h | grep -E 'TILE-FIGURE|Mpx|FAIL|ok'
