// The portable parts of the CPU kernels: fault accounting, per-thread
// scratch buffers and the bilinear resize. Each kernel splits its rows over
// the nth threads by ith and checks its operands on entry: the Go side
// checks them before it builds a node, and the kernels check again, cheaply,
// so that a node built any other way records a fault instead of reading out
// of bounds.
#include <math.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "da3_ggml.h"
#include "custom.h"

static uint64_t fault_count;
static int fault_last;

void da3_fault(int reason) {
    __atomic_store_n(&fault_last, reason, __ATOMIC_RELAXED);
    __atomic_fetch_add(&fault_count, 1, __ATOMIC_RELEASE);
}

uint64_t da3_faults(void) { return __atomic_load_n(&fault_count, __ATOMIC_ACQUIRE); }

int da3_last_fault(void) { return __atomic_load_n(&fault_last, __ATOMIC_RELAXED); }

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;

static void scratch_free(void * p) {
    struct da3_buf * b = p;
    for (int i = 0; i < DA3_NBUF; i++) {
        da3_aligned_free(b[i].p);
    }
    free(b);
}

static void scratch_init(void) { scratch_key_ok = pthread_key_create(&scratch_key, scratch_free) == 0; }

float * da3_scratch(int i, size_t n) {
    pthread_once(&scratch_once, scratch_init);
    if (!scratch_key_ok || i < 0 || i >= DA3_NBUF) {
        return NULL;
    }
    struct da3_buf * b = pthread_getspecific(scratch_key);
    if (b == NULL) {
        b = calloc(DA3_NBUF, sizeof(*b));
        if (b == NULL || pthread_setspecific(scratch_key, b) != 0) {
            free(b);
            return NULL;
        }
    }
    if (b[i].n < n) {
        da3_aligned_free(b[i].p);
        b[i].p = da3_aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
        b[i].n = b[i].p == NULL ? 0 : n;
    }
    return b[i].p;
}

// hrow interpolates the source row s (W values) along x into hr[i0, i1):
// hr[i] = wx[i]·s[x0[i]] + dx[i]·s[x1[i]]. Where the CPU has AVX-512, each
// 16 outputs whose sources lie within 16 values (upsampling) take them from
// one load by two permutes instead of two gathers, which bound the resize.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) static int64_t hrow_avx512(float * hr, const float * s, int64_t W, const int32_t * x0,
                                                              const int32_t * x1, const float * wx, const float * dx,
                                                              int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + 16 <= i1 && x1[i + 15] - x0[i] < 16; i += 16) {
        const int32_t base = x0[i];
        const int64_t n = W - base < 16 ? W - base : 16;
        const __m512 v = _mm512_maskz_loadu_ps((__mmask16) ((1u << n) - 1), s + base);
        const __m512i b = _mm512_set1_epi32(base);
        const __m512 a0 = _mm512_permutexvar_ps(_mm512_sub_epi32(_mm512_loadu_si512(x0 + i), b), v);
        const __m512 a1 = _mm512_permutexvar_ps(_mm512_sub_epi32(_mm512_loadu_si512(x1 + i), b), v);
        _mm512_storeu_ps(hr + i, _mm512_fmadd_ps(_mm512_loadu_ps(wx + i), a0, _mm512_mul_ps(_mm512_loadu_ps(dx + i), a1)));
    }
    return i;
}
#endif

static void hrow(float * hr, const float * s, int64_t W, const int32_t * x0, const int32_t * x1, const float * wx,
                 const float * dx, int64_t i0, int64_t i1) {
    int64_t i = i0;
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx512f")) {
        i = hrow_avx512(hr, s, W, x0, x1, wx, dx, i0, i1);
    }
#endif
    for (; i < i1; i++) {
        hr[i] = wx[i] * s[x0[i]] + dx[i] * s[x1[i]];
    }
}

