// The entry points of the GEMM, convolution and attention kernels (ggml
// custom ops): they check the operands, then run the instruction-set variant
// and precision the userdata names (see custom.h for the packing). Each
// variant is compiled from the same algorithms (kernels_body.h) for its own
// instruction set (variant_*.c, per-file target pragmas), so one binary
// carries them all and picks at run time by CPUID, whatever CGO_CFLAGS it
// was built with (PORTABLE=1 builds keep the AVX-512 paths).
#include <stdint.h>
#include <stdlib.h>
#include "da3_ggml.h"
#include "custom.h"

// ---- CPU features and variants ----

int da3_cpu_features(void) {
    int f = 0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    // __builtin_cpu_supports also checks that the OS saves the registers (XCR0).
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
        f |= DA3_CPU_AVX2;
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
            f |= DA3_CPU_AVX512;
            if (__builtin_cpu_supports("avx512bf16")) {
                f |= DA3_CPU_AVX512BF16;
            }
            if (__builtin_cpu_supports("avx512vnni")) {
                f |= DA3_CPU_AVX512VNNI;
            }
        }
        if (__builtin_cpu_supports("avxvnni")) {
            f |= DA3_CPU_AVXVNNI;
        }
    }
#endif
    return f;
}


typedef void (*op_fn)(struct ggml_tensor * dst, int ith, int nth, void * userdata);

struct variant {
    op_fn gemm, conv2d, winograd, attention;
    double (*peak)(int prec, int64_t rounds);
    op_fn wino_kernel;
    int64_t (*wino_kernel_size)(int64_t IC, int64_t OC, int T, int prec);
    int64_t (*pack_weight_words)(int prec, int64_t K, int64_t N);
    int64_t (*pack_weight)(int prec, int type, const void * w, int64_t K, int64_t N, uint32_t * out);
    int (*nr)(void);
};

static const struct variant variants[DA3_NVAR] = {
    [DA3_VAR_PORTABLE] = { da3_gemm_generic, da3_conv2d_generic, da3_winograd_generic, da3_attention_generic, da3_peak_generic,
        da3_wino_kernel_generic, da3_wino_kernel_size_generic,
        da3_pack_weight_words_generic, da3_pack_weight_generic, da3_nr_generic },
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    [DA3_VAR_AVX2] = { da3_gemm_avx2, da3_conv2d_avx2, da3_winograd_avx2, da3_attention_avx2, da3_peak_avx2,
        da3_wino_kernel_avx2, da3_wino_kernel_size_avx2,
        da3_pack_weight_words_avx2, da3_pack_weight_avx2, da3_nr_avx2 },
    [DA3_VAR_AVX512] = { da3_gemm_avx512, da3_conv2d_avx512, da3_winograd_avx512, da3_attention_avx512, da3_peak_avx512,
        da3_wino_kernel_avx512, da3_wino_kernel_size_avx512,
        da3_pack_weight_words_avx512, da3_pack_weight_avx512, da3_nr_avx512 },
#endif
};

static int cpu_features(void) {
    static int f = -1;
    int v = __atomic_load_n(&f, __ATOMIC_RELAXED);
    if (v < 0) {
        v = da3_cpu_features();
        __atomic_store_n(&f, v, __ATOMIC_RELAXED);
    }
    return v;
}

int da3_i8c_form_avx2(int want);

int da3_i8c_avx2_form(int want) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    return (cpu_features() & DA3_CPU_AVX2) != 0 ? da3_i8c_form_avx2(want) : 0;
#else
    (void) want;
    return 0;
#endif
}

int da3_variant_ok(int v) {
    if (v < 0 || v >= DA3_NVAR || variants[v].gemm == NULL) {
        return 0;
    }
    switch (v) {
    case DA3_VAR_AVX2: return (cpu_features() & DA3_CPU_AVX2) != 0;
    case DA3_VAR_AVX512: return (cpu_features() & DA3_CPU_AVX512) != 0;
    }
    return 1;
}

int da3_best_variant(void) {
    for (int v = DA3_VAR_AVX512; v >= DA3_VAR_PORTABLE; v--) {
        if (da3_variant_ok(v)) {
            return v;
        }
    }
    return DA3_VAR_OFF;
}

int da3_precision_ok(int v, int p) {
    switch (p) {
    case DA3_PREC_F32: return da3_variant_ok(v);
    case DA3_PREC_BF16: return v == DA3_VAR_AVX512 && da3_variant_ok(v) && (cpu_features() & DA3_CPU_AVX512BF16) != 0;
    case DA3_PREC_INT8: return v == DA3_VAR_AVX512 && da3_variant_ok(v) && (cpu_features() & DA3_CPU_AVX512VNNI) != 0;
    case DA3_PREC_INT8C: // AVX-512 with VNNI (vpdpbusd), or AVX2 (vpmaddubsw)
        return da3_variant_ok(v) &&
            ((v == DA3_VAR_AVX512 && (cpu_features() & DA3_CPU_AVX512VNNI) != 0) || v == DA3_VAR_AVX2);
    }
    return 0;
}

