#!/usr/bin/env bash
# validate_gpu.sh — parity and timing of da3-go on a GPU backend against the CPU.
#
# Two steps, because GPU machines here have no Go and no network:
#
#   1. On a machine with Go and the oracle checkpoints (tests/oracle/out):
#        make build PORTABLE=1                # a da3-go that runs on other x86-64 machines
#        scripts/validate_gpu.sh prepare      # ggml sources, model specs and images
#      This fills ggml/vendor/ggml-src (scripts/pack_ggml_src.sh) and bin/validate/;
#      carry bin/ and ggml/vendor/ggml-src (about 25 MiB) to the GPU machine.
#
#   2. On the GPU machine (nvcc, CMake, python3 with numpy):
#        scripts/validate_gpu.sh [options]
#      builds the CUDA backend from the carried sources (make cuda), regenerates
#      the random-weight models from their specs (or takes GGUFs given), runs
#      the same model and images with -device cpu and -device CUDA0, compares
#      (depth: correlation >= 0.99999 and max|d| <= 1e-3 max|ref|; pose:
#      extrinsics max|d| <= 1e-3), times both with da3-go bench, and prints
#      PASS or FAIL (exit status 0 or 1).
#
# Cases: da3-one (DA3-BASE, one view), da3-two (DA3-BASE, two views: depth and
# pose), da2 (DA2-Small). The script's logic can be run without a GPU with
# --device-b cpu, optionally with --backend-path-b ggml/vendor/lib/cpu-dl so
# that run B uses a dynamically loaded CPU backend (make cpu-dl).
#
# Options (run):
#   --device-a NAME       reference device (default cpu)
#   --device-b NAME       device under test (default CUDA0)
#   --backend-path-b DIR  DA3_BACKEND_PATH for the runs of device B
#   --da3 GGUF            DA3 any-view model to use instead of the generated DA3-BASE
#   --da2 GGUF            DA2 model to use instead of the generated DA2-Small
#   --cases LIST          comma-separated subset of da3-one,da3-two,da2
#   --bin PATH            da3-go binary (default bin/da3-go)
#   --work DIR            scratch folder (default $TMPDIR/da3-validate)
#   --repeat N            timed runs per bench (default 5); --no-bench to skip timing
#   --skip-build          do not build the CUDA backend (use ggml/vendor/lib as it is)
#   --build-only          build the CUDA backend and stop (the build is incremental:
#                         run it again if it was cut off)
#   --cuda-archs LIST     CMAKE_CUDA_ARCHITECTURES (default native)
# Options (prepare):
#   --build               also run make build PORTABLE=1
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

mode=run
case "${1:-}" in
prepare) mode=prepare; shift ;;
run) shift ;;
esac

DEV_A=cpu DEV_B=CUDA0 BPATH_B= DA3_GGUF= DA2_GGUF= CASES=da3-one,da3-two,da2
BIN=bin/da3-go BUNDLE=bin/validate WORK=${TMPDIR:-/tmp}/da3-validate REPEAT=5 BENCH=1
SKIP_BUILD=0 BUILD_ONLY=0 CUDA_ARCHS=native PREP_BUILD=0
PY=${PYTHON:-python3}
die() { echo "validate_gpu: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	--device-a) DEV_A=$2; shift ;;
	--device-b) DEV_B=$2; shift ;;
	--backend-path-b) BPATH_B=$(cd "$2" && pwd) || die "no folder $2"; shift ;;
	--da3) DA3_GGUF=$2; shift ;;
	--da2) DA2_GGUF=$2; shift ;;
	--cases) CASES=$2; shift ;;
	--bin) BIN=$2; shift ;;
	--work) WORK=$2; shift ;;
	--repeat) REPEAT=$2; shift ;;
	--no-bench) BENCH=0 ;;
	--skip-build) SKIP_BUILD=1 ;;
	--build-only) BUILD_ONLY=1 ;;
	--cuda-archs) CUDA_ARCHS=$2; shift ;;
	--build) PREP_BUILD=1 ;;
	-h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (--help)" ;;
	esac
	shift
done