// bilinear resizes the contiguous F32 src [W, H, C, N] to the full size FW×FH
// (ggml_interpolate's bilinear mode, align_corners when align) and writes the
// window of it whose pixel (0, 0) is the full image's (ox, oy) into dst [OW,
// OH, C, N]: window pixels outside the full image are 0. When ux and uy are
// not NULL (contiguous [FW, C] and [FH, C]), ux[x, c] + uy[y, c] is added to
// the pixels (x, y) inside (a separable embedding such as DA3's UV). The
// source coordinates and weights are ggml's, with the per-column ones
// computed once per call instead of per element; the sums are torch's
// (upsample_bilinear2d: each source row interpolated along x, then the two
// rows along y; ggml sums the four terms: the same to rounding), so each
// source row is interpolated once for all the output rows that read it;
// rows (not channels) are split over the threads.
static void bilinear(struct ggml_tensor * dst, const struct ggml_tensor * src, const struct ggml_tensor * ux,
                     const struct ggml_tensor * uy, int ith, int nth, int align, int64_t FW, int64_t FH, int64_t ox, int64_t oy) {
    const int64_t W = src->ne[0], H = src->ne[1];
    const int64_t OW = dst->ne[0], OH = dst->ne[1];
    const int64_t rows = OH * dst->ne[2] * dst->ne[3];
    const int64_t r0 = rows * ith / nth, r1 = rows * (ith + 1) / nth;
    if (r0 >= r1) {
        return;
    }
    float sf0 = (float) FW / W, sf1 = (float) FH / H, po = 0.5f;
    if (align) {
        po = 0.0f;
        sf0 = FW > 1 && W > 1 ? (float) (FW - 1) / (W - 1) : sf0;
        sf1 = FH > 1 && H > 1 ? (float) (FH - 1) / (H - 1) : sf1;
    }
    // per column: the two source columns and their weights; two source rows interpolated along x
    int32_t * x0 = malloc(sizeof(int32_t) * 2 * OW);
    float * wx = malloc(sizeof(float) * 4 * OW);
    if (x0 == NULL || wx == NULL) {
        free(x0);
        free(wx);
        da3_fault(DA3_FAULT_NOMEM);
        return;
    }
    int32_t * x1 = x0 + OW;
    float * dx = wx + OW, * hrows[2] = { wx + 2 * OW, wx + 3 * OW };
    int64_t hkey[2] = { -1, -1 }; // the source row (plane·H + y) each of hrows holds
    // Window columns [i0, i1) are inside the full image.
    const int64_t i0 = ox < 0 ? -ox : 0, i1 = FW - ox < OW ? FW - ox : OW;
    for (int64_t i = 0; i < OW; i++) {
        const float x = ((float) (i + ox) + po) / sf0 - po;
        int64_t a = (int64_t) floorf(x), b = a + 1;
        a = a < 0 ? 0 : a > W - 1 ? W - 1 : a;
        b = b < 0 ? 0 : b > W - 1 ? W - 1 : b;
        float d = x - (float) a;
        dx[i] = d < 0.0f ? 0.0f : d > 1.0f ? 1.0f : d;
        wx[i] = 1.0f - dx[i];
        x0[i] = (int32_t) a;
        x1[i] = (int32_t) b;
    }
    for (int64_t r = r0; r < r1; r++) {
        const int64_t wy = r % OH, plane = r / OH, fy = wy + oy;
        float * out = (float *) dst->data + r * OW;
        if (fy < 0 || fy >= FH || i0 >= i1) {
            for (int64_t i = 0; i < OW; i++) {
                out[i] = 0.0f;
            }
            continue;
        }
        const float y = ((float) fy + po) / sf1 - po;
        int64_t y0 = (int64_t) floorf(y), y1 = y0 + 1;
        y0 = y0 < 0 ? 0 : y0 > H - 1 ? H - 1 : y0;
        y1 = y1 < 0 ? 0 : y1 > H - 1 ? H - 1 : y1;
        float dy = y - (float) y0;
        dy = dy < 0.0f ? 0.0f : dy > 1.0f ? 1.0f : dy;
        // as torch's upsample_bilinear2d: h0·(w0·x00 + w1·x01) + h1·(w0·x10 + w1·x11), each source
        // row interpolated along x once for the output rows that read it (two to four when upsampling)
        const float * h[2];
        const int64_t ys[2] = { plane * H + y0, plane * H + y1 };
        for (int k = 0; k < 2; k++) {
            int slot = hkey[0] == ys[k] ? 0 : hkey[1] == ys[k] ? 1 : -1;
            if (slot < 0) {
                slot = hkey[0] == ys[1 - k] ? 1 : 0; // keep the row the other side needs
                const float * s = (const float *) src->data + ys[k] * W;
                hrow(hrows[slot], s, W, x0, x1, wx, dx, i0, i1);
                hkey[slot] = ys[k];
            }
            h[k] = hrows[slot];
        }
        const float h0 = 1.0f - dy, h1 = dy;
        const float * ha = h[0], * hb = h[1];
        for (int64_t i = 0; i < i0; i++) {
            out[i] = 0.0f;
        }
        if (ux != NULL) {
            const int64_t ch = plane % dst->ne[2];
            const float * u = (const float *) ux->data + ch * FW + ox;
            const float v = ((const float *) uy->data)[ch * FH + fy];
            for (int64_t i = i0; i < i1; i++) {
                out[i] = (h0 * ha[i] + h1 * hb[i]) + (u[i] + v);
            }
        } else {
            for (int64_t i = i0; i < i1; i++) {
                out[i] = h0 * ha[i] + h1 * hb[i];
            }
        }
        for (int64_t i = i1; i < OW; i++) {
            out[i] = 0.0f;
        }
    }
    free(x0);
    free(wx);
}

// bilinear_src_ok checks the resize source against dst (same channels and images).
static int bilinear_src_ok(const struct ggml_tensor * src, const struct ggml_tensor * dst) {
    return src != NULL && src->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32 && ggml_is_contiguous(src) &&
           ggml_is_contiguous(dst) && src->ne[2] == dst->ne[2] && src->ne[3] == dst->ne[3] && src->ne[0] >= 1 &&
           src->ne[1] >= 1;
}

// da3_op_bilinear: ggml_interpolate's bilinear mode (userdata: 1 for
// align_corners) for a contiguous F32 src0 [W, H, C, N] resized to dst [OW,
// OH, C, N].
void da3_op_bilinear(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct ggml_tensor * src = dst->src[0];
    if (!bilinear_src_ok(src, dst)) {
        da3_fault(DA3_FAULT_OPERANDS);
        return;
    }
    bilinear(dst, src, NULL, NULL, ith, nth, (int) (intptr_t) userdata, dst->ne[0], dst->ne[1], 0, 0);
}

static uint64_t window_calls;

uint64_t da3_window_calls(void) { return __atomic_load_n(&window_calls, __ATOMIC_RELAXED); }

// table_ok checks a contiguous F32 [n, c] table.
static int table_ok(const struct ggml_tensor * t, int64_t n, int64_t c) {
    return t->type == GGML_TYPE_F32 && ggml_is_contiguous(t) && t->ne[0] == n && t->ne[1] == c && t->ne[2] == 1 &&
           t->ne[3] == 1;
}

// da3_op_bilinear_window: rows [y0, y0 + OH − 2·pad) of src0 resized to
// FW×FH, with pad zero pixels on every side (the window starts at (−pad,
// y0 − pad); rows outside the image are zero too), plus src1[x, c] +
// src2[y, c] inside (optional, both or neither: [FW, C] and [FH, C]).
// userdata (64-bit): align | pad << 1 | y0 << 4 | FW << 24 | FH << 44.
void da3_op_bilinear_window(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct ggml_tensor * src = dst->src[0];
    const struct ggml_tensor * ux = dst->src[1], * uy = dst->src[2];
    const uint64_t u = (uint64_t) (uintptr_t) userdata;
    const int align = (int) (u & 1), pad = (int) ((u >> 1) & 7);
    const int64_t y0 = (int64_t) ((u >> 4) & 0xFFFFF), FW = (int64_t) ((u >> 24) & 0xFFFFF),
                  FH = (int64_t) ((u >> 44) & 0xFFFFF);
    if (sizeof(void *) < 8 || !bilinear_src_ok(src, dst) || FW < 1 || FH < 1 || dst->ne[0] != FW + 2 * pad ||
        y0 >= FH || dst->ne[1] <= 2 * pad || y0 + dst->ne[1] - 2 * pad > FH ||
        (ux == NULL) != (uy == NULL) || (ux != NULL && !(table_ok(ux, FW, dst->ne[2]) && table_ok(uy, FH, dst->ne[2])))) {
        da3_fault(DA3_FAULT_OPERANDS);
        return;
    }
    __atomic_fetch_add(&window_calls, 1, __ATOMIC_RELAXED);
    bilinear(dst, src, ux, uy, ith, nth, align, FW, FH, -pad, y0 - pad);
}

