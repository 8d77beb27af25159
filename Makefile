# da3-go build. `make` generates the ggml headers and builds bin/da3-go;
# `make test` runs the test suite; `make bench` the micro-benchmarks;
# `make windows` cross-builds bin/da3-go.exe (docs/windows.md).
#
# cgo compiles ggml with CGO_CFLAGS/CGO_CXXFLAGS. Without SIMD flags the CPU
# backend runs about 35x slower, so they are set here: -march=native by
# default (minus AMX, whose sources the cgo build does not compile), or the
# portable x86-64-v3 with PORTABLE=1 for binaries that run on other machines.

GO ?= go
PORTABLE ?=
UNAME_M := $(shell uname -m)

ifeq ($(PORTABLE),1)
  ifeq ($(UNAME_M),x86_64)
    ARCH_FLAGS := -march=x86-64-v3
  else
    ARCH_FLAGS :=
  endif
else
  ARCH_FLAGS := -march=native
  ifneq ($(shell grep -m1 -o -w amx_tile /proc/cpuinfo 2>/dev/null),)
    ARCH_FLAGS += -mno-amx-tile -mno-amx-int8 -mno-amx-bf16
  endif
endif

export CGO_ENABLED := 1
export CGO_CFLAGS := -O3 $(ARCH_FLAGS)
export CGO_CXXFLAGS := -O3 $(ARCH_FLAGS)

VENDOR := ggml/vendor/include/da3_ggml_version.h

# Backend libraries are looked for in absolute folders only (never the working
# directory): this checkout's ggml/vendor/lib, where make cuda and make cpu-dl
# install, is fixed into the binary at link time.
GO_LDFLAGS := -X github.com/da3-go/da3-go/backend.sourceLibDir=$(CURDIR)/ggml/vendor/lib
TEST_TIMEOUT ?= 40m

.PHONY: all build windows test-windows generate test test-race test-short bench bench-compare fuzz fuzz-inputs fuzz-models fuzz-serve hostile-subprocess vet clean cuda cuda-check vulkan gpu-src cpu-dl ggml-src oracle flags web viewer capi python test-python

all: build

$(VENDOR): go.mod
	$(GO) generate ./ggml

generate: $(VENDOR)

# GOEXE: .exe when Go builds for Windows (native builds under MSYS2).
EXE = $(shell $(GO) env GOEXE)

build: generate viewer
	$(GO) build -trimpath -ldflags "$(GO_LDFLAGS)" -o bin/da3-go$(EXE) ./cmd/da3-go

# make windows: bin/da3-go.exe for windows/amd64, cross-built with MinGW-w64
# (Debian: gcc-mingw-w64-x86-64 g++-mingw-w64-x86-64; their posix thread
# model, which ggml's C++ threads need, where both are installed). ggml and
# its CPU backend are linked statically, compiled for WIN_ARCH (default
# x86-64-v3: AVX2, FMA, F16C; da3-go's own kernels still pick AVX-512 by
# CPUID). The .exe needs only Windows' own DLLs. `make test-windows` runs it
# under Wine against the Linux build (scripts/windows-wine-test.sh; it skips
# without MinGW-w64 or Wine). See docs/windows.md.
WIN_CC ?= $(shell command -v x86_64-w64-mingw32-gcc-posix 2>/dev/null || echo x86_64-w64-mingw32-gcc)
WIN_CXX ?= $(shell command -v x86_64-w64-mingw32-g++-posix 2>/dev/null || echo x86_64-w64-mingw32-g++)
WIN_ARCH ?= x86-64-v3

windows: generate viewer
	@command -v $(WIN_CC) >/dev/null 2>&1 || { echo "make windows: $(WIN_CC) not found: install MinGW-w64 (Debian: apt-get install gcc-mingw-w64-x86-64 g++-mingw-w64-x86-64) or set WIN_CC and WIN_CXX" >&2; exit 1; }
	CC=$(WIN_CC) CXX=$(WIN_CXX) GOOS=windows GOARCH=amd64 CGO_ENABLED=1 \
		CGO_CFLAGS="-O3 -march=$(WIN_ARCH)" CGO_CXXFLAGS="-O3 -march=$(WIN_ARCH)" \
		$(GO) build -trimpath -o bin/da3-go.exe ./cmd/da3-go

