// Per-channel int8 products for kernels_body.h in the AVX2 variant, with or
// without VNNI: the quantization of kernels_int8c.h (weights with one scale
// per output channel over the whole depth, s_w = max|w|/127, at load by
// da3_pack_weight; activations with one scale per row, s_a = max|x|/127, as
// A is packed; both rounded to nearest, ties to even, into [-127, 127]).
// The tile's step takes one of three forms, by what the CPU has; all give
// the same exact int32 sums, so the same outputs as the AVX-512 variant's:
//
//   - I8C_FORM_AVXVNNI, AVX-VNNI (Alder Lake, Zen 5 and later): vpdpbusd on
//     256-bit registers, VEX-encoded, as the AVX-512 variant does: A stored
//     as q_a + 128 (unsigned bytes), B's excess 128·Σq_w per column
//     subtracted exactly at the end,
//
//         C[m][n] = (s_a[m]·s_w[n]) · (Σ_k (q_a + 128)·q_w − 128·Σ_k q_w);
//
//   - I8C_FORM_VNNI512, AVX512_VNNI with VL (an AVX-512 CPU running this
//     variant): the same, vpdpbusd EVEX-encoded on 256-bit registers;
//   - I8C_FORM_MADDUBS, any AVX2 CPU: vpmaddubsw, which takes unsigned by
//     signed bytes and saturates its pair sums to int16, so q_a + 128 could
//     saturate (2·255·127 > 32767); it uses the sign trick of ggml's AVX2
//     q8_0 dot product instead,
//
//         q_a·q_w = |q_a| · (sign(q_a)·q_w),  |q_a| ≤ 127, |sign(q_a)·q_w| ≤ 127
//
//     (vpsignb applies the activation's sign to the weight: a pair sums to
//     at most 2·127·127 = 32258), then vpmaddwd by ones widens the pairs to
//     int32 sums of four products, accumulated over all of K with no excess:
//
//         C[m][n] = (s_a[m]·s_w[n]) · Σ_k q_a·q_w.
//
// |Σ| ≤ 255·127·K stays below 2³¹ for K ≤ I8C_MAX_K. The depth is padded to
// a multiple of 4 with zeros.

#define ISA_INT8C          // the variant's own target (AVX2) has every instruction used here
#define MR_I8C 4           // rows of the tile: 8 int32 accumulators, 2 weight vectors, the broadcasts and ones in 16 registers
#define I8C_MAX_K 65536    // the deepest product (the AVX-512 variant's limit; the int32 sums could go to 133144)
#define I8C_PEAK peak_i8c  // da3_peak's int8c rate

// i8c_quads is the 32-bit quads of depth K (K padded to a multiple of 4).
static inline int64_t i8c_quads(int64_t K) { return (K + 3) / 4; }

// i8c_form is the form the tiles take (da3_i8c_avx2_form: the fastest this
// CPU runs, or the one a test asks for; chosen on first use). It sets A's
// layout, so it changes only between graphs; B's is the same in every form.
enum { I8C_FORM_AUTO = 0, I8C_FORM_MADDUBS = 1, I8C_FORM_VNNI512 = 2, I8C_FORM_AVXVNNI = 3 };
static int i8c_form = I8C_FORM_AUTO;
static int i8c_form_now(void);

// i8c_vnni reports whether the tiles take a vpdpbusd form.
static inline int i8c_vnni(void) { return i8c_form_now() != I8C_FORM_MADDUBS; }

// Packed per-channel panels: per NR columns (B), [quads][NR] int32 quads of
// q_w, then the scales [NR] (f32) and the excesses 128·Σq_w [NR] (int32);
// per MR_I8C rows (A), in the vpdpbusd forms [quads][MR_I8C] quads of
// q_a + 128, in the vpmaddubsw form per quad the MR_I8C quads of q_a, then
// the MR_I8C quads of |q_a| ([quads][2][MR_I8C]); then the scales [MR_I8C]
// (f32). Words per column of B, and per row of A in every form (the
// vpdpbusd forms leave the last quads unused): panels packed in one form and
// read in another (a form changed while a graph computes, which the callers
// must not do) give wrong numbers but stay in their buffers.
static inline int64_t i8c_b_words(int64_t K) { return i8c_quads(K) + 2; }
static inline int64_t i8c_a_words(int64_t K) { return 2 * i8c_quads(K) + 1; }

