#!/usr/bin/env bash
# Reads da3-go's exports back with the tools users use and compares them with the official exporters'
# files made from the same arrays (see README.md). Needs tests/exportcheck/setup.sh (and the official
# depth-anything-3 package, tests/oracle/setup.sh). Writes $OUT/summary.json and prints the figures.
#   bash tests/exportcheck/run.sh [OUT]        (default OUT: /tmp/da3-exportcheck)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$(realpath -m "${1:-${DA3_EXPORTCHECK_OUT:-/tmp/da3-exportcheck}}")
rm -rf "$OUT" && mkdir -p "$OUT"
cd "$ROOT"
make build >/dev/null
# The same cgo flags as make, so the cgo build cache is reused.
CGO_CFLAGS="$(make -s flags | sed 's/^CGO_CFLAGS=//')"
export CGO_CFLAGS CGO_CXXFLAGS="$CGO_CFLAGS"
# da3-go's exports of the test scenes, with their input arrays.
DA3_EXPORTCHECK_OUT="$OUT/cases" go test ./tests -run '^TestExportCheckCases$' -count=1 >"$OUT/go-test.log" 2>&1 || {
  cat "$OUT/go-test.log" >&2
  exit 1
}
python3 tests/exportcheck/check.py --cases "$OUT/cases" --bin bin/da3-go --out "$OUT"