test-windows:
	GO="$(GO)" MAKE="$(MAKE)" ./scripts/windows-wine-test.sh

test: generate viewer
	$(GO) vet ./...
	$(GO) test -timeout $(TEST_TIMEOUT) ./...
	$(MAKE) --no-print-directory test-python

# The web page's 3D viewer: three.js bundled by esbuild (npm) into
# server/web/static/viewer.js, which go:embed puts in the binary. `make web`
# needs npm; `make viewer` (part of build and test) builds it when npm is there
# and otherwise says so: the binary still builds, serves the API and the page,
# and the page says the viewer is not bundled.
NPM ?= npm
WEB := server/web/viewer
VIEWER := server/web/static/viewer.js

$(WEB)/node_modules/.package-lock.json: $(WEB)/package.json $(WEB)/package-lock.json
	cd $(WEB) && $(NPM) ci --no-audit --no-fund --loglevel=error

$(VIEWER): $(WEB)/viewer.js $(WEB)/node_modules/.package-lock.json
	cd $(WEB) && $(NPM) run --silent build

web: $(VIEWER)

viewer:
	@if command -v $(NPM) >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory web || echo "warning: building the 3D viewer failed: the page will say it is not bundled" >&2; \
	else \
		echo "note: npm not found: the page's 3D viewer is not bundled (the API and the rest of the page work)" >&2; \
	fi

# The C ABI: bin/libda3go.so and bin/libda3go.h (see capi/).
capi: generate
	$(GO) build -trimpath -ldflags "$(GO_LDFLAGS)" -buildmode=c-shared -o bin/libda3go.so ./capi

# The Python package (python/, docs/python.md): `make python` bundles
# bin/libda3go.so (and bin/lib/libggml-*.so when present) into python/da3go/
# and builds the wheel bin/da3go-*.whl; `make test-python` installs it into a
# fresh virtual environment offline and runs python/tests (python/test.sh;
# it skips without python3).
PYTHON ?= python3

python: capi
	rm -rf python/da3go/libda3go.so python/da3go/lib python/build python/da3go.egg-info bin/da3go-*.whl
	cp bin/libda3go.so python/da3go/
	if ls bin/lib/libggml-*.so* >/dev/null 2>&1; then mkdir -p python/da3go/lib && cp -P bin/lib/libggml-*.so* python/da3go/lib/; fi
	if $(PYTHON) -c 'import setuptools, wheel' 2>/dev/null; then iso=--no-build-isolation; fi; \
		$(PYTHON) -m pip wheel -q --no-deps $$iso -w bin ./python
	@ls bin/da3go-*.whl

test-python: generate
	GO="$(GO)" PYTHON="$(PYTHON)" ./python/test.sh

# The concurrency tests under the race detector (Close during runs).
# The first run compiles ggml again with -race (several minutes).
test-race: generate
	$(GO) test -race -run 'Close|Concurrent|Cancel' ./model ./backend
	$(GO) test -race -run 'Queue|ClientGone|Graceful|Models' ./server

test-short: generate
	$(GO) test -short ./...

bench: generate
	$(GO) test -run '^$$' -bench . -benchtime 3x ./ggml/...

fuzz: generate
	$(GO) test -run '^$$' -fuzz FuzzOpen -fuzztime 60s ./loader

# The parsers of user inputs, FUZZTIME (default 45s) each: images of every
# format through the bounded decoder, .npy, the -list and -cameras files, the
# PyTorch pickle VM and the safetensors header.
FUZZTIME ?= 45s
fuzz-inputs: generate
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeBytes$$' -fuzztime $(FUZZTIME) ./internal/imgio
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeNPY$$' -fuzztime $(FUZZTIME) ./internal/imgio
	$(GO) test -run '^$$' -fuzz '^FuzzReadList$$' -fuzztime $(FUZZTIME) ./cmd/da3-go
	$(GO) test -run '^$$' -fuzz '^FuzzCamerasJSON$$' -fuzztime $(FUZZTIME) ./cmd/da3-go
	$(GO) test -run '^$$' -fuzz '^FuzzUnpickle$$' -fuzztime $(FUZZTIME) ./convert
	$(GO) test -run '^$$' -fuzz '^FuzzReadSafetensors$$' -fuzztime $(FUZZTIME) ./convert