// pack_a_i8c quantizes A rows [m0, m0+mc) over all K values per row and
// packs them into MR_I8C-tall panels of the form in effect (q_a + 128, or
// q_a and |q_a|); rows past mc are zero.
static void pack_a_i8c(const float * a, int64_t lda, int64_t m0, int64_t mc, int64_t K, int32_t * out) {
    const int vnni = i8c_vnni(), per = vnni ? 1 : 2; // quads of a row per quad of depth
    const int64_t kq = i8c_quads(K), words = i8c_a_words(K) * MR_I8C;
    const __m256i excess = _mm256_set1_epi8((char) 0x80);
    for (int64_t i0 = 0; i0 < mc; i0 += MR_I8C) {
        const int64_t h = mc - i0 < MR_I8C ? mc - i0 : MR_I8C;
        int32_t * p = out + (i0 / MR_I8C) * words;
        float * sc = (float *) (p + per * kq * MR_I8C);
        if (h < MR_I8C) {
            memset(p, 0, sizeof(int32_t) * words);
        }
        for (int64_t i = 0; i < h; i++) {
            const float * x = a + (m0 + i0 + i) * lda;
            const float d = i8c_row_amax(x, K) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            const vf vid = v_set1(id);
            const __m256i lo = _mm256_set1_epi32(-127);
            for (int64_t k = 0; k < 4 * kq; k += VL) { // two quads a step; the depth's padding quantizes to 0
                const vf v = K - k >= VL ? v_loadu(x + k) : v_loadu_m(x + k, m_first(K - k));
                // round to nearest, ties to even; [-127, 127] (the upper bound by the saturating packs)
                const __m256i q = _mm256_max_epi32(_mm256_cvtps_epi32(v_mul(v, vid)), lo);
                const __m256i w16 = _mm256_packs_epi32(q, q); // per 128-bit lane: its four values, twice
                const __m256i b = _mm256_packs_epi16(w16, w16); // per lane: its four bytes in the low quad
                const int64_t qd = k / 4;
                if (vnni) { // q_a + 128
                    const __m256i u = _mm256_add_epi8(b, excess);
                    p[qd * MR_I8C + i] = _mm_cvtsi128_si32(_mm256_castsi256_si128(u));
                    if (qd + 1 < kq) {
                        p[(qd + 1) * MR_I8C + i] = _mm_cvtsi128_si32(_mm256_extracti128_si256(u, 1));
                    }
                    continue;
                }
                const __m256i ab = _mm256_abs_epi8(b);
                p[qd * 2 * MR_I8C + i] = _mm_cvtsi128_si32(_mm256_castsi256_si128(b));
                p[qd * 2 * MR_I8C + MR_I8C + i] = _mm_cvtsi128_si32(_mm256_castsi256_si128(ab));
                if (qd + 1 < kq) {
                    p[(qd + 1) * 2 * MR_I8C + i] = _mm_cvtsi128_si32(_mm256_extracti128_si256(b, 1));
                    p[(qd + 1) * 2 * MR_I8C + MR_I8C + i] = _mm_cvtsi128_si32(_mm256_extracti128_si256(ab, 1));
                }
            }
            sc[i] = d;
        }
    }
}

// i8c_dot4 adds to s, per int32 lane, the four products of the activation
// quad a (all lanes; |a| in aa) with the weight quads w, by the sign trick.
static inline __m256i i8c_dot4(__m256i s, __m256i a, __m256i aa, __m256i w, __m256i ones) {
    return _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(aa, _mm256_sign_epi8(w, a)), ones));
}

#define ISA_AVXVNNI __attribute__((target("avx2,fma,f16c,avxvnni")))
#define ISA_VNNI512 __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512vnni")))

// The vpdpbusd forms of the step: the four products of the activation quad
// a (q_a + 128, all lanes) with the weight quads w added to s. Inline
// assembly, as kernels_int8c.h's i8c_dpbusd (the intrinsics make GCC copy
// every accumulator after each step).
static inline ISA_AVXVNNI __m256i i8c_dot4_avxvnni(__m256i s, __m256i a, __m256i w) {
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(s) : "x"(a), "x"(w));
    return s;
}

