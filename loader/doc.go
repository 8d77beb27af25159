// Package loader reads and writes GGUF files in pure Go (no cgo).
//
// GGUF is the container format of ggml: a header, ordered key/value metadata,
// a table of tensor descriptors and an aligned data section. [Open] maps a
// file read-only (mmap on unix, a full read elsewhere), validates every field
// before use and exposes typed metadata getters ([KV]), tensor descriptors
// ([TensorInfo]) and zero-copy access to tensor payloads ([File.TensorData]).
// [Write] and [WriteFile] produce GGUF v3 files.
//
// Files are treated as untrusted input: counts and string lengths are checked
// against the bytes that remain before anything is allocated, multiplications
// are overflow-checked, tensors have at most 4 dimensions (the ggml limit),
// their data must lie inside the file, be aligned and not overlap, and unknown
// tensor or value types, duplicate keys and duplicate tensor names are
// rejected. Every problem is reported as an error that names it; nothing in
// this package panics on a malformed file.
//
// Tensor shapes use ggml order: Shape[0] is ne0, the fastest-varying
// (contiguous) dimension, which is the reverse of the PyTorch/numpy shape.
package loader