// ---- layer norm ----

// The layer norm's partial sums: NORM_LANES floats in one vector (GCC and
// clang vector extensions: the build's widest registers, or several). A row
// of DA3's QK norm holds 64 values, so the work done once per row (reducing
// the partial sums) weighs as much as the sums: kept in registers, not
// spilled to an array as a loop over the lanes of one makes the compiler do.
#define NORM_LANES 16
typedef float norm_vec __attribute__((vector_size(NORM_LANES * sizeof(float))));
typedef float norm_half __attribute__((vector_size(NORM_LANES / 2 * sizeof(float))));
typedef float norm_quarter __attribute__((vector_size(NORM_LANES / 4 * sizeof(float))));
typedef int32_t norm_mask __attribute__((vector_size(NORM_LANES * sizeof(int32_t))));

// norm_load is NORM_LANES floats from x (unaligned): a statement
// expression, as a function returning a vector wider than the build's
// registers would change the calling convention (GCC warns of it).
#define norm_load(x)                     \
    ({                                   \
        norm_vec norm_v_;                \
        memcpy(&norm_v_, (x), sizeof norm_v_); \
        norm_v_;                         \
    })

// norm_reduce returns the sum of *s's lanes, added pairwise.
static inline float norm_reduce(const norm_vec * s) {
    norm_half h[2];
    memcpy(h, s, sizeof h);
    const norm_half a = h[0] + h[1];
    norm_quarter q[2];
    memcpy(q, &a, sizeof q);
    const norm_quarter b = q[0] + q[1];
    return (b[0] + b[2]) + (b[1] + b[3]);
}

// row_sum returns Σ x[i] over n values, in NORM_LANES partial sums.
static float row_sum(const float * x, int64_t n) {
    norm_vec s = { 0 };
    int64_t i = 0;
    for (; i + NORM_LANES <= n; i += NORM_LANES) {
        s += norm_load(x + i);
    }
    float t = norm_reduce(&s);
    for (; i < n; i++) {
        t += x[i];
    }
    return t;
}

// row_sum_sq returns Σ (x[i] − mean)² over n values, as row_sum.
static float row_sum_sq(const float * x, int64_t n, float mean) {
    norm_vec s = { 0 };
    int64_t i = 0;
    for (; i + NORM_LANES <= n; i += NORM_LANES) {
        const norm_vec d = norm_load(x + i) - mean;
        s += d * d;
    }
    float t = norm_reduce(&s);
    for (; i < n; i++) {
        const float d = x[i] - mean;
        t += d * d;
    }
    return t;
}

// norm_at is the NORM_LANES values (x − mean)·scale·w + b from index i.
#define norm_at(x, w, b, mean, scale, i) \
    ((norm_load((x) + (i)) - (mean)) * (scale) * norm_load((w) + (i)) + norm_load((b) + (i)))

// rope_store rotates the NeoX pairs (a, b) by the angles whose cosines and
// sines are c and s, and stores them at ya and yb.
static inline void rope_store(const norm_vec * a, const norm_vec * b, const float * c, const float * s, float * ya,
                              float * yb) {
    const norm_vec ci = norm_load(c), si = norm_load(s);
    const norm_vec ra = *a * ci - *b * si, rb = *b * ci + *a * si;
    memcpy(ya, &ra, sizeof ra);
    memcpy(yb, &rb, sizeof rb);
}

// rope_row rotates the C values of y by 2-D RoPE with the table row cs of
// C values: the first half of y by the angles whose cos and sin are cs[0 …
// C/4) and cs[C/4 …C/2), as NeoX pairs (i, i + C/4); the second half by
// cs[C/2 … 3C/4) and cs[3C/4 … C), pairs (C/2 + i, 3C/4 + i).
static void rope_row(float * y, const float * cs, int64_t C) {
    const int64_t q = C / 4;
    for (int h = 0; h < 2; h++) {
        float * a = y + 2 * h * q, * b = a + q;
        const float * c = cs + 2 * h * q, * s = c + q;
        int64_t i = 0;
        for (; i + NORM_LANES <= q; i += NORM_LANES) {
            const norm_vec ai = norm_load(a + i), bi = norm_load(b + i);
            rope_store(&ai, &bi, c + i, s + i, a + i, b + i);
        }
        for (; i < q; i++) {
            const float ai = a[i], bi = b[i];
            a[i] = ai * c[i] - bi * s[i];
            b[i] = bi * c[i] + ai * s[i];
        }
    }
}

// norm_rope_row is norm_row followed by rope_row, rotating the normalized
// values in registers before they are stored (C/4 a multiple of NORM_LANES).
static void norm_rope_row(const float * x, const float * w, const float * b, float mean, float scale, const float * cs,
                          int64_t C, float * y) {
    const int64_t q = C / 4;
    for (int h = 0; h < 2; h++) {
        const int64_t o = 2 * h * q;
        const float * c = cs + o, * s = c + q;
        for (int64_t i = 0; i < q; i += NORM_LANES) {
            const int64_t ia = o + i, ib = o + q + i;
            const norm_vec ai = norm_at(x, w, b, mean, scale, ia), bi = norm_at(x, w, b, mean, scale, ib);
            rope_store(&ai, &bi, c + i, s + i, y + ia, y + ib);
        }
    }
}