# ---------------------------------------------------------------- prepare
if [ "$mode" = prepare ]; then
	set -e
	if [ "$PREP_BUILD" = 1 ]; then make build PORTABLE=1; fi
	bash scripts/pack_ggml_src.sh
	ORACLE=tests/oracle/out
	[ -f $ORACLE/da3-base/model.safetensors ] && [ -f $ORACLE/da2-vits/hf/model.safetensors ] ||
		die "oracle checkpoints missing in $ORACLE (make oracle)"
	rm -rf "$BUNDLE"
	mkdir -p "$BUNDLE/specs" "$BUNDLE/images"
	$PY scripts/validate_gpu.py spec $ORACLE/da3-base/model.safetensors "$BUNDLE/specs/da3-base.json"
	cp $ORACLE/da3-base/config.json "$BUNDLE/specs/da3-base.config.json"
	$PY scripts/validate_gpu.py spec $ORACLE/da2-vits/hf/model.safetensors "$BUNDLE/specs/da2-vits.json"
	cp $ORACLE/da2-vits/hf/config.json "$BUNDLE/specs/da2-vits.config.json"
	# Two views of one scene: the oracle's photo and a shifted crop of it, both 640x480.
	$PY - "$ORACLE/da3-base/one/images/view0.png" "$BUNDLE/images" <<'PYEOF'
import sys
from PIL import Image
im = Image.open(sys.argv[1]).convert("RGB")
im.save(sys.argv[2] + "/view0.png")
w, h = im.size
im.crop((24, 12, w, h)).resize((w, h), Image.BILINEAR).save(sys.argv[2] + "/view1.png")
PYEOF
	[ -x "$BIN" ] || echo "validate_gpu: note: $BIN is missing: run make build PORTABLE=1 (or prepare --build)" >&2
	echo "validate_gpu: prepared $BUNDLE ($(du -sh "$BUNDLE" | cut -f1)) and ggml/vendor/ggml-src ($(du -sh ggml/vendor/ggml-src | cut -f1))"
	echo "  carry: bin ggml/vendor/ggml-src    then run: scripts/validate_gpu.sh"
	exit 0
fi

# ---------------------------------------------------------------- run
[ -x "$BIN" ] || die "$BIN not found: build it with 'make build PORTABLE=1' where Go is, and carry bin/"
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
$PY -c 'import numpy' 2>/dev/null || die "$PY with numpy is needed"
mkdir -p "$WORK"
echo "== da3-go: $("$BIN" version 2>&1 | head -1)"

is_cpu() { [ "$(echo "$1" | tr '[:upper:]' '[:lower:]')" = cpu ]; }
if ! is_cpu "$DEV_B" && [ "$SKIP_BUILD" = 0 ]; then
	echo "== building the CUDA backend into ggml/vendor/lib"
	command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || die "nvcc not found"
	command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
	if command -v make >/dev/null; then
		make cuda CUDA_ARCHS="$CUDA_ARCHS" || die "make cuda failed"
	else
		src=$ROOT/ggml/vendor/ggml-src
		[ -f "$src/DA3_VERSION" ] || die "no make and no $src (scripts/pack_ggml_src.sh)"
		gen=; command -v ninja >/dev/null && gen="-G Ninja"
		cmake -S ggml/cmake -B ggml/vendor/build/cuda $gen -DCMAKE_BUILD_TYPE=Release -DDA3_GGML_SOURCE="$src" \
			-DDA3_GGML_VERSION= -DDA3_CUDA=ON -DDA3_CPU_VARIANT=none -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS" &&
			cmake --build ggml/vendor/build/cuda -j "$(nproc)" &&
			cmake --install ggml/vendor/build/cuda --prefix "$ROOT/ggml/vendor/lib" || die "CUDA backend build failed"
	fi
fi
[ "$BUILD_ONLY" = 1 ] && { ls -la ggml/vendor/lib; exit 0; }

envb=()
[ -n "$BPATH_B" ] && envb=(DA3_BACKEND_PATH="$BPATH_B")
echo "== devices (run B environment)"
env "${envb[@]}" "$BIN" devices 2>&1 || true

# model NAME SPEC CONFIG -> path of a GGUF regenerated from the spec (cached in WORK).
model() {
	local name=$1 spec=$2 config=$3 dir=$WORK/$1
	local gguf=$WORK/$name.gguf
	[ -f "$spec" ] || die "$spec missing: run 'scripts/validate_gpu.sh prepare' where the oracle checkpoints are, or pass --da3/--da2"
	if [ ! -f "$gguf" ] || [ "$spec" -nt "$gguf" ]; then
		mkdir -p "$dir"
		$PY scripts/validate_gpu.py synth "$spec" "$dir/model.safetensors" >&2 || die "synth $name failed"
		cp "$config" "$dir/config.json"
		"$BIN" convert -quiet "$dir" "$gguf" >&2 || die "convert $name failed"
		rm -f "$dir/model.safetensors"
	fi
	echo "$gguf"
}

