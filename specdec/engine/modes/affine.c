/* The lean forward's matrix products on a CPU, few rows at a time (`specdec.engine.modes.kernel`).
 *
 * pack:   P <- W in panels.  W is (K, N) row-major (a GPT-2 Conv1D weight), or with `transposed` (N, K)
 *         row-major (the tied head, wte).  Panel s holds columns 64s .. 64s + 63 of the (K, N) product
 *         matrix, k by k: P[s K 64 + k 64 + c] = W[k, 64 s + c], zero past column N.
 * affine: y[m, :] = b + n(x[m, :]) @ W (+ r[m, :]) read from the panels; b may be NULL (no bias).
 * n is the identity, or with g given the layer norm (x - mean) / sqrt(var + eps) * g + beta of the row
 * (biased variance, as torch's layer_norm) that precedes every GPT-2 product but the projections.
 *
 * Why: at one to a few dozen rows a product reads every weight once for little arithmetic.  A panel
 * is one contiguous stretch the hardware prefetchers stream from memory; its 64 columns times up to
 * MR rows of sums stay in vector registers for the whole of K, so each weight loaded feeds MR
 * multiply-adds, and the next MR rows re-read the panel from the L2 cache, not from memory.  Sums are
 * taken in another order than a BLAS takes them: the same products to float32 rounding.
 * Single-threaded; the caller checks shapes, dtypes and contiguity (x (M, K), y (M, N), b (N) or NULL,
 * r (M, N) or NULL, g and beta (K) or NULL, P of panels(N) K 64 floats).  With AVX-512 the tiles are
 * written with its intrinsics; elsewhere in plain C, the same sums.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#define WIDTH 64 /* a panel's columns: four 16-float vectors */
#define MR 6     /* rows of sums held at once: 6 x 4 vectors of the 32 registers */

void pack(const float *restrict W, long K, long N, float *restrict P, int transposed) {
    for (long s = 0; s < (N + WIDTH - 1) / WIDTH; s++)
        for (long k = 0; k < K; k++)
            for (long c = 0; c < WIDTH; c++) {
                const long n = WIDTH * s + c;
                P[(s * K + k) * WIDTH + c] = n >= N ? 0.0f : transposed ? W[n * K + k] : W[k * N + n];
            }
}

/* The rows of x layer-normed into a new buffer (the caller frees it), or x itself when g is NULL. */
static const float *normed(const float *x, long M, long K, const float *g, const float *beta, float eps) {
    if (!g)
        return x;
    float *xn = malloc(sizeof(float) * M * K);
    if (!xn)
        return NULL;
    for (long m = 0; m < M; m++) {
        const float *xm = x + m * K;
        float mean = 0.0f, var = 0.0f;
        for (long k = 0; k < K; k++)
            mean += xm[k];
        mean /= K;
        for (long k = 0; k < K; k++)
            var += (xm[k] - mean) * (xm[k] - mean);
        const float inv = 1.0f / sqrtf(var / K + eps);
        for (long k = 0; k < K; k++)
            xn[m * K + k] = (xm[k] - mean) * inv * g[k] + beta[k];
    }
    return xn;
}

#ifdef __AVX512F__
/* y[r, 0 .. 16 nv) += sum_k x[r, k] panel[k, 0 .. 16 nv) for r < mr (rows of y N apart); the last
 * vector's columns masked by tail.  mr and nv are constants where it is inlined, so the sums c<r><v>
 * a row or vector past them never uses are dropped by the compiler and the rest live in registers. */
#define EACH(S) S(0, 0) S(0, 1) S(0, 2) S(0, 3) S(1, 0) S(1, 1) S(1, 2) S(1, 3) S(2, 0) S(2, 1) S(2, 2) S(2, 3) \
                S(3, 0) S(3, 1) S(3, 2) S(3, 3) S(4, 0) S(4, 1) S(4, 2) S(4, 3) S(5, 0) S(5, 1) S(5, 2) S(5, 3)
#define USED(r, v) ((r) < mr && (v) < nv)
#define MASK(v) ((v) == nv - 1 ? tail : (__mmask16)0xFFFF)
#define LOAD(r, v) __m512 c##r##v = USED(r, v) ? _mm512_maskz_loadu_ps(MASK(v), y + (r) * N + 16 * (v)) : _mm512_setzero_ps();
#define FMA(r, v) if (USED(r, v)) c##r##v = _mm512_fmadd_ps(a##r, w##v, c##r##v);
#define STORE(r, v) if (USED(r, v)) _mm512_mask_storeu_ps(y + (r) * N + 16 * (v), MASK(v), c##r##v);
#define WEIGHT(v) const __m512 w##v = (v) < nv ? _mm512_loadu_ps(p + 16 * (v)) : _mm512_setzero_ps();
#define ROW(r) const __m512 a##r = (r) < mr ? _mm512_set1_ps(x[(r) * K + k]) : _mm512_setzero_ps();

