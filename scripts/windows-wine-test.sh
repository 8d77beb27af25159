#!/usr/bin/env bash
# Cross-builds da3-go for Windows (make windows: bin/da3-go.exe) and the Linux
# command (make build: bin/da3-go), then runs bin/da3-go.exe under Wine
# against the Linux build on the committed tiny fixtures (tests/wine):
# version, convert, depth (.npy, compared within a small tolerance) and
# hostile inputs. Skips, exit 0, when MinGW-w64 or Wine is not installed.
#
#   scripts/windows-wine-test.sh          (make test-windows)
#
# Environment:
#   WINEPREFIX       the Wine prefix (default: ${TMPDIR:-/tmp}/da3-go-wine,
#                    made on the first run and reused)
#   DA3_WINE         the Wine loader (default: wine64 on PATH,
#                    /usr/lib/wine/wine64, else wine)
#   DA3_SKIP_BUILD=1 use bin/da3-go.exe and bin/da3-go as they are
#   GO, MAKE         the go and make commands
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
MAKE=${MAKE:-make}

skip() {
	echo "test-windows: SKIP: $*" >&2
	exit 0
}

mingw=""
for c in x86_64-w64-mingw32-gcc-posix x86_64-w64-mingw32-gcc; do
	if command -v "$c" >/dev/null 2>&1; then
		mingw=$c
		break
	fi
done
[ -n "$mingw" ] || skip "no MinGW-w64 cross compiler (Debian: apt-get install gcc-mingw-w64-x86-64 g++-mingw-w64-x86-64)"

wine=${DA3_WINE:-}
if [ -n "$wine" ]; then
	command -v "$wine" >/dev/null 2>&1 || { echo "test-windows: DA3_WINE=$wine is not a program" >&2; exit 1; }
	wine=$(command -v "$wine")
else
	for c in wine64 /usr/lib/wine/wine64 wine; do
		if command -v "$c" >/dev/null 2>&1; then
			wine=$(command -v "$c")
			break
		fi
	done
fi
[ -n "$wine" ] || skip "no Wine (Debian: apt-get install wine64)"
wineserver=""
for c in "$(dirname "$wine")/wineserver" "$(dirname "$wine")/wineserver64" wineserver /usr/lib/wine/wineserver64; do
	if command -v "$c" >/dev/null 2>&1; then
		wineserver=$(command -v "$c")
		break
	fi
done
[ -n "$wineserver" ] || skip "Wine's wineserver not found next to $wine"

now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

if [ "${DA3_SKIP_BUILD:-}" != 1 ]; then
	t=$(now)
	"$MAKE" --no-print-directory windows
	echo "test-windows: make windows: $(took "$t")" >&2
	t=$(now)
	"$MAKE" --no-print-directory build
	echo "test-windows: make build: $(took "$t")" >&2
fi
[ -f bin/da3-go.exe ] || { echo "test-windows: bin/da3-go.exe missing" >&2; exit 1; }
[ -f bin/da3-go ] || { echo "test-windows: bin/da3-go missing" >&2; exit 1; }

export WINEPREFIX=${WINEPREFIX:-${TMPDIR:-/tmp}/da3-go-wine}
export WINEDEBUG=${WINEDEBUG:--all}
if [ ! -f "$WINEPREFIX/system.reg" ]; then
	t=$(now)
	mkdir -p "$WINEPREFIX"
	"$wine" wineboot --init >/dev/null 2>&1 || true
	"$wineserver" -w
	[ -f "$WINEPREFIX/system.reg" ] || { echo "test-windows: wineboot did not make the prefix $WINEPREFIX" >&2; exit 1; }
	echo "test-windows: new Wine prefix $WINEPREFIX: $(took "$t")" >&2
fi

# Go programs (1.24 and later) need ProcessPrng from bcryptprimitives.dll,
# which Wine before 9 lacks: build the stand-in into this prefix only.
sys32=$WINEPREFIX/drive_c/windows/system32
if [ ! -e "$sys32/bcryptprimitives.dll" ]; then
	"$mingw" -O2 -shared -o "$sys32/bcryptprimitives.dll" scripts/wine/bcryptprimitives.c -ladvapi32
	echo "test-windows: Wine lacks bcryptprimitives.dll: installed the stand-in (scripts/wine/bcryptprimitives.c) in $sys32" >&2
fi

# One wineserver for all the runs (each would otherwise start its own), with
# Wine's services started once, by a first program.
"$wineserver" -p || true
trap '"$wineserver" -k 2>/dev/null || true' EXIT
t=$(now)
"$wine" bin/da3-go.exe version >/dev/null 2>&1 </dev/null || true
echo "test-windows: Wine started: $(took "$t")" >&2

# The memory limit read on Windows (internal/sysmem, pure Go): its unit
# tests, cross-compiled and run under Wine.
tmp=$(mktemp -d)
trap '"$wineserver" -k 2>/dev/null || true; rm -rf "$tmp"' EXIT
GOOS=windows GOARCH=amd64 CGO_ENABLED=0 "$GO" test -c -o "$tmp/sysmem.test.exe" ./internal/sysmem
if ! (cd internal/sysmem && "$wine" "$tmp/sysmem.test.exe" -test.count=1 -test.v >"$tmp/sysmem.out" 2>&1 </dev/null); then
	tr -d '\r' <"$tmp/sysmem.out" >&2
	echo "test-windows: FAIL: internal/sysmem under Wine" >&2
	exit 1
fi
echo "test-windows: internal/sysmem under Wine: ok" >&2

t=$(now)
DA3_WINE_EXE=$PWD/bin/da3-go.exe DA3_BIN=$PWD/bin/da3-go DA3_WINE=$wine \
	"$GO" test -count=1 -v ./tests/wine
echo "test-windows: tests under Wine: $(took "$t")" >&2