// norm_row writes y = (x − mean)·scale·w + b over C values.
static void norm_row(const float * x, const float * w, const float * b, float mean, float scale, int64_t C, float * y) {
    int64_t i = 0;
    for (; i + NORM_LANES <= C; i += NORM_LANES) {
        const norm_vec r = norm_at(x, w, b, mean, scale, i);
        memcpy(y + i, &r, sizeof r);
    }
    for (; i < C; i++) {
        y[i] = (x[i] - mean) * scale * w[i] + b[i];
    }
}

// da3_op_layer_norm: dst = (x − mean)/√(var + eps)·w + b over ne0 (biased
// variance), as ggml_norm followed by ggml_mul and ggml_add, in one pass
// over each row that stays in L1 between its three sweeps. src0 x [C, n1,
// n2, n3] F32 with contiguous rows (any strides above: views such as q and
// k of a fused QKV projection); src1 w and src2 b F32 [C] contiguous; dst
// F32 [C, n1, n2, n3] contiguous. userdata holds eps's float bits. An
// optional src3, an F32 table [C, n2] contiguous (C a multiple of 4), then
// rotates each row by 2-D RoPE (rope_row) with the table's row for its
// index along n2 (the token): DA3's QK norm and RoPE in one pass.
void da3_op_layer_norm(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct ggml_tensor * x = dst->src[0], * w = dst->src[1], * b = dst->src[2], * cs = dst->src[3];
    if (x == NULL || w == NULL || b == NULL || x->type != GGML_TYPE_F32 || w->type != GGML_TYPE_F32 ||
        b->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32 || x->nb[0] != sizeof(float) ||
        !ggml_is_contiguous(dst) || !ggml_is_contiguous(w) || !ggml_is_contiguous(b) ||
        ggml_nelements(w) != x->ne[0] || ggml_nelements(b) != x->ne[0] || !ggml_are_same_shape(x, dst) ||
        (cs != NULL && (cs->type != GGML_TYPE_F32 || !ggml_is_contiguous(cs) || x->ne[0] % 4 != 0 ||
                        cs->ne[0] != x->ne[0] || cs->ne[1] != x->ne[2] || ggml_nelements(cs) != x->ne[0] * x->ne[2]))) {
        if (ith == 0) {
            da3_fault(DA3_FAULT_OPERANDS);
        }
        return;
    }
    union { int32_t i; float f; } ue = { .i = (int32_t) (intptr_t) userdata };
    const float eps = ue.f;
    const int64_t C = x->ne[0], n1 = x->ne[1], n2 = x->ne[2];
    const int64_t rows = n1 * n2 * x->ne[3];
    const int64_t r0 = rows * ith / nth, r1 = rows * (ith + 1) / nth;
    const float * wd = w->data, * bd = b->data;
    const float fc = (float) C;
    int64_t i1 = r0 % n1, i2 = (r0 / n1) % n2, i3 = r0 / (n1 * n2); // row r0's indices, then counted up
    for (int64_t r = r0; r < r1; r++) {
        const float * xs = (const float *) ((const char *) x->data + i1 * x->nb[1] + i2 * x->nb[2] + i3 * x->nb[3]);
        float * y = (float *) dst->data + r * C;
        const float mean = row_sum(xs, C) / fc;
        const float scale = 1.0f / sqrtf(row_sum_sq(xs, C, mean) / fc + eps);
        if (cs != NULL && C / 4 % NORM_LANES == 0) {
            norm_rope_row(xs, wd, bd, mean, scale, (const float *) cs->data + i2 * C, C, y);
        } else {
            norm_row(xs, wd, bd, mean, scale, C, y);
            if (cs != NULL) {
                rope_row(y, (const float *) cs->data + i2 * C, C);
            }
        }
        if (++i1 == n1) {
            i1 = 0;
            if (++i2 == n2) {
                i2 = 0;
                i3++;
            }
        }
    }
}

// ---- 1×1 convolutions with few outputs ----

#define PW_MAX_OC 4 // the outputs a pointwise node computes (a head's last convolution: depth, confidence, sky)
#define PW_VECS 4   // vectors of pixels per block

// pointwise_block computes the oc outputs of PW_VECS·NORM_LANES pixels:
// y[o][p] = act(b[o] + Σ_c w[o][c]·x[c][p]), the sums in channel order,
// x's and y's channel planes plane floats apart.
static inline __attribute__((always_inline)) void pointwise_block(int oc, const float * x, int64_t IC, int64_t plane,
                                                               const float * w, const float * b, int act, float * y) {
    norm_vec acc[PW_MAX_OC][PW_VECS];
    for (int o = 0; o < oc; o++) {
        for (int v = 0; v < PW_VECS; v++) {
            acc[o][v] = (norm_vec){ 0 };
        }
    }
    for (int64_t c = 0; c < IC; c++) {
        norm_vec xv[PW_VECS];
        for (int v = 0; v < PW_VECS; v++) {
            xv[v] = norm_load(x + c * plane + v * NORM_LANES);
        }
        for (int o = 0; o < oc; o++) {
            const float wc = w[o * IC + c];
            for (int v = 0; v < PW_VECS; v++) {
                acc[o][v] += xv[v] * wc;
            }
        }
    }
    for (int o = 0; o < oc; o++) {
        const float bo = b != NULL ? b[o] : 0.0f;
        for (int v = 0; v < PW_VECS; v++) {
            norm_vec r = acc[o][v] + bo;
            if (act == DA3_ACT_RELU) { // the lanes > 0 kept, the others' bits cleared
                const norm_mask pos = r > (norm_vec){ 0 };
                r = (norm_vec) ((norm_mask) r & pos);
            }
            memcpy(y + o * plane + v * NORM_LANES, &r, sizeof r);
        }
    }
}

