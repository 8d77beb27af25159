// da3_ggml.h includes the public ggml headers of the pinned
// github.com/ollama/ollama module (go.mod), found in this order:
//
//  1. ggml/vendor/include, where `go generate ./ggml` (run by make) copies them
//     in a checkout of this repository, with their module version;
//  2. an include path from the environment, e.g. for a replace directive or
//     another ollama version than the pinned one:
//       CGO_CPPFLAGS="-I$(go list -m -f '{{.Dir}}' github.com/ollama/ollama)/ml/backend/ggml/ggml/include"
//  3. the pinned module itself, next to this module in the module cache
//     (GOMODCACHE/github.com/ollama/ollama@VERSION): a program that requires
//     github.com/da3-go/da3-go builds with no setup (TestExternalConsumer).
//
// DA3_GGML_MODULE_VERSION is the version the headers come from ("" when
// unknown); ggml.CheckVersion compares it with the linked module. The
// version in path 3 must equal go.mod's (TestHeaderPathMatchesGoMod).
#pragma once
#if __has_include("da3_ggml_version.h")
#include "da3_ggml_version.h"
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#elif __has_include("ggml.h")
#ifndef DA3_GGML_MODULE_VERSION
#define DA3_GGML_MODULE_VERSION ""
#endif
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#elif __has_include("../../../ollama/ollama@v0.17.4/ml/backend/ggml/ggml/include/ggml.h")
#define DA3_GGML_MODULE_VERSION "v0.17.4"
#include "../../../ollama/ollama@v0.17.4/ml/backend/ggml/ggml/include/ggml.h"
#include "../../../ollama/ollama@v0.17.4/ml/backend/ggml/ggml/include/ggml-alloc.h"
#include "../../../ollama/ollama@v0.17.4/ml/backend/ggml/ggml/include/ggml-backend.h"
#include "../../../ollama/ollama@v0.17.4/ml/backend/ggml/ggml/include/ggml-cpu.h"
#else
#error "ggml headers not found: in the da3-go repository run 'go generate ./ggml' (or 'make'); elsewhere set CGO_CPPFLAGS=\"-I$(go list -m -f '{{.Dir}}' github.com/ollama/ollama)/ml/backend/ggml/ggml/include\" (see the README's Library section)"
#endif

#include <string.h>

// DA3_ABORT_OFFSET is where a custom node's op_params hold, after ggml's own
// struct ggml_custom_op_params (three words), a pointer to the abort flag of
// the backend that runs its graph (Context.SetAbort), or NULL. ggml's CPU
// backend reads that flag only between nodes; the project's long kernels
// (ggml/kernels) also poll it between blocks of rows or tiles, so that one
// node of minutes stops within milliseconds.
#define DA3_ABORT_OFFSET 40
_Static_assert(DA3_ABORT_OFFSET >= 3 * sizeof(void *) && DA3_ABORT_OFFSET + sizeof(void *) <= GGML_MAX_OP_PARAMS,
               "the abort flag's slot overlaps ggml's custom op parameters");

// da3_abort_flag is the abort flag custom node t carries, or NULL.
static inline const int * da3_abort_flag(const struct ggml_tensor * t) {
    const int * f;
    memcpy(&f, (const char *) t->op_params + DA3_ABORT_OFFSET, sizeof f);
    return f;
}

// da3_aborted reports whether flag f (from da3_abort_flag) is set: one
// relaxed load, cheap enough to poll every block of work.
static inline int da3_aborted(const int * f) { return f != NULL && __atomic_load_n(f, __ATOMIC_RELAXED) != 0; }
