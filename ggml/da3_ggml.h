// da3_ggml.h includes the public ggml headers that `go generate ./ggml` copies
// from the pinned module into ggml/vendor/include, and fails with a clear
// message when they have not been generated.
#pragma once
#if __has_include("da3_ggml_version.h")
#include "da3_ggml_version.h"
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#else
#error "ggml headers are missing: run 'go generate ./ggml' (or 'make') in the da3-go repository root"
#endif
