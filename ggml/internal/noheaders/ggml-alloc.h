/* This directory is searched only when ggml/vendor/include is missing. */
#error "ggml headers are missing: run 'go generate ./ggml' (or 'make') in the da3-go repository root"