static inline __attribute__((always_inline)) void tile(const float *restrict x, long K, const float *restrict panel,
                                                       float *restrict y, long N, const int mr, const int nv,
                                                       __mmask16 tail) {
    EACH(LOAD)
    for (long k = 0; k < K; k++) {
        const float *p = panel + k * WIDTH;
        WEIGHT(0) WEIGHT(1) WEIGHT(2) WEIGHT(3)
        ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5)
        EACH(FMA)
    }
    EACH(STORE)
}

#define CASE(mr, nv) case (mr) * 8 + (nv): tile(x, K, panel, y, N, mr, nv, tail); break;
static void tiles(const float *x, long K, const float *panel, float *y, long N, int mr, long width) {
    const int nv = (int)((width + 15) / 16);
    const __mmask16 tail = width % 16 ? (__mmask16)((1u << (width % 16)) - 1) : (__mmask16)0xFFFF;
    switch (mr * 8 + nv) {
        CASE(1, 1) CASE(1, 2) CASE(1, 3) CASE(1, 4) CASE(2, 1) CASE(2, 2) CASE(2, 3) CASE(2, 4)
        CASE(3, 1) CASE(3, 2) CASE(3, 3) CASE(3, 4) CASE(4, 1) CASE(4, 2) CASE(4, 3) CASE(4, 4)
        CASE(5, 1) CASE(5, 2) CASE(5, 3) CASE(5, 4) CASE(6, 1) CASE(6, 2) CASE(6, 3) CASE(6, 4)
    }
}
#else
static void tiles(const float *x, long K, const float *panel, float *y, long N, int mr, long width) {
    for (int r = 0; r < mr; r++) {
        float acc[WIDTH];
        for (long c = 0; c < WIDTH; c++)
            acc[c] = c < width ? y[r * N + c] : 0.0f;
        for (long k = 0; k < K; k++) {
            const float a = x[r * K + k], *p = panel + k * WIDTH;
            for (long c = 0; c < WIDTH; c++)
                acc[c] += a * p[c];
        }
        for (long c = 0; c < width; c++)
            y[r * N + c] = acc[c];
    }
}
#endif

int affine(const float *restrict x0, const float *restrict P, const float *restrict b, const float *restrict r,
           float *restrict y, long M, long K, long N, const float *g, const float *beta, float eps) {
    const float *restrict x = normed(x0, M, K, g, beta, eps);
    if (!x)
        return 1;
    for (long m = 0; m < M; m++)
        for (long j = 0; j < N; j++)
            y[m * N + j] = (b ? b[j] : 0.0f) + (r ? r[m * N + j] : 0.0f);
    for (long j = 0; j < N; j += WIDTH) {
        const float *panel = P + (j / WIDTH) * K * WIDTH;
        for (long m = 0; m < M; m += MR)
            tiles(x + m * K, K, panel, y + m * N + j, N, (int)(M - m < MR ? M - m : MR), N - j < WIDTH ? N - j : WIDTH);
    }
    if (x != x0)
        free((void *)x);
    return 0;
}
/* attend: s queries per row and head (the tokens a forward feeds, the last s of its n slots) over
 * the slots before them and their own.  Query i (own slot c = n - s + i) attends slot j <= c when
 * keep marks j (keep NULL: every slot) or, with s > 1, j == c: the lean forward's mask (lean.py).
 * out[b, i, h, :] = sum_j p_j v[b, h, j, :],  p = softmax over attended j of scale * <q, k[b, h, j, :]>
 * q element (b, h, i, d) at b * qb + h * qh + i * qs + d; k, v elements (b, h, j, d) at
 * b * sb + h * sh + j * D + d; keep (B, n) bytes (nonzero = attend); out (B, s, H, D) contiguous;
 * scores: n floats of scratch.  A query with no slot to attend gets NaN (torch's attention returns
 * zeros there; the engine never asks it, and a NaN its checks catch is no silent number); a NaN in q
 * or in an attended slot's k or v reaches the output, a hole is never read.
 * Why vectors: a query's work is n dot products, n exponentials and n scaled rows of v; the scalar
 * exponential dominated.  With AVX-512 (and D a multiple of 16) the exponential runs 16 at a time
 * (exp512: a degree-6 polynomial after range reduction, within a few float32 ulps of expf). */