IMG0=$BUNDLE/images/view0.png IMG1=$BUNDLE/images/view1.png
[ -f "$IMG0" ] && [ -f "$IMG1" ] || die "images missing in $BUNDLE/images (prepare)"

results=()
fail=0
# run_case NAME GGUF POSE(0|1) IMAGES...
run_case() {
	local name=$1 gguf=$2 pose=$3
	shift 3
	local out=$WORK/out/$name
	rm -rf "$out"
	mkdir -p "$out/a" "$out/b"
	echo "== $name: $(basename "$gguf") on $DEV_A (A) and $DEV_B (B), $# image(s)"
	local side dev ok=1
	for side in a b; do
		dev=$DEV_A
		local e=()
		if [ $side = b ]; then dev=$DEV_B; e=("${envb[@]}"); fi
		if ! env "${e[@]}" "$BIN" depth -v -quiet -model "$gguf" -device "$dev" -format npy -o "$out/$side" "$@" 2>"$out/$side/depth.log"; then
			echo "   depth on $dev failed:"; tail -5 "$out/$side/depth.log" | sed 's/^/     /'
			ok=0; continue
		fi
		grep -h 'msg=device ' "$out/$side/depth.log" | head -1 | sed "s/^/   $side: /"
		grep -h 'fell back' "$out/$side/depth.log" | sort -u | sed "s/^/   $side: /"
		if [ "$pose" = 1 ] && ! env "${e[@]}" "$BIN" pose -quiet -model "$gguf" -device "$dev" -o "$out/$side/pose.json" "$@" 2>"$out/$side/pose.log"; then
			echo "   pose on $dev failed:"; tail -5 "$out/$side/pose.log" | sed 's/^/     /'
			ok=0
		fi
	done
	if [ $ok = 1 ]; then
		local pairs=() img base
		for img in "$@"; do
			base=$(basename "${img%.*}")
			pairs+=("$out/a/${base}_depth.npy" "$out/b/${base}_depth.npy")
		done
		$PY scripts/validate_gpu.py depth "${pairs[@]}" | sed 's/^/   /'
		[ "${PIPESTATUS[0]}" = 0 ] || ok=0
		if [ "$pose" = 1 ]; then
			$PY scripts/validate_gpu.py pose "$out/a/pose.json" "$out/b/pose.json" | sed 's/^/   /'
			[ "${PIPESTATUS[0]}" = 0 ] || ok=0
		fi
	fi
	if [ "$BENCH" = 1 ]; then
		local imgs
		imgs=$(IFS=,; echo "$*")
		if "$BIN" bench -quiet -json -model "$gguf" -device "$DEV_A" -image "$imgs" -repeat "$REPEAT" >"$out/a/bench.json" 2>"$out/a/bench.log" &&
			env "${envb[@]}" "$BIN" bench -quiet -json -model "$gguf" -device "$DEV_B" -image "$imgs" -repeat "$REPEAT" >"$out/b/bench.json" 2>"$out/b/bench.log"; then
			$PY scripts/validate_gpu.py bench "$out/a/bench.json" "$out/b/bench.json"
		else
			echo "   bench failed:"; tail -3 "$out"/?/bench.log | sed 's/^/     /'
			ok=0
		fi
	fi
	if [ $ok = 1 ]; then results+=("PASS $name"); else results+=("FAIL $name"); fail=1; fi
}

IFS=, read -r -a cases <<<"$CASES"
for c in "${cases[@]}"; do
	case "$c" in
	da3-one | da3-two)
		[ -n "$DA3_GGUF" ] || DA3_GGUF=$(model da3-base "$BUNDLE/specs/da3-base.json" "$BUNDLE/specs/da3-base.config.json") || exit 2
		if [ "$c" = da3-one ]; then run_case da3-one "$DA3_GGUF" 0 "$IMG0"; else run_case da3-two "$DA3_GGUF" 1 "$IMG0" "$IMG1"; fi
		;;
	da2)
		[ -n "$DA2_GGUF" ] || DA2_GGUF=$(model da2-vits "$BUNDLE/specs/da2-vits.json" "$BUNDLE/specs/da2-vits.config.json") || exit 2
		run_case da2 "$DA2_GGUF" 0 "$IMG0"
		;;
	*) die "unknown case $c (da3-one, da3-two, da2)" ;;
	esac
done

echo "== summary ($DEV_A vs $DEV_B)"
printf '   %s\n' "${results[@]}"
if [ $fail = 0 ]; then echo PASS; exit 0; fi
echo FAIL
exit 1
