#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include "da3_ggml.h"

// da3_aligned_alloc returns size bytes aligned to align (a power of two, size
// a multiple of it), freed with da3_aligned_free: C11's aligned_alloc and
// free, or on Windows, whose C runtime has no aligned_alloc, _aligned_malloc
// and _aligned_free.
#ifdef _WIN32
#include <malloc.h>
static inline void * da3_aligned_alloc(size_t align, size_t size) { return _aligned_malloc(size, align); }
static inline void da3_aligned_free(void * p) { _aligned_free(p); }
#else
static inline void * da3_aligned_alloc(size_t align, size_t size) { return aligned_alloc(align, size); }
static inline void da3_aligned_free(void * p) { free(p); }
#endif

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
enum { DA3_BUF_A, DA3_BUF_B, DA3_BUF_AH, DA3_BUF_BH, DA3_BUF_DEQ, DA3_BUF_K, DA3_BUF_V, DA3_BUF_S, DA3_BUF_O, DA3_NBUF };
// da3_scratch returns buffer i of the calling thread with room for n floats,
// 64-byte aligned, or NULL when out of memory.
float * da3_scratch(int i, size_t n);

// Epilogue activations, product precisions and instruction-set variants
// (kernels.Act, kernels.Precision, kernels.Variant), packed into the ops'
// userdata by the Go side:
//   gemm:      act | prec << 8 | variant << 16 | packed << 24 (src0 from da3_pack_weight)
//   conv2d:    stride | pad << 8 | dil << 16 | act << 24 | prec << 26 | variant << 28
//   winograd:  pad | act << 8 | prec << 10 | variant << 12 | f4 << 16 (1: F(4×4, 3×3) tiles)
//              | relu_in << 17 (1: the input's ReLU taken as it is transformed)
//              | residual << 18 (1: the last source, dst's shape, added to the outputs)
//   wino_kernel: T | prec << 8 | variant << 12
//   attention: the scale's float bits | prec << 32 | variant << 40 (64-bit
//              pointers; elsewhere the best variant, f32)
enum { DA3_ACT_NONE = 0, DA3_ACT_RELU = 1, DA3_ACT_GELU = 2 };

// winograd_residual is da3_op_winograd's residual source (userdata bit 18:
// the source after the bias, if any), or NULL.
static inline const struct ggml_tensor * winograd_residual(const struct ggml_tensor * dst, intptr_t u) {
    if (!((u >> 18) & 1)) {
        return NULL;
    }
    return dst->src[2] != NULL && dst->src[3] != NULL ? dst->src[3] : dst->src[2];
}

// winograd_bias is da3_op_winograd's bias source, or NULL.
static inline const struct ggml_tensor * winograd_bias(const struct ggml_tensor * dst, intptr_t u) {
    return ((u >> 18) & 1) && dst->src[3] == NULL ? NULL : dst->src[2];
}

enum { DA3_PREC_F32 = 0, DA3_PREC_BF16 = 1, DA3_PREC_INT8 = 2, DA3_PREC_INT8C = 3, DA3_NPREC };
enum { DA3_VAR_AUTO = 0, DA3_VAR_OFF = 1, DA3_VAR_PORTABLE = 2, DA3_VAR_AVX2 = 3, DA3_VAR_AVX512 = 4, DA3_NVAR };