static inline ISA_VNNI512 __m256i i8c_dot4_vnni512(__m256i s, __m256i a, __m256i w) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(s) : "v"(a), "v"(w));
    return s;
}

// DEFINE_TILE_I8C defines NAME, an MR_I8C×NR tile from packed per-channel
// panels of kq quads of depth, stored like the f32 tiles, with function
// attribute ATTR and step STEP(s, i, h), which adds row i's quad (q or ap
// at the step's A words) times w[h] to s. VNNI: A's layout of the vpdpbusd
// forms (one quad per row and step) and B's excess subtracted. GCC keeps two
// of the accumulators of the vpmaddubsw form on the stack (the sums in a
// function of their own keep all in registers, at the same speed: the
// vector pipes bound the loop, see peak_i8c).
#define DEFINE_TILE_I8C(NAME, ATTR, VNNI, STEP)                                                              \
    static __attribute__((noinline)) ATTR void NAME(int64_t kq, const void * apv, const void * bpv, float * c, \
                                                    int64_t ldc, int64_t mr, int64_t ncols, int accumulate,  \
                                                    const struct epi * e, int64_t row0, int64_t col0) {      \
        const int aw = VNNI ? MR_I8C : 2 * MR_I8C; /* A's words per quad of depth */                          \
        const int32_t * ap = apv, * bp = bpv;                                                                \
        const float * as = (const float *) (ap + kq * aw);                                                   \
        const float * bs = (const float *) (bp + kq * NR);                                                   \
        const int32_t * bx = bp + (kq + 1) * NR;                                                             \
        TILE_PREFETCH(MR_I8C)                                                                                \
        const __m256i ones = _mm256_set1_epi16(1);                                                           \
        (void) ones;                                                                                         \
        __m256i s[MR_I8C][NV];                                                                               \
        _Pragma("GCC unroll 16") for (int i = 0; i < MR_I8C; i++) {                                          \
            _Pragma("GCC unroll 4") for (int h = 0; h < NV; h++) s[i][h] = _mm256_setzero_si256();           \
        }                                                                                                    \
        for (int64_t q = 0; q < kq; q++) {                                                                   \
            __m256i w[NV];                                                                                   \
            _Pragma("GCC unroll 4") for (int h = 0; h < NV; h++) {                                           \
                w[h] = _mm256_load_si256((const __m256i *) (bp + q * NR + h * VL));                          \
            }                                                                                                \
            const int32_t * aq = ap + q * aw;                                                                \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR_I8C; i++) {                                      \
                _Pragma("GCC unroll 4") for (int h = 0; h < NV; h++) s[i][h] = STEP(s[i][h], i, h);          \
            }                                                                                                \
        }                                                                                                    \
        vf acc[MR_I8C][NV], d[NV];                                                                           \
        __m256i x[NV];                                                                                       \
        _Pragma("GCC unroll 4") for (int h = 0; h < NV; h++) {                                               \
            d[h] = v_load(bs + h * VL);                                                                      \
            x[h] = VNNI ? _mm256_load_si256((const __m256i *) (bx + h * VL)) : _mm256_setzero_si256();      \
        }                                                                                                    \
        _Pragma("GCC unroll 16") for (int i = 0; i < MR_I8C; i++) {                                          \
            const vf da = v_set1(as[i]);                                                                     \
            _Pragma("GCC unroll 4") for (int h = 0; h < NV; h++) {                                           \
                const __m256i t = VNNI ? _mm256_sub_epi32(s[i][h], x[h]) : s[i][h];                          \
                acc[i][h] = v_mul(_mm256_cvtepi32_ps(t), v_mul(da, d[h]));                                   \
            }                                                                                                \
        }                                                                                                    \
        TILE_STORE(MR_I8C)                                                                                   \
    }

// The steps of the three forms (in DEFINE_TILE_I8C: aq is the step's A
// words, w the weight vectors).
#define STEP_MADDUBS(s, i, h) \
    i8c_dot4(s, _mm256_set1_epi32(aq[i]), _mm256_set1_epi32(aq[MR_I8C + i]), w[h], ones)
