# da3-go build. `make` generates the ggml headers and builds bin/da3-go;
# `make test` runs the test suite; `make bench` the micro-benchmarks.
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
TEST_TIMEOUT ?= 40m

.PHONY: all build generate test test-short bench bench-compare fuzz vet clean cuda oracle flags

all: build

$(VENDOR): go.mod
	$(GO) generate ./ggml

generate: $(VENDOR)

build: generate
	$(GO) build -trimpath -o bin/da3-go ./cmd/da3-go

test: generate
	$(GO) vet ./...
	$(GO) test -timeout $(TEST_TIMEOUT) ./...

test-short: generate
	$(GO) test -short ./...

bench: generate
	$(GO) test -run '^$$' -bench . -benchtime 3x ./ggml/...

fuzz: generate
	$(GO) test -run '^$$' -fuzz FuzzOpen -fuzztime 60s ./loader

vet: generate
	$(GO) vet ./...

flags:
	@echo "CGO_CFLAGS=$(CGO_CFLAGS)"

oracle:
	bash tests/oracle/setup.sh

clean:
	rm -rf bin ggml/vendor
