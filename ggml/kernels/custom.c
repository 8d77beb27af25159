// The portable parts of the CPU kernels: fault accounting, per-thread
// scratch buffers and the bilinear resize. Each kernel splits its rows over
// the nth threads by ith and checks its operands on entry: the Go side
// checks them before it builds a node, and the kernels check again, cheaply,
// so that a node built any other way records a fault instead of reading out
// of bounds.
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
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
        free(b[i].p);
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
        free(b[i].p);
        b[i].p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
        b[i].n = b[i].p == NULL ? 0 : n;
    }
    return b[i].p;
}

// da3_op_bilinear: ggml_interpolate's bilinear mode (userdata: 1 for
// align_corners) for a contiguous F32 src0 [W, H, C, N] resized to dst [OW,
// OH, C, N], with the same source coordinates and weights as ggml's kernel
// but with the per-column ones computed once per call instead of per
// element, and rows (not channels) split over the threads.
void da3_op_bilinear(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct ggml_tensor * src = dst->src[0];
    if (src == NULL || src->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32 || !ggml_is_contiguous(src) ||
        !ggml_is_contiguous(dst) || src->ne[2] != dst->ne[2] || src->ne[3] != dst->ne[3] || src->ne[0] < 1 || src->ne[1] < 1) {
        da3_fault(DA3_FAULT_OPERANDS);
        return;
    }
    const int64_t W = src->ne[0], H = src->ne[1];
    const int64_t OW = dst->ne[0], OH = dst->ne[1];
    const int64_t rows = OH * dst->ne[2] * dst->ne[3];
    const int64_t r0 = rows * ith / nth, r1 = rows * (ith + 1) / nth;
    if (r0 >= r1) {
        return;
    }
    const int align = (int) (intptr_t) userdata;
    float sf0 = (float) OW / W, sf1 = (float) OH / H, po = 0.5f;
    if (align) {
        po = 0.0f;
        sf0 = OW > 1 && W > 1 ? (float) (OW - 1) / (W - 1) : sf0;
        sf1 = OH > 1 && H > 1 ? (float) (OH - 1) / (H - 1) : sf1;
    }
    int32_t * x0 = malloc(sizeof(int32_t) * 2 * OW);
    float * dx = malloc(sizeof(float) * OW);
    if (x0 == NULL || dx == NULL) {
        free(x0);
        free(dx);
        da3_fault(DA3_FAULT_NOMEM);
        return;
    }
    int32_t * x1 = x0 + OW;
    for (int64_t i = 0; i < OW; i++) {
        const float x = ((float) i + po) / sf0 - po;
        int64_t a = (int64_t) floorf(x), b = a + 1;
        a = a < 0 ? 0 : a > W - 1 ? W - 1 : a;
        b = b < 0 ? 0 : b > W - 1 ? W - 1 : b;
        float d = x - (float) a;
        dx[i] = d < 0.0f ? 0.0f : d > 1.0f ? 1.0f : d;
        x0[i] = (int32_t) a;
        x1[i] = (int32_t) b;
    }
    for (int64_t r = r0; r < r1; r++) {
        const int64_t oy = r % OH, plane = r / OH;
        const float y = ((float) oy + po) / sf1 - po;
        int64_t y0 = (int64_t) floorf(y), y1 = y0 + 1;
        y0 = y0 < 0 ? 0 : y0 > H - 1 ? H - 1 : y0;
        y1 = y1 < 0 ? 0 : y1 > H - 1 ? H - 1 : y1;
        float dy = y - (float) y0;
        dy = dy < 0.0f ? 0.0f : dy > 1.0f ? 1.0f : dy;
        const float * s0 = (const float *) src->data + (plane * H + y0) * W;
        const float * s1 = (const float *) src->data + (plane * H + y1) * W;
        float * out = (float *) dst->data + r * OW;
        for (int64_t i = 0; i < OW; i++) {
            const float a = s0[x0[i]], b = s0[x1[i]], c = s1[x0[i]], d = s1[x1[i]];
            out[i] = a * (1 - dx[i]) * (1 - dy) + b * dx[i] * (1 - dy) + c * (1 - dx[i]) * dy + d * dx[i] * dy;
        }
    }
    free(x0);
    free(dx);
}
