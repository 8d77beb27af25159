// Portable vectors of 4 floats (GCC/Clang vector extensions) for the kernel
// bodies (see kernels_body.h): what the compiler makes of them with the
// build's own flags (SSE2 on any x86-64, NEON on arm64). Masked and gathered
// accesses are per lane.
#include <math.h>
#include <string.h>

#define VL 4 // lanes of a vector
typedef float vf __attribute__((vector_size(16)));
typedef int32_t vi __attribute__((vector_size(16)));
typedef int32_t vm __attribute__((vector_size(16))); // −1 in the selected lanes

static inline vf v_zero(void) { return (vf) { 0, 0, 0, 0 }; }
static inline vf v_set1(float x) { return (vf) { x, x, x, x }; }
static inline vf v_loadu(const float * p) { vf v; memcpy(&v, p, sizeof v); return v; }
static inline vf v_load(const float * p) { return v_loadu(p); }
static inline void v_storeu(float * p, vf v) { memcpy(p, &v, sizeof v); }
static inline void v_store(float * p, vf v) { v_storeu(p, v); }
static inline vf v_fma(vf a, vf b, vf c) { return a * b + c; }
static inline vf v_fnma(vf a, vf b, vf c) { return c - a * b; }
static inline vf v_fms(vf a, vf b, vf c) { return a * b - c; }
static inline vf v_add(vf a, vf b) { return a + b; }
static inline vf v_sub(vf a, vf b) { return a - b; }
static inline vf v_mul(vf a, vf b) { return a * b; }
static inline vf v_div(vf a, vf b) { return a / b; }
static inline vf v_blend(vm m, vf a, vf b) { return (vf) (((vi) a & ~m) | ((vi) b & m)); } // m ? b : a
static inline vm m_lt(vf a, vf b) { return (vm) (a < b); }
static inline vf v_max(vf a, vf b) { return v_blend(m_lt(b, a), b, a); } // a > b ? a : b, as x86 max (b for NaN and ±0)
static inline vf v_min(vf a, vf b) { return v_blend(m_lt(b, a), a, b); }
static inline vf v_abs(vf a) { return (vf) ((vi) a & 0x7fffffff); }
static inline vf v_round(vf a) { // to nearest, ties to even, for |a| < 2^22 (the kernels' range)
    const vf big = v_set1(12582912.0f); // 1.5·2^23
    return (a + big) - big;
}
static inline vf v_ldexp(vf p, vf n) { // p·2^n for integral n in [-150, 130], in two exact steps
    vi k = { (int32_t) n[0], (int32_t) n[1], (int32_t) n[2], (int32_t) n[3] };
    const vi k1 = k >> 1, k2 = k - k1;
    return p * (vf) ((k1 + 127) << 23) * (vf) ((k2 + 127) << 23);
}
static inline float v_hmax(vf a) { float m = a[0]; for (int i = 1; i < VL; i++) m = a[i] > m ? a[i] : m; return m; }
static inline float v_hsum(vf a) { return (a[0] + a[1]) + (a[2] + a[3]); }

static inline vm m_range(int64_t lo, int64_t hi) {
    vm m;
    for (int i = 0; i < VL; i++) {
        m[i] = i >= lo && i < hi ? -1 : 0;
    }
    return m;
}
static inline vm m_first(int64_t n) { return m_range(0, n); }
static inline vm m_and(vm a, vm b) { return a & b; }
static inline vf v_loadu_m(const float * p, vm m) {
    vf v = v_zero();
    for (int i = 0; i < VL; i++) {
        if (m[i]) v[i] = p[i];
    }
    return v;
}
static inline void v_storeu_m(float * p, vm m, vf v) {
    for (int i = 0; i < VL; i++) {
        if (m[i]) p[i] = v[i];
    }
}

static inline vi vi_loadu(const int32_t * p) { vi v; memcpy(&v, p, sizeof v); return v; }
static inline vi vi_set1(int32_t x) { return (vi) { x, x, x, x }; }
static inline vi vi_add(vi a, vi b) { return a + b; }
static inline vi vi_mul(vi a, vi b) { return a * b; }
static inline vm m_inside(vi i, int32_t n) { return (vm) ((i >= 0) & (i < n)); }
static inline vf v_gather_m(const float * base, vi idx, vm m) {
    vf v = v_zero();
    for (int i = 0; i < VL; i++) {
        if (m[i]) v[i] = base[idx[i]];
    }
    return v;
}
// v_deint splits the 2·VL values a, b (in order) into the even and odd ones;
// v_interleave is its inverse (lo: the first VL values, hi: the rest).
static inline void v_deint(vf a, vf b, vf * even, vf * odd) {
    vf e = v_zero(), o = v_zero();
    for (int i = 0; i < VL / 2; i++) {
        e[i] = a[2 * i], o[i] = a[2 * i + 1];
        e[VL / 2 + i] = b[2 * i], o[VL / 2 + i] = b[2 * i + 1];
    }
    *even = e, *odd = o;
}
static inline void v_interleave(vf even, vf odd, vf * lo, vf * hi) {
    vf l = v_zero(), h = v_zero();
    for (int i = 0; i < VL / 2; i++) {
        l[2 * i] = even[i], l[2 * i + 1] = odd[i];
        h[2 * i] = even[VL / 2 + i], h[2 * i + 1] = odd[VL / 2 + i];
    }
    *lo = l, *hi = h;
}
// v_next returns a's lanes 1 … VL−1 followed by b's lane k (0 or 1).
static inline vf v_next(vf a, vf b, int k) {
    vf r = b;
    for (int i = 0; i + 1 < VL; i++) {
        r[i] = a[i + 1];
    }
    r[VL - 1] = b[k];
    return r;
}
static inline void v_prefetch(const void * p) { (void) p; }

static inline void v_transpose(const float * src, int64_t lds, float * dst, int64_t ldd) {
    for (int k = 0; k < VL; k++) {
        for (int j = 0; j < VL; j++) {
            dst[k * ldd + j] = src[j * lds + k];
        }
    }
}