/* Whether a query whose own slot is `own` attends slot j <= own (the rule above). */
static inline int attended(const unsigned char *restrict kb, long j, long own, long own_always) {
    return !kb || kb[j] || (own_always && j == own);
}

#ifdef __AVX512F__
static inline __m512 exp512(__m512 x) { /* exp(x) for x <= 0; -inf -> 0, NaN -> NaN */
    const __m512 t = _mm512_max_ps(_mm512_set1_ps(-104.0f), x); /* NaN x stays NaN (second operand) */
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(t, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), t);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    const __m512 e = _mm512_scalef_ps(p, n);
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_NEQ_UQ), e);
}

static void attend_query(const float *restrict qi, const float *restrict kh, const float *restrict vh,
                         const unsigned char *restrict kb, float *restrict o, float *restrict scores,
                         long last, long own_always, long D, float scale) {
    float mx = -INFINITY;
    for (long j = 0; j <= last; j++) {
        __m512 acc = _mm512_setzero_ps();
        for (long d = 0; d < D; d += 16)
            acc = _mm512_fmadd_ps(_mm512_loadu_ps(qi + d), _mm512_loadu_ps(kh + j * D + d), acc);
        const float t = attended(kb, j, last, own_always) ? _mm512_reduce_add_ps(acc) * scale : -INFINITY;
        scores[j] = t;
        if (t > mx)
            mx = t;
    }
    const __m512 m = _mm512_set1_ps(mx);
    __m512 tot = _mm512_setzero_ps();
    for (long j = 0; j <= last; j += 16) {
        const __mmask16 lane = last + 1 - j >= 16 ? 0xFFFF : (__mmask16)((1u << (last + 1 - j)) - 1);
        const __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(lane, scores + j), m));
        _mm512_mask_storeu_ps(scores + j, lane, e);
        tot = _mm512_add_ps(tot, _mm512_maskz_mov_ps(lane, e));
    }
    const float total = _mm512_reduce_add_ps(tot);
    for (long d = 0; d < D; d += 16) {
        __m512 a = _mm512_setzero_ps();
        for (long j = 0; j <= last; j++) {
            if (!attended(kb, j, last, own_always))
                continue; /* a hole's value is never read, as in the plain loop */
            a = _mm512_fmadd_ps(_mm512_set1_ps(scores[j]), _mm512_loadu_ps(vh + j * D + d), a);
        }
        _mm512_storeu_ps(o + d, _mm512_mul_ps(a, _mm512_set1_ps(total > 0.0f ? 1.0f / total : NAN)));
    }
}
#endif

static void attend_query_plain(const float *restrict qi, const float *restrict kh, const float *restrict vh,
                               const unsigned char *restrict kb, float *restrict o, float *restrict scores,
                               long last, long own_always, long D, float scale) {
    float mx = -INFINITY;
    for (long j = 0; j <= last; j++) {
        float t = 0.0f;
        for (long d = 0; d < D; d++)
            t += qi[d] * kh[j * D + d];
        scores[j] = t * scale;
        if (attended(kb, j, last, own_always) && scores[j] > mx)
            mx = scores[j];
    }
    for (long d = 0; d < D; d++)
        o[d] = 0.0f;
    float total = 0.0f;
    for (long j = 0; j <= last; j++) {
        if (!attended(kb, j, last, own_always))
            continue;
        const float e = expf(scores[j] - mx);
        total += e;
        for (long d = 0; d < D; d++)
            o[d] += e * vh[j * D + d];
    }
    const float inv = total > 0.0f ? 1.0f / total : NAN;
    for (long d = 0; d < D; d++)
        o[d] *= inv;
}

void attend(const float *restrict q, const float *restrict k, const float *restrict v,
            const unsigned char *restrict keep, float *restrict out, float *restrict scores,
            long B, long H, long s, long n, long D, long qb, long qh, long qs, long sb, long sh, float scale) {
    for (long b = 0; b < B; b++) {
        const unsigned char *kb = keep ? keep + b * n : 0;
        for (long h = 0; h < H; h++) {
            const float *kh = k + b * sb + h * sh, *vh = v + b * sb + h * sh;
            for (long i = 0; i < s; i++) {
                const float *qi = q + b * qb + h * qh + i * qs;
                const long own = n - s + i;
                float *o = out + ((b * s + i) * H + h) * D;
#ifdef __AVX512F__
                if (D % 16 == 0) {
                    attend_query(qi, kh, vh, kb, o, scores, own, s > 1, D, scale);
                    continue;
                }
#endif
                attend_query_plain(qi, kh, vh, kb, o, scores, own, s > 1, D, scale);
            }
        }
    }
}