#define STEP_AVXVNNI(s, i, h) i8c_dot4_avxvnni(s, _mm256_set1_epi32(aq[i]), w[h])
#define STEP_VNNI512(s, i, h) i8c_dot4_vnni512(s, _mm256_set1_epi32(aq[i]), w[h])
// The steps of signed A by unsigned B (the attention's vᵀ by its
// probability bytes; B's excesses are zero): the operands swapped.
#define STEP_AVXVNNI_SU(s, i, h) i8c_dot4_avxvnni(s, w[h], _mm256_set1_epi32(aq[i]))
#define STEP_VNNI512_SU(s, i, h) i8c_dot4_vnni512(s, w[h], _mm256_set1_epi32(aq[i]))

DEFINE_TILE_I8C(tile_i8c, , 0, STEP_MADDUBS)
DEFINE_TILE_I8C(tile_i8c_avxvnni, ISA_AVXVNNI, 1, STEP_AVXVNNI)
DEFINE_TILE_I8C(tile_i8c_vnni512, ISA_VNNI512, 1, STEP_VNNI512)
DEFINE_TILE_I8C(tile_i8c_su_avxvnni, ISA_AVXVNNI, 1, STEP_AVXVNNI_SU)
DEFINE_TILE_I8C(tile_i8c_su_vnni512, ISA_VNNI512, 1, STEP_VNNI512_SU)

// i8c_form_runs reports whether this CPU runs form f.
static int i8c_form_runs(int f) {
    switch (f) {
    case I8C_FORM_MADDUBS: return 1;
    case I8C_FORM_AVXVNNI: return __builtin_cpu_supports("avxvnni");
    case I8C_FORM_VNNI512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    }
    return 0;
}

// da3_i8c_form_avx2 sets the form of the int8c tiles to want (I8C_FORM_AUTO:
// the fastest this CPU runs, VEX before EVEX before vpmaddubsw) and returns
// the form in effect, or 0 (nothing changed) when this CPU cannot run want;
// want < 0 returns the form in effect. Not for use while a graph computes.
int da3_i8c_form_avx2(int want) {
    if (want < 0) {
        return i8c_form_now();
    }
    if (want == I8C_FORM_AUTO) {
        want = i8c_form_runs(I8C_FORM_AVXVNNI) ? I8C_FORM_AVXVNNI
             : i8c_form_runs(I8C_FORM_VNNI512) ? I8C_FORM_VNNI512 : I8C_FORM_MADDUBS;
    }
    if (!i8c_form_runs(want)) {
        return 0;
    }
    __atomic_store_n(&i8c_form, want, __ATOMIC_RELAXED);
    return want;
}

// i8c_form_now is the form the tiles take (chosen on first use).
static int i8c_form_now(void) {
    int f = __atomic_load_n(&i8c_form, __ATOMIC_RELAXED);
    return f != I8C_FORM_AUTO ? f : da3_i8c_form_avx2(I8C_FORM_AUTO);
}

// i8c_tile is the int8c tile of the form in effect, and i8c_tile_su its
// tile of signed A by unsigned B (NULL in the vpmaddubsw form, whose int16
// pair sums 2·255·127 would saturate).
static tile_fn i8c_tile(void) {
    switch (i8c_form_now()) {
    case I8C_FORM_AVXVNNI: return tile_i8c_avxvnni;
    case I8C_FORM_VNNI512: return tile_i8c_vnni512;
    }
    return tile_i8c;
}

static tile_fn i8c_tile_su(void) {
    switch (i8c_form_now()) {
    case I8C_FORM_AVXVNNI: return tile_i8c_su_avxvnni;
    case I8C_FORM_VNNI512: return tile_i8c_su_vnni512;
    }
    return NULL;
}

// i8c_attention_runs reports whether the attention runs in int8
// (kernels_attn_i8c.h): in the vpdpbusd forms.
static int i8c_attention_runs(void) { return i8c_vnni(); }

// i8c_scales returns the quantization scales max|x|/127 of the lanes' maxima
// mx in *d and their reciprocals (0 for a scale of 0).
static inline vf i8c_scales(vf mx, vf * d) {
    *d = v_div(mx, v_set1(127.0f));
    return _mm256_and_ps(_mm256_cmp_ps(*d, v_zero(), _CMP_NEQ_OQ), v_div(v_set1(1.0f), *d));
}