// calls counts the kernel calls (one per thread and node) run by each
// variant and precision: what the tests check the dispatch with.
static uint64_t calls[DA3_NVAR][DA3_NPREC], wino_calls;

uint64_t da3_winograd_calls(void) { return __atomic_load_n(&wino_calls, __ATOMIC_RELAXED); }

uint64_t da3_variant_calls(int v, int p) {
    return v >= 0 && v < DA3_NVAR && p >= 0 && p < DA3_NPREC ? __atomic_load_n(&calls[v][p], __ATOMIC_RELAXED) : 0;
}

// pick returns the variant's kernels for a node, or NULL (a fault) when the
// variant or precision cannot run here.
static const struct variant * pick(int v, int p) {
    if (v == DA3_VAR_AUTO) {
        v = da3_best_variant();
    }
    if (!da3_precision_ok(v, p)) {
        da3_fault(DA3_FAULT_UNAVAILABLE);
        return NULL;
    }
    __atomic_fetch_add(&calls[v][p], 1, __ATOMIC_RELAXED);
    return &variants[v];
}

double da3_peak(int v, int p, int64_t rounds) {
    if (v <= DA3_VAR_OFF || v >= DA3_NVAR || variants[v].peak == NULL || !da3_precision_ok(v, p) || rounds < 1) {
        return 0;
    }
    return variants[v].peak(p, rounds);
}

// ---- entry checks ----
//
// The Go side builds nodes only for operands that fit (kernels.GEMMFits and
// friends); the kernels check again, in O(1), so that a node built in any
// other way records a fault (da3_fault) instead of reading out of bounds.

static int contiguous_f32(const struct ggml_tensor * t) {
    return t != NULL && t->type == GGML_TYPE_F32 && ggml_is_contiguous(t);
}

// bias_ok: no bias, or an F32 contiguous vector of n values.
static int bias_ok(const struct ggml_tensor * b, int64_t n) { return b == NULL || (contiguous_f32(b) && ggml_nelements(b) == n); }

// gemm_dequantizes lists the weight types whose rows gemm dequantizes while
// packing: the block must divide the packed depth (256).
static int gemm_dequantizes(enum ggml_type t) {
    switch (t) {
    case GGML_TYPE_F16: case GGML_TYPE_BF16: case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0:
    case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K:
        return 256 % ggml_blck_size(t) == 0;
    default:
        return 0;
    }
}

// gemm_operands_ok checks da3_op_gemm's operands (see there; for a packed
// weight the variant checks its size, which depends on its tiles).
static int gemm_operands_ok(const struct ggml_tensor * dst, int act, int packed) {
    const struct ggml_tensor * w = dst->src[0], * x = dst->src[1];
    if (packed) {
        return contiguous_f32(w) && w->ne[2] == 1 && w->ne[3] == 1 && contiguous_f32(x) && contiguous_f32(dst) &&
            act >= DA3_ACT_NONE && act <= DA3_ACT_GELU && bias_ok(dst->src[2], dst->ne[0]) && dst->ne[0] > 0 &&
            dst->ne[1] == x->ne[1] && dst->ne[2] == x->ne[2] && dst->ne[3] == x->ne[3];
    }
    if (w == NULL || !ggml_is_contiguous(w) || !contiguous_f32(x) || !contiguous_f32(dst) || act < DA3_ACT_NONE || act > DA3_ACT_GELU ||
        x->ne[0] != w->ne[0] || dst->ne[0] != w->ne[1] || !bias_ok(dst->src[2], w->ne[1])) {
        return 0;
    }
    if (w->ne[2] == 1 && w->ne[3] == 1) { // one matrix: x [K, …] gives dst [N, …]
        return (w->type == GGML_TYPE_F32 || gemm_dequantizes(w->type)) &&
            dst->ne[1] == x->ne[1] && dst->ne[2] == x->ne[2] && dst->ne[3] == x->ne[3];
    }
    return w->type == GGML_TYPE_F32 && w->ne[2] == x->ne[2] && w->ne[3] == x->ne[3] && // one product per batch
        dst->ne[1] == x->ne[1] && dst->ne[2] == x->ne[2] && dst->ne[3] == x->ne[3];
}