// pointwise_act applies act to one value (the per-pixel tail's).
static float pointwise_act(float v, int act) {
    if (act == DA3_ACT_RELU) {
        return v > 0 ? v : 0;
    }
    if (act == DA3_ACT_GELU) {
        return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
    return v;
}

// da3_op_pointwise: a 1×1 convolution with at most PW_MAX_OC outputs (a
// head's last: each output pixel a dot product of its channels), as a
// stream over the input's channel planes: src0 the F32 kernel [1, 1, IC,
// OC], src1 the F32 input [W, H, IC, N], both contiguous, an optional src2
// the bias [OC]; dst [W, H, OC, N]; userdata the activation (DA3_ACT_*).
// The GEMM would pack the whole map into panels to fill a tile of which it
// uses one row per output.
void da3_op_pointwise(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct ggml_tensor * w = dst->src[0], * x = dst->src[1], * bias = dst->src[2];
    const int act = (int) (intptr_t) userdata;
    if (w == NULL || x == NULL || w->type != GGML_TYPE_F32 || x->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32 ||
        !ggml_is_contiguous(w) || !ggml_is_contiguous(x) || !ggml_is_contiguous(dst) || w->ne[0] != 1 || w->ne[1] != 1 ||
        w->ne[2] != x->ne[2] || w->ne[3] < 1 || w->ne[3] > PW_MAX_OC || dst->ne[0] != x->ne[0] || dst->ne[1] != x->ne[1] ||
        dst->ne[2] != w->ne[3] || dst->ne[3] != x->ne[3] || act < DA3_ACT_NONE || act > DA3_ACT_GELU ||
        (bias != NULL && (bias->type != GGML_TYPE_F32 || !ggml_is_contiguous(bias) || ggml_nelements(bias) != w->ne[3]))) {
        if (ith == 0) {
            da3_fault(DA3_FAULT_OPERANDS);
        }
        return;
    }
    const int64_t P = x->ne[0] * x->ne[1], IC = x->ne[2], N = x->ne[3];
    const int oc = (int) w->ne[3];
    const int64_t bw = PW_VECS * NORM_LANES, blocks = (P + bw - 1) / bw; // pixel blocks per image, the last partial
    const int64_t items = N * blocks, i0 = items * ith / nth, i1 = items * (ith + 1) / nth;
    const float * wd = w->data, * bd = bias != NULL ? (const float *) bias->data : NULL;
    // GELU is left to the tail's scalar path: the blocks apply none or ReLU
    const int block_act = act == DA3_ACT_GELU ? DA3_ACT_NONE : act;
    for (int64_t it = i0; it < i1; it++) {
        const int64_t n = it / blocks, p0 = it % blocks * bw;
        const float * xs = (const float *) x->data + n * IC * P + p0;
        float * y = (float *) dst->data + n * oc * P + p0;
        if (p0 + bw <= P && act != DA3_ACT_GELU) {
            switch (oc) { // the output count a constant: the accumulators stay in registers
            case 1: pointwise_block(1, xs, IC, P, wd, bd, block_act, y); break;
            case 2: pointwise_block(2, xs, IC, P, wd, bd, block_act, y); break;
            case 3: pointwise_block(3, xs, IC, P, wd, bd, block_act, y); break;
            default: pointwise_block(4, xs, IC, P, wd, bd, block_act, y); break;
            }
            continue;
        }
        for (int64_t p = 0; p < bw && p0 + p < P; p++) { // the last block's pixels (and GELU) one at a time
            for (int o = 0; o < oc; o++) {
                float sum = 0.0f;
                for (int64_t c = 0; c < IC; c++) {
                    sum = fmaf(xs[c * P + p], wd[o * IC + c], sum);
                }
                y[o * P + p] = pointwise_act(sum + (bd != NULL ? bd[o] : 0.0f), act);
            }
        }
    }
}

// da3_op_sum_parts: dst [P] holds the sums (in double, rounded once) of P
// equal runs of the values of a contiguous F32 src0, the threads taking
// runs in turn: a parallel probe that is NaN or Inf where a value is
// (ggml_sum runs on one thread).
void da3_op_sum_parts(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) userdata;
    const struct ggml_tensor * x = dst->src[0];
    if (x == NULL || x->type != GGML_TYPE_F32 || !ggml_is_contiguous(x) || dst->type != GGML_TYPE_F32 ||
        !ggml_is_contiguous(dst) || ggml_nelements(dst) < 1) {
        da3_fault(DA3_FAULT_OPERANDS);
        return;
    }
    const int64_t n = ggml_nelements(x), P = ggml_nelements(dst);
    const float * v = x->data;
    float * out = dst->data;
    for (int64_t p = ith; p < P; p += nth) {
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        int64_t i = n * p / P;
        const int64_t e = n * (p + 1) / P;
        for (; i + 4 <= e; i += 4) {
            s0 += v[i];
            s1 += v[i + 1];
            s2 += v[i + 2];
            s3 += v[i + 3];
        }
        for (; i < e; i++) {
            s0 += v[i];
        }
        out[p] = (float) ((s0 + s1) + (s2 + s3));
    }
}

// da3_op_stack_rows: dst [W, Σh_i, C, S] is the contiguous F32 sources
// src_i [W, h_i, C, S] (up to GGML_MAX_SRC) stacked along the rows, as a
// chain of ggml_concat on dim 1 gives, each value copied once. The threads
// take (plane, source) items in turn.
void da3_op_stack_rows(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) userdata;
    int ns = 0;
    int64_t rows = 0;
    while (ns < GGML_MAX_SRC && dst->src[ns] != NULL) {
        const struct ggml_tensor * s = dst->src[ns];
        if (s->type != GGML_TYPE_F32 || !ggml_is_contiguous(s) || s->ne[0] != dst->ne[0] || s->ne[2] != dst->ne[2] ||
            s->ne[3] != dst->ne[3]) {
            da3_fault(DA3_FAULT_OPERANDS);
            return;
        }
        rows += s->ne[1];
        ns++;
    }
    if (ns == 0 || dst->type != GGML_TYPE_F32 || !ggml_is_contiguous(dst) || rows != dst->ne[1]) {
        da3_fault(DA3_FAULT_OPERANDS);
        return;
    }
    const int64_t W = dst->ne[0], H = dst->ne[1], planes = dst->ne[2] * dst->ne[3];
    int64_t y0[GGML_MAX_SRC];
    for (int i = 0, y = 0; i < ns; y += (int) dst->src[i]->ne[1], i++) {
        y0[i] = y;
    }
    for (int64_t it = ith; it < planes * ns; it += nth) {
        const int64_t pl = it / ns;
        const int i = (int) (it % ns);
        const struct ggml_tensor * s = dst->src[i];
        memcpy((float *) dst->data + (pl * H + y0[i]) * W, (const float *) s->data + pl * s->ne[1] * W,
               sizeof(float) * (size_t) (s->ne[1] * W));
    }
}

