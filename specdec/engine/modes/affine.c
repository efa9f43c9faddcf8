/* The lean forward's matrix products on a CPU, few rows at a time (`specdec.engine.modes.kernel`).
 *
 * affine:   y[m, :] = b + n(x[m, :]) @ W (+ r[m, :])   W (K, N) row-major: a GPT-2 Conv1D weight
 * affine_t: y[m, :] = n(x[m, :]) @ Wt^T (+ b)          Wt (N, K) row-major: the tied head, wte
 * n is the identity, or with g given the layer norm (x - mean) / sqrt(var + eps) * g + beta of the row
 * (biased variance, as torch's layer_norm) that precedes every GPT-2 product but the projections.
 *
 * Why: at one to a few rows a product reads every weight once for little arithmetic, so its speed is
 * how fast the weights stream from memory.  `affine` walks W in blocks of ROWS consecutive rows (one
 * contiguous stretch of memory), keeps each output row's running sums in L1 and asks for the next block
 * while it reads this one; every weight is read once whatever M is.  Sums are taken in another order
 * than a BLAS takes them: the same products to float32 rounding.  Single-threaded; the caller checks
 * shapes, dtypes and contiguity (x (M, K), y (M, N), b (N), r (M, N) or NULL, b NULL only in affine_t,
 * g and beta (K) or NULL).
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

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

#define ROWS 16

int affine(const float *restrict x0, const float *restrict W, const float *restrict b, const float *restrict r,
           float *restrict y, long M, long K, long N, const float *g, const float *beta, float eps) {
    const float *restrict x = normed(x0, M, K, g, beta, eps);
    if (!x)
        return 1;
    for (long m = 0; m < M; m++)
        for (long j = 0; j < N; j++)
            y[m * N + j] = b[j] + (r ? r[m * N + j] : 0.0f);
    long k = 0;
    for (; k + ROWS <= K; k += ROWS) {
        const float *w = W + k * N;
        for (long p = 0; p < ROWS * N; p += 16)
            __builtin_prefetch(w + ROWS * N + p, 0, 0);  /* the next block; past the end is harmless */
        for (long m = 0; m < M; m++) {
            float a[ROWS];
            for (int i = 0; i < ROWS; i++)
                a[i] = x[m * K + k + i];
            float *restrict ym = y + m * N;
            for (long j = 0; j < N; j++) {
                float s = ym[j];
                for (int i = 0; i < ROWS; i++)
                    s += a[i] * w[i * N + j];
                ym[j] = s;
            }
        }
    }
    for (; k < K; k++) {
        const float *w = W + k * N;
        for (long m = 0; m < M; m++) {
            const float a = x[m * K + k];
            float *restrict ym = y + m * N;
            for (long j = 0; j < N; j++)
                ym[j] += a * w[j];
        }
    }
    if (x != x0)
        free((void *)x);
    return 0;
}

int affine_t(const float *restrict x0, const float *restrict Wt, const float *restrict b, float *restrict y,
             long M, long K, long N, const float *g, const float *beta, float eps) {
    const float *restrict x = normed(x0, M, K, g, beta, eps);
    if (!x)
        return 1;
    for (long n = 0; n < N; n++) {
        const float *w = Wt + n * K;
        for (long m = 0; m < M; m++) {
            const float *xm = x + m * K;
            float s = 0.0f;
            for (long k = 0; k < K; k++)
                s += xm[k] * w[k];
            y[m * N + n] = s + (b ? b[n] : 0.0f);
        }
    }
    if (x != x0)
        free((void *)x);
    return 0;
}

/* attend1: one query per row and head (a decoding step's single fed token) over n cached slots.
 * out[b, h, :] = sum_j p_j v[b, h, j, :],  p = softmax over kept j of scale * <q[b, h, :], k[b, h, j, :]>
 * q (B, H, D) at q + b * qb + h * D; k, v elements (b, h, j, d) at b * sb + h * sh + j * D + d; keep (B, n)
 * bytes (nonzero = attend) or NULL (every slot); out (B, H, D) contiguous; scores: n floats of scratch.
 * A row with no kept slot gets NaN, as a softmax over nothing would. */
void attend1(const float *restrict q, const float *restrict k, const float *restrict v,
             const unsigned char *restrict keep, float *restrict out, float *restrict scores,
             long B, long H, long n, long D, long qb, long sb, long sh, float scale) {
    for (long b = 0; b < B; b++) {
        for (long h = 0; h < H; h++) {
            const float *qh = q + b * qb + h * D, *kh = k + b * sb + h * sh, *vh = v + b * sb + h * sh;
            const unsigned char *kb = keep ? keep + b * n : 0;
            float *o = out + (b * H + h) * D;
            float mx = -INFINITY;
            for (long j = 0; j < n; j++) {
                float s = 0.0f;
                for (long d = 0; d < D; d++)
                    s += qh[d] * kh[j * D + d];
                scores[j] = s * scale;
                if ((!kb || kb[j]) && scores[j] > mx)
                    mx = scores[j];
            }
            for (long d = 0; d < D; d++)
                o[d] = 0.0f;
            float total = 0.0f;
            for (long j = 0; j < n; j++) {
                if (kb && !kb[j])
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
    }
}