// conv_operands_ok checks da3_op_conv2d's operands and parameters (see there).
static int conv_operands_ok(const struct ggml_tensor * dst, intptr_t prm) {
    const struct ggml_tensor * w = dst->src[0], * x = dst->src[1];
    const int64_t s = prm & 0xff, pad = (prm >> 8) & 0xff, d = (prm >> 16) & 0xff, act = (prm >> 24) & 0x3;
    if (!contiguous_f32(w) || !contiguous_f32(x) || !contiguous_f32(dst) || s < 1 || d < 1 || act > DA3_ACT_GELU ||
        w->ne[2] != x->ne[2] || dst->ne[2] != w->ne[3] || dst->ne[3] != x->ne[3] || !bias_ok(dst->src[2], w->ne[3]) ||
        x->ne[0] * x->ne[1] >= ((int64_t) 1 << 31)) { // the gathers use 32-bit offsets within a plane
        return 0;
    }
    const int64_t ow = (x->ne[0] + 2 * pad - d * (w->ne[0] - 1) - 1) / s + 1;
    const int64_t oh = (x->ne[1] + 2 * pad - d * (w->ne[1] - 1) - 1) / s + 1;
    return ow > 0 && oh > 0 && dst->ne[0] == ow && dst->ne[1] == oh;
}

// winograd_operands_ok checks da3_op_winograd's operands (see there; the
// variant checks the transformed kernel's size, which depends on its tiles).
static int winograd_operands_ok(const struct ggml_tensor * dst, intptr_t prm) {
    const struct ggml_tensor * u = dst->src[0], * x = dst->src[1];
    const int64_t pad = prm & 0xff, act = (prm >> 8) & 0x3;
    const struct ggml_tensor * res = winograd_residual(dst, prm);
    if (((prm >> 18) & 1) && (res == NULL || !contiguous_f32(res) || !ggml_are_same_shape(res, dst) || res->data == dst->data)) {
        return 0;
    }
    return contiguous_f32(u) && contiguous_f32(x) && contiguous_f32(dst) && pad <= 2 && act <= DA3_ACT_GELU &&
        dst->ne[3] == x->ne[3] && bias_ok(winograd_bias(dst, prm), dst->ne[2]) && x->ne[0] + 2 * pad - 2 == dst->ne[0] &&
        x->ne[1] + 2 * pad - 2 == dst->ne[1] && dst->ne[0] > 0 && dst->ne[1] > 0 && dst->ne[2] > 0 && x->ne[2] > 0 &&
        x->ne[0] + 2 * pad < ((int64_t) 1 << 31); // 32-bit offsets in a row
}

// wino_kernel_operands_ok checks da3_op_wino_kernel's operands (see there).
static int wino_kernel_operands_ok(const struct ggml_tensor * dst, intptr_t prm) {
    const struct ggml_tensor * w = dst->src[0];
    const int T = (int) (prm & 0xff);
    return contiguous_f32(w) && contiguous_f32(dst) && w->ne[0] == 3 && w->ne[1] == 3 && w->ne[3] > 0 && w->ne[2] > 0 &&
        (T == 2 || T == 4);
}

// attention_operands_ok checks da3_op_attention's operands (see there).
static int attention_operands_ok(const struct ggml_tensor * dst) {
    const struct ggml_tensor * t[3] = { dst->src[0], dst->src[1], dst->src[2] };
    for (int i = 0; i < 3; i++) {
        if (t[i] == NULL || t[i]->type != GGML_TYPE_F32 || t[i]->nb[0] != sizeof(float) ||
            t[i]->nb[1] % sizeof(float) != 0 || t[i]->nb[2] % sizeof(float) != 0 || t[i]->nb[3] % sizeof(float) != 0 ||
            t[i]->ne[0] != t[0]->ne[0] || t[i]->ne[1] != t[0]->ne[1] || t[i]->ne[3] != t[0]->ne[3]) {
            return 0;
        }
    }
    return t[0]->ne[0] <= 256 && t[1]->ne[2] >= 1 && t[2]->ne[2] == t[1]->ne[2] && contiguous_f32(dst) &&
        dst->ne[0] == t[0]->ne[0] && dst->ne[1] == t[0]->ne[1] && dst->ne[2] == t[0]->ne[2] && dst->ne[3] == t[0]->ne[3];
}

// ---- ops ----

// da3_op_gemm: dst = mul_mat(src0, src1) for contiguous F32 src0 [K, N, B2,
// B3] and src1 [K, M, B2, B3] (one product per batch, no broadcasting); dst
// [N, M, B2, B3]. A 2-D src0 may also be f16 or block-quantized (blocks
// dividing 256): its rows are dequantized as they are packed, so the product
// runs at the F32 rate while the weights stay small. An optional src2 [N]
// is added to every row, then the activation applied. bf16 precision rounds
// both operands to bf16 (products exact, sums f32); int8 multiplies q8_0
// weights with activations quantized to q8_0 blocks (other weights: f32).
void da3_op_gemm(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const intptr_t u = (intptr_t) userdata;
    if (!gemm_operands_ok(dst, (int) (u & 0xff), (int) ((u >> 24) & 1))) {
        da3_fault(DA3_FAULT_OPERANDS);
        return;
    }
    const struct variant * v = pick((int) ((u >> 16) & 0xff), (int) ((u >> 8) & 0xff));
    if (v != NULL) {
        v->gemm(dst, ith, nth, userdata);
    }
}

