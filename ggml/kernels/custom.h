#pragma once
#include <stddef.h>
#include <stdint.h>
#include "da3_ggml.h"

// Reasons a kernel call did not compute its output (da3_fault).
enum { DA3_FAULT_NONE = 0, DA3_FAULT_OPERANDS = 1, DA3_FAULT_NOMEM = 2, DA3_FAULT_UNAVAILABLE = 3 };

// da3_fault records a kernel call that returned without computing its
// output; Go checks the count after every compute (kernels.FaultsSince).
void da3_fault(int reason);
uint64_t da3_faults(void);
int da3_last_fault(void);

// scratch is a thread's grow-only buffer. The buffers of a thread are freed
// when the thread exits (a pthread key destructor), so the per-call worker
// threads of ggml's CPU backend do not leak them.
struct da3_buf { float * p; size_t n; };
enum { DA3_BUF_A, DA3_BUF_B, DA3_BUF_DEQ, DA3_BUF_K, DA3_BUF_V, DA3_BUF_S, DA3_BUF_O, DA3_NBUF };
// da3_scratch returns buffer i of the calling thread with room for n floats,
// 64-byte aligned, or NULL when out of memory.
float * da3_scratch(int i, size_t n);

int da3_gemm_available(void);
void da3_op_gemm(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void da3_op_conv2d(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void da3_op_attention(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void da3_op_bilinear(struct ggml_tensor * dst, int ith, int nth, void * userdata);