// PEAK_I8C_BODY is peak_i8c's loop with the vpmaddubsw step P(s, a, |a|, w): rounds of
// eight of the tile's steps (32 products each) on two rows and two weight
// vectors, made opaque to the compiler before each four (else it computes
// the products once and times the additions alone).
#define PEAK_I8C_BODY(P)                                                                                      \
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;                                          \
    __m256i a0 = _mm256_set1_epi32(0x01ff01ff), a1 = _mm256_set1_epi32(0x7f02fe81);                          \
    __m256i aa0 = _mm256_abs_epi8(a0), aa1 = _mm256_abs_epi8(a1);                                             \
    __m256i w0 = _mm256_set1_epi32(0x01020102), w1 = _mm256_set1_epi32(0x81037f05);                          \
    const __m256i ones = _mm256_set1_epi16(1);                                                                \
    (void) ones;                                                                                              \
    for (int64_t r = 0; r < rounds; r++) {                                                                    \
        for (int half = 0; half < 2; half++) {                                                                \
            __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(aa0), "+x"(aa1), "+x"(w0), "+x"(w1));             \
            s0 = P(s0, a0, aa0, w0);                                                                          \
            s1 = P(s1, a0, aa0, w1);                                                                          \
            s2 = P(s2, a1, aa1, w0);                                                                          \
            s3 = P(s3, a1, aa1, w1);                                                                          \
        }                                                                                                     \
    }                                                                                                         \
    int32_t lanes[8];                                                                                         \
    _mm256_storeu_si256((__m256i *) lanes, _mm256_add_epi32(_mm256_add_epi32(s0, s1), _mm256_add_epi32(s2, s3))); \
    return lanes[0];

#define PEAK_MADDUBS(s, a, aa, w) i8c_dot4(s, a, aa, w, ones)

static int32_t peak_i8c_maddubs(int64_t rounds) { PEAK_I8C_BODY(PEAK_MADDUBS) }

// PEAK_VNNI_BODY is the same for a vpdpbusd form DOT, on eight accumulators
// (four hide the instruction's latency on neither Zen 4 nor Intel's cores).
#define PEAK_VNNI_BODY(DOT)                                                                                   \
    __m256i s[8];                                                                                             \
    for (int i = 0; i < 8; i++) s[i] = _mm256_setzero_si256();                                                \
    __m256i a0 = _mm256_set1_epi32(0x01ff01ff), a1 = _mm256_set1_epi32(0x7f02fe81);                          \
    __m256i w0 = _mm256_set1_epi32(0x01020102), w1 = _mm256_set1_epi32(0x81037f05);                          \
    __m256i w2 = _mm256_set1_epi32(0x05060708), w3 = _mm256_set1_epi32(0x8f0a7b01);                          \
    for (int64_t r = 0; r < rounds; r++) {                                                                    \
        __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(w0), "+x"(w1), "+x"(w2), "+x"(w3));                   \
        s[0] = DOT(s[0], a0, w0); s[1] = DOT(s[1], a0, w1); s[2] = DOT(s[2], a0, w2); s[3] = DOT(s[3], a0, w3); \
        s[4] = DOT(s[4], a1, w0); s[5] = DOT(s[5], a1, w1); s[6] = DOT(s[6], a1, w2); s[7] = DOT(s[7], a1, w3); \
    }                                                                                                         \
    for (int i = 1; i < 8; i++) s[0] = _mm256_add_epi32(s[0], s[i]);                                          \
    int32_t lanes[8];                                                                                         \
    _mm256_storeu_si256((__m256i *) lanes, s[0]);                                                             \
    return lanes[0];

static ISA_AVXVNNI int32_t peak_i8c_avxvnni(int64_t rounds) { PEAK_VNNI_BODY(i8c_dot4_avxvnni) }
static ISA_VNNI512 int32_t peak_i8c_vnni512(int64_t rounds) { PEAK_VNNI_BODY(i8c_dot4_vnni512) }

// peak_i8c is da3_peak for int8c, in the form in effect.
static volatile int32_t i8c_peak_sink;

static double peak_i8c(int64_t rounds) {
    switch (i8c_form_now()) {
    case I8C_FORM_AVXVNNI: i8c_peak_sink = peak_i8c_avxvnni(rounds); break;
    case I8C_FORM_VNNI512: i8c_peak_sink = peak_i8c_vnni512(rounds); break;
    default: i8c_peak_sink = peak_i8c_maddubs(rounds);
    }
    return 2.0 * 32 * 8 * (double) rounds; // 32 byte products per step
}
