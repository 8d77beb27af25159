#!/usr/bin/env bash
# gpu_session.sh OUT — everything da3-go checks and measures on a lent GPU
# machine (no Go, no network), in one command, writing its log and JSON
# results to OUT. Prepared where Go is (see docs/gpu.md):
#
#   make build PORTABLE=1 && scripts/validate_gpu.sh prepare   # bin/, bin/validate, ggml/vendor/ggml-src
#   make cuda-check                                            # optional: a prebuilt libggml-cuda.so
#   scripts/gpu_session.sh pack                                # .gpu/bundle.tar.xz: binary, libraries, bundle
#
# and carried: .gpu (or bin and ggml/vendor/ggml-src to build the CUDA backend
# there), and .whl, the wheels of the official DA3 package for the PyTorch
# timing. On the GPU machine:
#
#   scripts/gpu_session.sh "$OUT"
#
# Steps, each bounded in time and logged; a failed step does not stop the
# others: the CUDA backend (the carried build, else make cuda on all cores),
# parity and timing against the CPU (scripts/validate_gpu.sh: DA3-BASE one and
# two views with pose, DA2-Small), DA3-BASE 504x336 at 1, 2, 4 and 8 views in
# f32 and with f16 weights (device memory per view count), the convolution
# routing A/B, a device-memory budget refusal, the official PyTorch network's
# times on the same GPU, and the Vulkan backend on the same GPU when a Vulkan
# loader is present.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

if [ "${1:-}" = pack ]; then
	# bin/gpu: the libraries; then .gpu/bundle.tar.xz: bin/da3-go, bin/gpu and
	# bin/validate compressed (the working tree that travels is limited in size).
	set -e
	mkdir -p bin/gpu .gpu
	# The CUDA library (about 45 MiB compressed for one architecture) only with
	# PACK_CUDA=1: the carried tree is limited to 64 MiB, and make cuda on the
	# GPU machine's cores takes a few minutes.
	libs=ggml/vendor/lib/libggml-vulkan.so
	[ "${PACK_CUDA:-0}" = 1 ] && libs="ggml/vendor/build/cuda-check/lib/libggml-cuda.so $libs"
	rm -rf bin/gpu && mkdir -p bin/gpu
	for f in $libs; do
		[ -f "$f" ] && { strip --strip-unneeded -o "bin/gpu/$(basename "$f")" "$f"; echo "packed $f"; }
	done
	cp -L ggml/vendor/lib/libggml-base.so.0 bin/gpu/libggml-base.so.0
	ln -sf libggml-base.so.0 bin/gpu/libggml-base.so
	cp ggml/vendor/lib/VERSION bin/gpu/
	tar -cJf .gpu/bundle.tar.xz bin/da3-go bin/gpu bin/validate
	ls -l .gpu/bundle.tar.xz
	exit 0
fi
# A carried bundle (pack) is unpacked over bin/ first.
if [ -f .gpu/bundle.tar.xz ] && [ ! -x bin/da3-go ]; then
	tar -xJf .gpu/bundle.tar.xz
fi

OUT=${1:?usage: gpu_session.sh OUT}
mkdir -p "$OUT"
LOG=$OUT/session.log
exec > >(tee -a "$LOG") 2>&1
BIN=$ROOT/bin/da3-go
DEV=${GPU_DEV:-CUDA0}              # the device under test (GPU_DEV=cpu: a dry run of the script's logic)
VIEWS=${GPU_VIEWS:-1 2 4 8}
REPEAT=${GPU_REPEAT:-10}
W=${TMPDIR:-/tmp}/da3-gpu
mkdir -p "$W"
say() { echo "== $(date +%T) $*"; }

say "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
lscpu | grep -m1 'Model name' || true
"$BIN" version || { echo "no $BIN"; exit 1; }

# CUDA runtime and cuBLAS: the PyTorch environment's CUDA 13 wheels, else the toolkit's.
libs=$(python3 - <<'EOF'
import glob, os, site
dirs = set()
for sp in site.getsitepackages():
    for pat in ("nvidia/*/lib", "nvidia/*/*/lib"):
        for d in glob.glob(os.path.join(sp, pat)):
            if glob.glob(d + "/libcudart.so.13*") or glob.glob(d + "/libcublas.so.13*"):
                dirs.add(d)
print(":".join(sorted(dirs)))
EOF
)
export LD_LIBRARY_PATH=${libs}${libs:+:}/usr/local/cuda/lib64:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}