# Mutated model files through Load and one tiny Depth (seeded from the
# hostile corpus of tests/hostile_gen_test.go).
fuzz-models: generate
	$(GO) test -run '^$$' -fuzz FuzzLoadRun -fuzztime 120s -parallel 1 ./tests

# The hostile corpus through the built binary, one process per file.
hostile-subprocess: build
	DA3_HOSTILE_SUBPROCESS=1 DA3_BIN=$(CURDIR)/bin/da3-go $(GO) test -run TestHostileModelsSubprocess -v -count=1 ./tests

# Hostile bodies and images against the HTTP handler.
fuzz-serve: generate
	$(GO) test -run '^$$' -fuzz FuzzDepthBody -fuzztime 60s ./server
	$(GO) test -run '^$$' -fuzz FuzzDepthImage -fuzztime 60s ./server

vet: generate
	$(GO) vet ./...

# PyTorch, ONNX Runtime (and the C++ engine when built) vs da3-go, side by side (needs `make oracle`;
# benchmarks/setup.sh installs ONNX Runtime; about 40 minutes on 2 cores).
# BENCH_ARGS passes options to benchmarks/compare.py, e.g. BENCH_ARGS=--quick.
bench-compare: build
	python3 benchmarks/compare.py --bin bin/da3-go $(BENCH_ARGS)

flags:
	@echo "CGO_CFLAGS=$(CGO_CFLAGS)"

oracle:
	bash tests/oracle/setup.sh

# Dynamically loadable ggml backends, built by CMake (ggml/cmake/) from the same
# pinned ggml sources as the Go build: the module's tree where Go is available,
# else the copy scripts/pack_ggml_src.sh wrote to ggml/vendor/ggml-src (GPU
# machines without Go). See docs/gpu.md.
CMAKE ?= cmake
CUDA_ARCHS ?= native
CPU_VARIANT ?= haswell
JOBS ?= $(shell nproc 2>/dev/null || echo 4)
GGML_MODULE_DIR = $(shell $(GO) list -m -f '{{.Dir}}' github.com/ollama/ollama 2>/dev/null)
GGML_SRC ?= $(if $(GGML_MODULE_DIR),$(GGML_MODULE_DIR)/ml/backend/ggml/ggml,$(CURDIR)/ggml/vendor/ggml-src)
GGML_SRC_VERSION = $(if $(GGML_MODULE_DIR),$(shell $(GO) list -m -f '{{.Path}} {{.Version}}' github.com/ollama/ollama))
CMAKE_GEN := $(if $(shell command -v ninja 2>/dev/null),-G Ninja,)
GGML_CMAKE = $(CMAKE) -S ggml/cmake $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Release \
	-DDA3_GGML_SOURCE="$(GGML_SRC)" -DDA3_GGML_VERSION="$(GGML_SRC_VERSION)"

# The GPU backends build from one staged copy of the pinned sources with the
# fixes in ggml/patches/cuda and ggml/patches/vulkan applied
# (scripts/stage_ggml.py: a file is rewritten only when its content changes;
# a patch whose upstream text changed stops the build, naming it). A packed
# source folder (ggml/vendor/ggml-src, made by scripts/pack_ggml_src.sh for
# machines without Go) is such a stage already.
GPU_STAGE := ggml/vendor/ggml-gpu-src
GPU_SRC = $(if $(wildcard $(GGML_SRC)/DA3_PATCHES),$(GGML_SRC),$(CURDIR)/$(GPU_STAGE))
GPU_CMAKE = $(CMAKE) -S ggml/cmake $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Release \
	-DDA3_GGML_SOURCE="$(GPU_SRC)" -DDA3_GGML_VERSION="$(GGML_SRC_VERSION)"

gpu-src:
	@if [ -f "$(GGML_SRC)/DA3_PATCHES" ]; then echo "GPU sources: $(GGML_SRC), patched: $$(tr '\n' ' ' <$(GGML_SRC)/DA3_PATCHES)"; \
	else DA3_GGML_VERSION="$(GGML_SRC_VERSION)" python3 scripts/stage_ggml.py "$(GGML_SRC)" $(GPU_STAGE) ggml/patches/cuda ggml/patches/vulkan; fi