// CPU features the variants need (da3_cpu_features).
enum {
    DA3_CPU_AVX2 = 1 << 0,      // with FMA and F16C
    DA3_CPU_AVX512 = 1 << 1,    // F, BW, DQ, VL (with FMA and F16C)
    DA3_CPU_AVX512BF16 = 1 << 2,
    DA3_CPU_AVX512VNNI = 1 << 3,
    DA3_CPU_AVXVNNI = 1 << 4,   // 256-bit VEX vpdpbusd (the avx2 variant's int8c)
};
int da3_cpu_features(void);
// da3_i8c_avx2_form sets the form of the avx2 variant's int8c tiles (0: the
// fastest this CPU runs; 1 vpmaddubsw, 2 EVEX vpdpbusd, 3 VEX vpdpbusd) and
// returns the form in effect, or 0 when this CPU or build cannot run it
// (want < 0: only returns the form in effect). For tests and benchmarks;
// not while a graph computes.
int da3_i8c_avx2_form(int want);
// da3_variant_ok reports whether variant v is in this build and runs on this
// CPU; da3_best_variant is the fastest such variant.
int da3_variant_ok(int v);
int da3_best_variant(void);
// da3_precision_ok reports whether variant v computes precision p on this CPU.
int da3_precision_ok(int v, int p);
// da3_variant_calls counts the kernel calls run by variant v in precision p.
uint64_t da3_variant_calls(int v, int p);
// da3_winograd_calls counts the calls of the Winograd convolution.
uint64_t da3_winograd_calls(void);
// da3_window_calls counts the calls of the bilinear window (the strips).
uint64_t da3_window_calls(void);

// The variants' entry points (variant_*.c); the da3_op_* functions check
// the operands and call the one the userdata names.
#define DA3_DECLARE_VARIANT(sfx)                                                          \
    void da3_gemm_##sfx(struct ggml_tensor * dst, int ith, int nth, void * userdata);      \
    void da3_conv2d_##sfx(struct ggml_tensor * dst, int ith, int nth, void * userdata);    \
    void da3_winograd_##sfx(struct ggml_tensor * dst, int ith, int nth, void * userdata);  \
    void da3_wino_kernel_##sfx(struct ggml_tensor * dst, int ith, int nth, void * userdata); \
    int64_t da3_wino_kernel_size_##sfx(int64_t IC, int64_t OC, int T, int prec);        \
    int64_t da3_pack_weight_words_##sfx(int prec, int64_t K, int64_t N);                 \
    int da3_nr_##sfx(void);                                                                 \
    int64_t da3_pack_weight_##sfx(int prec, int type, const void * w, int64_t K, int64_t N, uint32_t * out); \
    void da3_attention_##sfx(struct ggml_tensor * dst, int ith, int nth, void * userdata); \
    double da3_peak_##sfx(int prec, int64_t rounds);
DA3_DECLARE_VARIANT(generic)
DA3_DECLARE_VARIANT(avx2)
DA3_DECLARE_VARIANT(avx512)

// da3_peak runs the peak-rate loop of variant v in precision p on the calling
// thread and returns the operations done, or 0 when v cannot compute p here.
double da3_peak(int v, int p, int64_t rounds);

void da3_op_gemm(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void da3_op_conv2d(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void da3_op_winograd(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void da3_op_wino_kernel(struct ggml_tensor * dst, int ith, int nth, void * userdata);
// da3_wino_kernel_size is the size in floats of da3_op_wino_kernel's output
// for variant v (0 when v cannot compute precision prec here).
int64_t da3_wino_kernel_size(int v, int64_t IC, int64_t OC, int T, int prec);
// da3_pack_weight_words is the size in 32-bit words of a weight [K, N]
// packed once for variant v in precision prec (0: it cannot be packed), and
// da3_pack_weight packs it (returns the words written, 0 on failure): the
// operand of da3_op_gemm with the packed flag (userdata bit 24).
int64_t da3_pack_weight_words(int v, int prec, int64_t K, int64_t N);
// da3_variant_nr is the width of variant v's B panels (0: not runnable here).
int da3_variant_nr(int v);
int64_t da3_pack_weight(int v, int prec, int type, const void * w, int64_t K, int64_t N, uint32_t * out);
void da3_op_attention(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void da3_op_bilinear(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void da3_op_bilinear_window(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void da3_op_layer_norm(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void da3_op_sum_parts(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void da3_op_pointwise(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void da3_op_stack_rows(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void da3_op_add_scaled(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void da3_op_exp(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void da3_op_depth_to_space(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void da3_op_im2col(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void da3_op_concat(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void da3_op_transpose(struct ggml_tensor * dst, int ith, int nth, void * userdata);