// da3_op_concat: dst = src0 and src1 joined along dim (userdata, 0 to 3),
// as ggml_concat, for F32 sources with contiguous rows (any strides above:
// views such as the patch tokens after the class token) and a contiguous
// dst: each row of dst is one row of a source, or along dim 0 a row of
// each, copied whole (ggml's concat copies value by value, computing each
// one's source). The threads take runs of rows.
static const float * concat_row(const struct ggml_tensor * t, int64_t i1, int64_t i2, int64_t i3) {
    return (const float *) ((const char *) t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
}

void da3_op_concat(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct ggml_tensor * a = dst->src[0], * b = dst->src[1];
    const int dim = (int) (intptr_t) userdata;
    int ok = a != NULL && b != NULL && dim >= 0 && dim < 4 && a->type == GGML_TYPE_F32 && b->type == GGML_TYPE_F32 &&
             dst->type == GGML_TYPE_F32 && a->nb[0] == sizeof(float) && b->nb[0] == sizeof(float) && ggml_is_contiguous(dst);
    for (int d = 0; ok && d < 4; d++) {
        ok = d == dim ? dst->ne[d] == a->ne[d] + b->ne[d] : a->ne[d] == dst->ne[d] && b->ne[d] == dst->ne[d];
    }
    if (!ok) {
        if (ith == 0) {
            da3_fault(DA3_FAULT_OPERANDS);
        }
        return;
    }
    const int64_t n0 = dst->ne[0], n1 = dst->ne[1], n2 = dst->ne[2];
    const int64_t rows = n1 * n2 * dst->ne[3];
    const int64_t r0 = rows * ith / nth, r1 = rows * (ith + 1) / nth;
    const int64_t split = a->ne[dim];
    for (int64_t r = r0; r < r1; r++) {
        int64_t i[4] = { 0, r % n1, (r / n1) % n2, r / (n1 * n2) };
        float * y = (float *) dst->data + r * n0;
        if (dim == 0) {
            memcpy(y, concat_row(a, i[1], i[2], i[3]), sizeof(float) * (size_t) a->ne[0]);
            memcpy(y + a->ne[0], concat_row(b, i[1], i[2], i[3]), sizeof(float) * (size_t) b->ne[0]);
            continue;
        }
        const struct ggml_tensor * s = a;
        if (i[dim] >= split) {
            s = b;
            i[dim] -= split;
        }
        memcpy(y, concat_row(s, i[1], i[2], i[3]), sizeof(float) * (size_t) n0);
    }
}

// da3_op_transpose: dst [n1, n0, n2, n3] (contiguous) is the F32 src0 [n0,
// n1, n2, n3] (contiguous rows, any strides above) with its first two dims
// swapped, as ggml_cont of ggml_transpose gives; in 32×32 blocks whose 32
// source rows and 32 destination rows stay in L1 (ggml's copy of a
// transposed view strides through one or the other value by value). The
// threads take (plane, run of 32 source rows) items in turn.
#define TRANSPOSE_BLOCK 32

void da3_op_transpose(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) userdata;
    const struct ggml_tensor * x = dst->src[0];
    if (x == NULL || x->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32 || x->nb[0] != sizeof(float) ||
        !ggml_is_contiguous(dst) || dst->ne[0] != x->ne[1] || dst->ne[1] != x->ne[0] || dst->ne[2] != x->ne[2] ||
        dst->ne[3] != x->ne[3]) {
        if (ith == 0) {
            da3_fault(DA3_FAULT_OPERANDS);
        }
        return;
    }
    const int64_t n0 = x->ne[0], n1 = x->ne[1], n2 = x->ne[2];
    const int64_t runs = (n1 + TRANSPOSE_BLOCK - 1) / TRANSPOSE_BLOCK, items = runs * n2 * x->ne[3];
    for (int64_t it = ith; it < items; it += nth) {
        const int64_t pl = it / runs, r0 = it % runs * TRANSPOSE_BLOCK;
        const int64_t r1 = r0 + TRANSPOSE_BLOCK < n1 ? r0 + TRANSPOSE_BLOCK : n1;
        const char * src = (const char *) x->data + pl % n2 * x->nb[2] + pl / n2 * x->nb[3];
        float * out = (float *) dst->data + pl * n0 * n1;
        for (int64_t c0 = 0; c0 < n0; c0 += TRANSPOSE_BLOCK) {
            const int64_t c1 = c0 + TRANSPOSE_BLOCK < n0 ? c0 + TRANSPOSE_BLOCK : n0;
            for (int64_t r = r0; r < r1; r++) {
                const float * row = (const float *) (src + r * x->nb[1]);
                for (int64_t c = c0; c < c1; c++) {
                    out[c * n1 + r] = row[c];
                }
            }
        }
    }
}