# The backend folder: the carried libraries, or a build here.
LIBDIR=$ROOT/bin/gpu
if [ "$DEV" != cpu ] && [ ! -f "$LIBDIR/libggml-cuda.so" ]; then
	say "building the CUDA backend (no prebuilt library carried)"
	export PATH=/usr/local/cuda/bin:$PATH
	timeout 420 bash scripts/validate_gpu.sh --build-only --cuda-archs 90 >"$OUT/cuda-build.log" 2>&1 ||
		{ echo "CUDA build failed or timed out:"; tail -20 "$OUT/cuda-build.log"; }
	mkdir -p "$LIBDIR"
	cp -a ggml/vendor/lib/. "$LIBDIR/" 2>/dev/null || true
fi
export DA3_BACKEND_PATH=$LIBDIR
ldd "$LIBDIR/libggml-cuda.so" | grep -E "not found|cudart|cublas|libcuda" || true
say "devices"
"$BIN" devices 2>&1 | tee "$OUT/devices.txt"

say "parity and timing against the CPU (validate_gpu.sh)"
timeout 300 bash scripts/validate_gpu.sh --skip-build --device-b "$DEV" --repeat 5 --work "$W/validate" 2>&1 | tee "$OUT/validate.log"
DA3=$W/validate/da3-base.gguf

if [ -f "$DA3" ]; then
	IMG=$ROOT/bin/validate/images/view0.png
	say "DA3-BASE 504x336: views, f32 and f16 weights, device memory"
	timeout 60 "$BIN" quantize -quiet -type f16 -conv f16 -pure "$DA3" "$W/da3-base-f16.gguf" || echo "quantize f16 failed"
	for v in $VIEWS; do
		for m in "$DA3" "$W/da3-base-f16.gguf"; do
			[ -f "$m" ] || continue
			tag=$(basename "$m" .gguf)
			timeout 120 "$BIN" bench -quiet -json -model "$m" -device "$DEV" -size 504x336 -views "$v" -repeat "$REPEAT" \
				>"$OUT/bench-$tag-$v.json" 2>"$W/bench.err" || { echo "bench $tag $v failed:"; tail -3 "$W/bench.err"; }
			python3 - "$OUT/bench-$tag-$v.json" <<'EOF'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception:
    sys.exit(0)
print(f"  {r['model'].split('/')[-1]:<22} {r['views']} view(s) {r['processed_width']}x{r['processed_height']}: median {r['median_ms']:.2f} ms "
      f"(min {r['min_ms']:.2f}), {r['per_view_ms']:.2f} ms/view; device weights {r.get('device_weights_mib',0):.0f} MiB, "
      f"compute {r.get('device_compute_mib',0):.0f} MiB (planned {r.get('estimate_device_mib',0):.0f}); splits {r['splits']}, "
      f"fallbacks {r.get('fallbacks') or 'none'}")
EOF
		done
	done
	say "convolution routing A/B (im2col + cuBLAS vs ggml_conv_2d_direct), 1 view"
	for k in flash flash,directconv; do
		timeout 120 "$BIN" bench -quiet -json -model "$DA3" -device "$DEV" -size 504x336 -repeat "$REPEAT" -kernels "$k" >"$OUT/bench-kernels-${k/,/-}.json" 2>/dev/null &&
			python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(f'  -kernels $k: median {r[\"median_ms\"]:.2f} ms, device compute {r.get(\"device_compute_mib\",0):.0f} MiB')" "$OUT/bench-kernels-${k/,/-}.json"
	done
	say "device memory budget: a request that cannot fit is refused cleanly"
	timeout 60 "$BIN" depth -quiet -model "$DA3" -device "$DEV" -max-device-memory 500M -process-res 1008 -format npy -o "$W/oom/" "$IMG" "$ROOT/bin/validate/images/view1.png"
	echo "  exit status $? (want 1, one line naming the figures)"
	timeout 60 "$BIN" depth -quiet -model "$DA3" -device "$DEV" -max-device-memory 100M -format npy -o "$W/oom2/" "$IMG"
	echo "  exit status $? (want 1: the weights alone exceed the budget)"
fi

say "PyTorch (official DA3 network) on the same GPU"
if ls "$ROOT"/.whl/*.whl >/dev/null 2>&1; then
	python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$ROOT"/.whl/*.whl &&
		PYTHONPATH=/tmp/site timeout 240 python3 benchmarks/gpu_torch.py --config base --width 504 --height 336 --views 1,2,4,8 \
			--modes f32,f16 --repeat 10 | tee "$OUT/torch.jsonl"
else
	echo "no wheels carried (.whl): skipped"
fi

if ldconfig -p | grep -q libvulkan.so.1 && [ -f "$LIBDIR/libggml-vulkan.so" ]; then
	say "Vulkan on the same GPU"
	timeout 180 bash scripts/validate_gpu.sh --skip-build --device-b Vulkan0 --cases da3-two,da2 --repeat 5 \
		--work "$W/validate" 2>&1 | tee "$OUT/validate-vulkan.log"
else
	echo "== no Vulkan loader or library: Vulkan on the GPU skipped"
fi
say "done"