# make cuda: libggml-base.so + libggml-cuda.so into ggml/vendor/lib (needs nvcc).
cuda: gpu-src
	@$(call fresh-build,ggml/vendor/build/cuda)
	$(GPU_CMAKE) -B ggml/vendor/build/cuda -DDA3_CUDA=ON -DDA3_CPU_VARIANT=none \
		-DCMAKE_CUDA_ARCHITECTURES="$(CUDA_ARCHS)"
	$(CMAKE) --build ggml/vendor/build/cuda -j $(JOBS)
	$(CMAKE) --install ggml/vendor/build/cuda --prefix $(CURDIR)/ggml/vendor/lib

# make vulkan: libggml-vulkan.so (+ libggml-base.so) into ggml/vendor/lib, for
# AMD, Intel and NVIDIA GPUs through their Vulkan drivers, and Mesa's software
# device (lavapipe) that the test suite runs on. Needs glslc and the Vulkan
# headers and loader (Debian: glslc libvulkan-dev; lavapipe: mesa-vulkan-drivers).
# From the patched stage (gpu-src). See docs/gpu.md.
# A build folder configured from another source folder (an older checkout's
# stage) cannot be reconfigured in place: it is started afresh.
fresh-build = grep -qxF 'DA3_GGML_SOURCE:PATH=$(GPU_SRC)' $(1)/CMakeCache.txt 2>/dev/null || rm -rf $(1)

vulkan: gpu-src
	@$(call fresh-build,ggml/vendor/build/vulkan)
	$(GPU_CMAKE) -B ggml/vendor/build/vulkan -DDA3_VULKAN=ON -DDA3_CPU_VARIANT=none
	$(CMAKE) --build ggml/vendor/build/vulkan -j $(JOBS)
	$(CMAKE) --install ggml/vendor/build/vulkan --prefix $(CURDIR)/ggml/vendor/lib

# make cuda-check: compile the CUDA backend on a machine without a GPU or a
# system CUDA, with NVIDIA's CUDA 13.0 compiler, runtime and cuBLAS from PyPI
# (scripts/cuda_toolchain.sh, into ggml/vendor/cuda-pypi), for one architecture
# (CUDA_CHECK_ARCHS, default 90: H100/H200). The library lands in
# ggml/vendor/build/cuda-check/lib (not searched by da3-go); carry it to a GPU
# machine with a CUDA 13 driver, or use `make cuda` there. About 40 CPU-minutes.
CUDA_CHECK_ARCHS ?= 90
cuda-check: gpu-src
	@root=$$(bash scripts/cuda_toolchain.sh) && \
	PATH="$(CURDIR)/$$root/bin:$$PATH" $(GPU_CMAKE) -B ggml/vendor/build/cuda-check \
		-DDA3_CUDA=ON -DDA3_CPU_VARIANT=none -DCMAKE_CUDA_ARCHITECTURES="$(CUDA_CHECK_ARCHS)" \
		-DCMAKE_CUDA_COMPILER="$(CURDIR)/$$root/bin/nvcc" -DCUDAToolkit_ROOT="$(CURDIR)/$$root" && \
	PATH="$(CURDIR)/$$root/bin:$$PATH" $(CMAKE) --build ggml/vendor/build/cuda-check -j $(JOBS)
	@ls -l ggml/vendor/build/cuda-check/lib/libggml-cuda.so

# make cpu-dl: a dynamically loadable CPU backend (libggml-cpu-$(CPU_VARIANT).so,
# CPU_VARIANT=all for every variant) into ggml/vendor/lib/cpu-dl, a folder not
# searched by default: it exercises the loadable-backend path without a GPU
# (go test ./backend, or DA3_BACKEND_PATH=$PWD/ggml/vendor/lib/cpu-dl).
cpu-dl:
	$(GGML_CMAKE) -B ggml/vendor/build/cpu-dl -DDA3_CUDA=OFF -DDA3_CPU_VARIANT=$(CPU_VARIANT)
	$(CMAKE) --build ggml/vendor/build/cpu-dl -j $(JOBS)
	$(CMAKE) --install ggml/vendor/build/cpu-dl --prefix $(CURDIR)/ggml/vendor/lib/cpu-dl

# make ggml-src: copy the ggml sources into ggml/vendor/ggml-src to carry to a
# machine without Go.
ggml-src:
	bash scripts/pack_ggml_src.sh

clean:
	rm -rf bin ggml/vendor $(VIEWER) $(WEB)/node_modules