// da3_op_add_scaled: dst = src0 + src1 ⊙ src2 for contiguous F32 src0,
// src1 and dst of one shape and src2 [ne0] (one factor per channel): a
// transformer block's LayerScale and skip connection in one pass over the
// tokens. Each product is rounded before the sum (no fused multiply-add), as
// ggml's mul then add give.
#if defined(__clang__)
void da3_op_add_scaled(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
#pragma clang fp contract(off)
#elif defined(__GNUC__)
__attribute__((optimize("fp-contract=off"))) void da3_op_add_scaled(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
#else
void da3_op_add_scaled(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
#endif
    (void) userdata;
    const struct ggml_tensor * x = dst->src[0], * y = dst->src[1], * g = dst->src[2];
    if (x == NULL || y == NULL || g == NULL || x->type != GGML_TYPE_F32 || y->type != GGML_TYPE_F32 ||
        g->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32 || !ggml_is_contiguous(x) || !ggml_is_contiguous(y) ||
        !ggml_is_contiguous(g) || !ggml_is_contiguous(dst) || !ggml_are_same_shape(x, dst) ||
        !ggml_are_same_shape(y, dst) || ggml_nelements(g) != dst->ne[0]) {
        if (ith == 0) {
            da3_fault(DA3_FAULT_OPERANDS);
        }
        return;
    }
    const int64_t C = dst->ne[0], rows = ggml_nrows(dst);
    const int64_t r0 = rows * ith / nth, r1 = rows * (ith + 1) / nth;
    const float * gd = g->data;
    for (int64_t r = r0; r < r1; r++) {
        const float * xr = (const float *) x->data + r * C, * yr = (const float *) y->data + r * C;
        float * o = (float *) dst->data + r * C;
        for (int64_t i = 0; i < C; i++) {
            const float t = yr[i] * gd[i];
            o[i] = xr[i] + t;
        }
    }
}

// ---- exponential ----

// exp_lanes is e^x lane by lane to about 1 ulp (Cephes' expf, as vexp in
// kernels_body.h: x = n·ln2 + r, |r| ≤ ln2/2, a degree-6 polynomial in r,
// then the exact scaling by 2^n in two steps), in NORM_LANES-wide vectors;
// e^x is +Inf above 88.72284 (the largest float's logarithm), 0 below
// −103.97 (the smallest subnormal's), and NaN where x is.
#define exp_select(m, a, b) ((norm_vec) (((norm_mask) (a) & (m)) | ((norm_mask) (b) & ~(m)))) // m ? a : b
#define exp_lanes(xv)                                                                                     \
    ({                                                                                                    \
        const norm_vec x_ = (xv), zero_ = { 0 };                                                          \
        norm_vec c_ = exp_select(x_ < -104.0f, zero_ - 104.0f, x_);                                       \
        c_ = exp_select(c_ > 88.72283935546875f, zero_ + 88.72283935546875f, c_);                         \
        const norm_vec big_ = zero_ + 12582912.0f; /* 1.5·2^23: rounds to nearest */                      \
        const norm_vec n_ = (c_ * 1.44269504088896341f + big_) - big_;                                   \
        norm_vec r_ = c_ - n_ * 0.693359375f;                                                             \
        r_ = r_ - n_ * -2.12194440e-4f;                                                                   \
        norm_vec p_ = zero_ + 1.9875691500e-4f;                                                           \
        p_ = p_ * r_ + 1.3981999507e-3f;                                                                  \
        p_ = p_ * r_ + 8.3334519073e-3f;                                                                  \
        p_ = p_ * r_ + 4.1665795894e-2f;                                                                  \
        p_ = p_ * r_ + 1.6666665459e-1f;                                                                  \
        p_ = p_ * r_ + 5.0000001201e-1f;                                                                  \
        p_ = p_ * r_ * r_ + (r_ + 1.0f);                                                                  \
        const norm_mask k_ = __builtin_convertvector(n_, norm_mask);                                      \
        const norm_mask k1_ = k_ >> 1, k2_ = k_ - k1_;                                                    \
        norm_vec e_ = p_ * (norm_vec) ((k1_ + 127) << 23) * (norm_vec) ((k2_ + 127) << 23);              \
        e_ = exp_select(x_ > 88.72283935546875f, zero_ + __builtin_inff(), e_);                          \
        e_ = exp_select(x_ < -103.972084045410f, zero_, e_);                                              \
        exp_select(x_ != x_, x_, e_);                                                                     \
    })

// da3_op_exp: dst = e^src0 · s + b for an F32 src0 whose rows are contiguous
// (any row, plane and batch strides: a channel of a map) and a contiguous
// dst of its shape; s and b are the float bits in userdata's high and low
// 32 bits. The threads take rows in turn.
void da3_op_exp(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct ggml_tensor * x = dst->src[0];
    if (x == NULL || x->type != GGML_TYPE_F32 || x->nb[0] != sizeof(float) || dst->type != GGML_TYPE_F32 ||
        !ggml_is_contiguous(dst) || !ggml_are_same_shape(x, dst)) {
        if (ith == 0) {
            da3_fault(DA3_FAULT_OPERANDS);
        }
        return;
    }
    const uint64_t u = (uint64_t) (uintptr_t) userdata;
    const uint32_t sb = (uint32_t) (u >> 32), bb = (uint32_t) u;
    float s, b;
    memcpy(&s, &sb, sizeof s);
    memcpy(&b, &bb, sizeof b);
    const int64_t W = x->ne[0], rows = ggml_nrows(x);
    for (int64_t r = ith; r < rows; r += nth) {
        const int64_t i1 = r % x->ne[1], i2 = r / x->ne[1] % x->ne[2], i3 = r / (x->ne[1] * x->ne[2]);
        const float * in = (const float *) ((const char *) x->data + i1 * x->nb[1] + i2 * x->nb[2] + i3 * x->nb[3]);
        float * out = (float *) dst->data + r * W;
        int64_t i = 0;
        for (; i + NORM_LANES <= W; i += NORM_LANES) {
            const norm_vec e = exp_lanes(norm_load(in + i)) * s + b;
            memcpy(out + i, &e, sizeof e);
        }
        if (i < W) { // the rest through a padded vector
            float t[NORM_LANES] = { 0 };
            memcpy(t, in + i, sizeof(float) * (size_t) (W - i));
            const norm_vec e = exp_lanes(norm_load(t)) * s + b;
            memcpy(t, &e, sizeof e);
            memcpy(out + i, t, sizeof(float) * (size_t) (W - i));
        }
    }
}

// ---- depth to space ----

// da3_op_depth_to_space: dst [KW·W, KH·H, OC, N] from the contiguous F32
// src0 [KW·KH·OC, W·H·N] (a transposed convolution's product with stride
// KW×KH, one row per input pixel, (i, j, oc) in it): dst[x·KW + i][y·KH +
// j][oc][n] = src0[(oc·KH + j)·KW + i][(n·H + y)·W + x], each value copied
// once. userdata: KW | KH << 8. The threads take (n, oc, y) in turn, and
// write its KH output rows, which read the same lines of the source.
void da3_op_depth_to_space(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct ggml_tensor * r = dst->src[0];
    const int64_t KW = (int64_t) ((uintptr_t) userdata & 0xff), KH = (int64_t) (((uintptr_t) userdata >> 8) & 0xff);
    if (r == NULL || r->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32 || !ggml_is_contiguous(r) ||
        !ggml_is_contiguous(dst) || KW < 1 || KH < 1 || dst->ne[0] % KW != 0 || dst->ne[1] % KH != 0 ||
        r->ne[0] != KW * KH * dst->ne[2] || r->ne[1] != dst->ne[0] / KW * (dst->ne[1] / KH) * dst->ne[3] ||
        r->ne[2] != 1 || r->ne[3] != 1) {
        if (ith == 0) {
            da3_fault(DA3_FAULT_OPERANDS);
        }
        return;
    }
    const int64_t W = dst->ne[0] / KW, H = dst->ne[1] / KH, OC = dst->ne[2], N = dst->ne[3], row = r->ne[0];
    const float * src = r->data;
    float * out = dst->data;
    for (int64_t t = ith; t < N * OC * H; t += nth) {
        const int64_t y = t % H, oc = t / H % OC, n = t / (H * OC);
        const float * s0 = src + (n * H + y) * W * row + oc * KH * KW;
        for (int64_t j = 0; j < KH; j++) {
            float * o = out + ((n * OC + oc) * KH * H + y * KH + j) * KW * W;
            const float * s = s0 + j * KW;
            for (int64_t x = 0; x < W; x++) {
                for (int64_t i = 0; i < KW; i++) {
                    o[x * KW + i] = s[x * row + i];
                }
            }
        }
    }
}

// ---- im2col ----

// da3_op_im2col: dst [KW·KH·IC, OW, OH, N] = the patches of the contiguous
// F32 src0 [W, H, IC, N] (ggml_im2col's layout: a row per output pixel,
// (ic, ky, kx) in it, 0 outside the input). userdata: KW | KH << 8 | stride
// << 16 | pad << 24 | dilation << 32, each below 256. The threads take
// output rows (n, oy) in turn, and for each channel fill the row's pixels
// from the same few input rows.
void da3_op_im2col(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct ggml_tensor * x = dst->src[0];
    const uint64_t u = (uint64_t) (uintptr_t) userdata;
    const int64_t KW = (int64_t) (u & 0xff), KH = (int64_t) ((u >> 8) & 0xff), s = (int64_t) ((u >> 16) & 0xff);
    const int64_t pad = (int64_t) ((u >> 24) & 0xff), d = (int64_t) ((u >> 32) & 0xff);
    if (x == NULL || x->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32 || !ggml_is_contiguous(x) ||
        !ggml_is_contiguous(dst) || KW < 1 || KH < 1 || s < 1 || d < 1 || dst->ne[0] != KW * KH * x->ne[2] ||
        dst->ne[3] != x->ne[3] || dst->ne[1] != (x->ne[0] + 2 * pad - d * (KW - 1) - 1) / s + 1 ||
        dst->ne[2] != (x->ne[1] + 2 * pad - d * (KH - 1) - 1) / s + 1 || dst->ne[1] < 1 || dst->ne[2] < 1) {
        if (ith == 0) {
            da3_fault(DA3_FAULT_OPERANDS);
        }
        return;
    }
    const int64_t W = x->ne[0], H = x->ne[1], IC = x->ne[2], N = x->ne[3], OW = dst->ne[1], OH = dst->ne[2];
    const int64_t K = dst->ne[0];
    // the output pixels [lo, hi) whose whole patch row lies inside the input's columns
    int64_t lo = 0, hi = OW;
    while (lo < OW && lo * s - pad < 0) {
        lo++;
    }
    while (hi > lo && (hi - 1) * s + (KW - 1) * d - pad >= W) {
        hi--;
    }
    for (int64_t t = ith; t < N * OH; t += nth) {
        const int64_t n = t / OH, oy = t % OH;
        float * row0 = (float *) dst->data + (n * OH + oy) * OW * K;
        for (int64_t ic = 0; ic < IC; ic++) {
            const float * plane = (const float *) x->data + (n * IC + ic) * H * W;
            for (int64_t ky = 0; ky < KH; ky++) {
                const int64_t iy = oy * s + ky * d - pad;
                float * o = row0 + (ic * KH + ky) * KW;
                if (iy < 0 || iy >= H) { // a row of padding
                    for (int64_t ox = 0; ox < OW; ox++) {
                        memset(o + ox * K, 0, sizeof(float) * (size_t) KW);
                    }
                    continue;
                }
                const float * in = plane + iy * W;
                for (int64_t ox = 0; ox < OW; ox++) {
                    if (ox >= lo && ox < hi) { // inside: no column test
                        const float * src = in + ox * s - pad;
                        for (int64_t kx = 0; kx < KW; kx++) {
                            o[ox * K + kx] = src[kx * d];
                        }
                        continue;
                    }
                    for (int64_t kx = 0; kx < KW; kx++) {
                        const int64_t ix = ox * s + kx * d - pad;
                        o[ox * K + kx] = ix >= 0 && ix < W ? in[ix] : 0.0f;
                    }
                }
            }
        }
    }
}