// da3_op_conv2d: a 2-D convolution as an implicit-im2col GEMM. src0 is the
// F32 kernel [KW, KH, IC, OC] and src1 the F32 input [W, H, IC, N], both
// contiguous; dst [OW, OH, OC, N]; an optional src2 [OC] is the bias.
void da3_op_conv2d(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const intptr_t u = (intptr_t) userdata;
    if (!conv_operands_ok(dst, u)) {
        da3_fault(DA3_FAULT_OPERANDS);
        return;
    }
    const struct variant * v = pick((int) ((u >> 28) & 0xf), (int) ((u >> 26) & 0x3));
    if (v != NULL) {
        v->conv2d(dst, ith, nth, userdata);
    }
}

// da3_op_winograd: the convolution of da3_op_conv2d for a 3×3 kernel,
// stride 1, dilation 1 and padding ≤ 2, by Winograd's F(2×2, 3×3) (16
// products per 2×2 outputs instead of 36) or F(4×4, 3×3) (36 per 4×4
// instead of 144; see kernels_body.h).
void da3_op_winograd(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const intptr_t u = (intptr_t) userdata;
    if (!winograd_operands_ok(dst, u)) {
        da3_fault(DA3_FAULT_OPERANDS);
        return;
    }
    const struct variant * v = pick((int) ((u >> 12) & 0xf), (int) ((u >> 10) & 0x3));
    if (v != NULL) {
        __atomic_fetch_add(&wino_calls, 1, __ATOMIC_RELAXED);
        v->winograd(dst, ith, nth, userdata);
    }
}

// da3_op_wino_kernel: the Winograd transform of a 3×3 kernel [3, 3, IC, OC]
// into the operand of da3_op_winograd (kernels_body.h), computed once per
// graph node instead of once per thread and convolution.
void da3_op_wino_kernel(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const intptr_t u = (intptr_t) userdata;
    if (!wino_kernel_operands_ok(dst, u)) {
        da3_fault(DA3_FAULT_OPERANDS);
        return;
    }
    const struct variant * v = pick((int) ((u >> 12) & 0xf), (int) ((u >> 8) & 0x3));
    if (v != NULL) {
        v->wino_kernel(dst, ith, nth, userdata);
    }
}

// host_variant is variant v (the best one for DA3_VAR_AUTO) for a query from
// the Go side outside a graph, or NULL when v cannot compute precision prec
// on this CPU.
static const struct variant * host_variant(int v, int prec) {
    if (v == DA3_VAR_AUTO) {
        v = da3_best_variant();
    }
    return da3_precision_ok(v, prec) ? &variants[v] : NULL;
}

int da3_variant_nr(int v) {
    const struct variant * var = host_variant(v, DA3_PREC_F32);
    return var != NULL ? var->nr() : 0;
}

int64_t da3_pack_weight_words(int v, int prec, int64_t K, int64_t N) {
    const struct variant * var = host_variant(v, prec);
    return var != NULL && K >= 1 && N >= 1 ? var->pack_weight_words(prec, K, N) : 0;
}

int64_t da3_pack_weight(int v, int prec, int type, const void * w, int64_t K, int64_t N, uint32_t * out) {
    const struct variant * var = host_variant(v, prec);
    return var != NULL && K >= 1 && N >= 1 && w != NULL && out != NULL ? var->pack_weight(prec, type, w, K, N, out) : 0;
}

int64_t da3_wino_kernel_size(int v, int64_t IC, int64_t OC, int T, int prec) {
    const struct variant * var = host_variant(v, prec);
    return var != NULL && IC >= 1 && OC >= 1 && (T == 2 || T == 4) ? var->wino_kernel_size(IC, OC, T, prec) : 0;
}

// da3_op_attention: dst = softmax(q·kᵀ·scale)·v per head, for F32 q [hd, H,
// n, B], k and v [hd, H, nk, B] with contiguous rows of hd (any strides
// above) and hd ≤ 256; dst [hd, H, n, B] contiguous.
void da3_op_attention(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    if (!attention_operands_ok(dst)) {
        da3_fault(DA3_FAULT_OPERANDS);
        return;
    }
    int var = DA3_VAR_AUTO, prec = DA3_PREC_F32;
    if (sizeof(void *) == 8) {
        const uint64_t u = (uint64_t) (uintptr_t) userdata;
        prec = (int) ((u >> 32) & 0xff);
        var = (int) ((u >> 40) & 0xff);
    }
    const struct variant * v = pick(var, prec);
    if (v != NULL) {
        v->attention(dst, ith, nth, userdata);
    }
}
