/* Passes over model-sized vectors that the coordinator's server halves would otherwise make in several torch
 * calls, each as one loop (edgesync/model_passes.py wraps them and falls back to torch where this is not built).
 *
 * Why C: the coordinator meets these vectors from memory (a training step or a socket read has pushed them out
 * of the caches since), and on a machine whose per-core cache holds two model-sized vectors but not three, every
 * torch call that writes a new vector beside two it reads runs from the next level down. The staleness gap
 * ‖θ − θ_sent‖ took a temporary and two passes; a round's close took five (the float64 mean, its float32
 * copy, θ + ε·mean). Here each is a single pass that reads every input once (docs/benchmarks.md, "The
 * coordinator against its floor").
 *
 * Every function takes tensors' addresses (`t.data_ptr()`) and numel; the Python wrapper checks that each is a
 * contiguous CPU tensor of the dtype named here and keeps it alive during the call. `out` may be one of the
 * inputs (an in-place pass). Built with -ffp-contract=off: `x + a*y` is rounded twice, as written, on every
 * machine (no fused multiply-add where one machine has it and another not). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Each pass is compiled twice, for AVX2 and for the processor's baseline, and the loader picks the one this processor
 * runs (target_clones, where the platform resolves them: x86-64 Linux with glibc): the AVX2 copy widens the float64
 * partial sums and the elementwise loops, and took ASGD's step from 212-225 µs to 128-148 on this machine
 * (benchmarks/coordinator_floor.py's conditions). The same bits either way: no fused multiply-add, and each sum's
 * order is fixed by LANES, not by the vector width. Helpers are inlined into each copy. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) && (defined(__GNUC__) || defined(__clang__))
#define CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CLONES
#endif
#define HELPER static inline __attribute__((always_inline))

#define RELEASE_GIL_BYTES (256 * 1024) /* smaller loops take less time than handing the GIL over */
#define LANES 8                         /* partial sums: a fixed order (the same bits every run), and room to vectorise */

/* Each pass goes over its vectors a block at a time: the block's squared distance first, then its elementwise
 * step, each a simple loop the compiler vectorises (one loop doing both did not: it ran 3x slower from cache),
 * while the block, in the L1 cache, is read from memory once. */
#define BLOCK 2048

/* Σ (a_i − b_i)² in double, a and b float32; b NULL: Σ a_i². */
HELPER double sq_dist_f32(const float *a, const float *b, Py_ssize_t n) {
    double part[LANES] = {0};
    Py_ssize_t i = 0;
    if (b != NULL) {
        for (; i + LANES <= n; i += LANES)
            for (int j = 0; j < LANES; j++) {
                double d = (double)a[i + j] - (double)b[i + j];
                part[j] += d * d;
            }
    } else {
        for (; i + LANES <= n; i += LANES)
            for (int j = 0; j < LANES; j++) {
                double d = (double)a[i + j];
                part[j] += d * d;
            }
    }
    double total = 0;
    for (; i < n; i++) {
        double d = (double)a[i] - (b != NULL ? (double)b[i] : 0.0);
        total += d * d;
    }
    for (int j = 0; j < LANES; j++)
        total += part[j];
    return total;
}

#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* Σ (a_i − b_i)² block by block, summed in the order every fused pass below sums its gap: the same bits whichever
 * pass measured it. */
CLONES static double sq_dist_blocked(const float *a, const float *b, Py_ssize_t n) {
    double total = 0;
    for (Py_ssize_t k = 0; k < n; k += BLOCK)
        total += sq_dist_f32(a + k, b + k, MIN(BLOCK, n - k));
    return total;
}

/* out = scale·x + alpha·y (float32; scale 1 is x itself, to the bit: ASGD's θ − η·g; FedAsync's (1 − α)·θ + α·x),
 * and, when a and b are given, Σ (a_i − b_i)² read in the same pass (each block's before its out is written: out may
 * be a). */
CLONES static double step_f32(float *out, const float *x, const float *y, float scale, float alpha, const float *a,
                       const float *b, Py_ssize_t n) {
    double total = 0;
    for (Py_ssize_t k = 0; k < n; k += BLOCK) {
        Py_ssize_t m = MIN(BLOCK, n - k);
        if (a != NULL)
            total += sq_dist_f32(a + k, b + k, m);
        float *o = out + k;
        const float *xk = x + k, *yk = y + k;
        if (scale == 1.0f)
            for (Py_ssize_t i = 0; i < m; i++)
                o[i] = xk[i] + alpha * yk[i];
        else
            for (Py_ssize_t i = 0; i < m; i++)
                o[i] = xk[i] * scale + alpha * yk[i];
    }
    return total;
}

/* The round's float64 running sum: sum = w·x when first (sum's old values unread), else sum + w·x. */
CLONES static void accumulate_f64(double *sum, const float *x, double w, int first, Py_ssize_t n) {
    if (first)
        for (Py_ssize_t i = 0; i < n; i++)
            sum[i] = (double)x[i] * w;
    else
        for (Py_ssize_t i = 0; i < n; i++)
            sum[i] += w * (double)x[i];
}

/* The round's mean rounded to float32 once, m = (float)(sum / divisor · multiplier); out = m, or, with theta,
 * out = theta + eps·m (the mean applied as θ + ε·mean, never stored). */
CLONES static void mean_f32(float *out, const double *sum, double divisor, double multiplier, const float *theta, float eps,
                     Py_ssize_t n) {
    if (theta == NULL)
        for (Py_ssize_t i = 0; i < n; i++)
            out[i] = (float)(sum[i] / divisor * multiplier);
    else
        for (Py_ssize_t i = 0; i < n; i++) {
            float m = (float)(sum[i] / divisor * multiplier);
            out[i] = theta[i] + eps * m;
        }
}

/* Momentum: v_out = mu·v + b·g; theta_out = theta + c·v_out (SSGD's velocity and FedAvgM's server momentum with
 * b = 1, NAG/Multi-ASGD's u ← γ·u + η·g with c = −1); Σ (theta − sent)² read in the pass when sent is given. */
CLONES static double momentum_f32(float *theta_out, float *v_out, const float *theta, const float *v, const float *g, float mu,
                           float b, float c, const float *sent, Py_ssize_t n) {
    double total = 0;
    for (Py_ssize_t k = 0; k < n; k += BLOCK) {
        Py_ssize_t m = MIN(BLOCK, n - k);
        if (sent != NULL)
            total += sq_dist_f32(theta + k, sent + k, m);
        for (Py_ssize_t i = k; i < k + m; i++) {
            float vi = mu * v[i] + b * g[i];
            v_out[i] = vi;
            theta_out[i] = theta[i] + c * vi;
        }
    }
    return total;
}

/* torch.lerp's formula for a scalar weight (ATen's lerp: the small-weight form below 0.5, exact at both ends). */
HELPER void lerp_block(float *out, const float *start, const float *end, float w, Py_ssize_t m) {
    if (w < 0.5f)
        for (Py_ssize_t i = 0; i < m; i++)
            out[i] = start[i] + w * (end[i] - start[i]);
    else
        for (Py_ssize_t i = 0; i < m; i++)
            out[i] = end[i] - (end[i] - start[i]) * (1.0f - w);
}

/* As momentum_f32, with a running sum of every key's velocity kept beside it (DANA's Σ_j u_j): sum_out = sum +
 * (v_out − v), the difference rounded first as momentum_asgd.Velocities.push rounds it. */
CLONES static double momentum_sum_f32(float *theta_out, float *v_out, float *sum_out, const float *theta, const float *v,
                               const float *g, const float *sum, float mu, float b, float c, const float *sent,
                               Py_ssize_t n) {
    double total = 0;
    for (Py_ssize_t k = 0; k < n; k += BLOCK) {
        Py_ssize_t m = MIN(BLOCK, n - k);
        if (sent != NULL)
            total += sq_dist_f32(theta + k, sent + k, m);
        for (Py_ssize_t i = k; i < k + m; i++) {
            float vi = mu * v[i] + b * g[i];
            sum_out[i] = sum[i] + (vi - v[i]);
            v_out[i] = vi;
            theta_out[i] = theta[i] + c * vi;
        }
    }
    return total;
}

/* theta_out = lerp(theta, x, w) (EASGD's elastic pull); delta_out, when given, = theta_out − theta (the step θ̃ took);
 * out[0] = Σ (theta − sent)² when sent is given, out[1] = Σ delta². */
CLONES static void lerp_f32(float *theta_out, float *delta_out, const float *theta, const float *x, float w, const float *sent,
                     double *out, Py_ssize_t n) {
    out[0] = out[1] = 0;
    for (Py_ssize_t k = 0; k < n; k += BLOCK) {
        Py_ssize_t m = MIN(BLOCK, n - k);
        if (sent != NULL)
            out[0] += sq_dist_f32(theta + k, sent + k, m);
        lerp_block(theta_out + k, theta + k, x + k, w, m);
        if (delta_out != NULL) {
            for (Py_ssize_t i = k; i < k + m; i++)
                delta_out[i] = theta_out[i] - theta[i];
            out[1] += sq_dist_f32(delta_out + k, NULL, m);
        }
    }
}

/* FedAdam / FedYogi / FedAdagrad (kind 0 / 1 / 2): m_out = m·beta1 + (1 − beta1)·d; v_out by the kind's rule;
 * x_out = x + lr·(m_out / (√v_out + tau)), each operation rounded where torch's (fed_adaptive.py) rounds it; 1 − beta
 * is given as the caller computes it in double (1.0f − beta in float is not always the same float). */
CLONES static void adaptive_f32(float *x_out, float *m_out, float *v_out, const float *x, const float *m, const float *v,
                         const float *d, float beta1, float one_minus_b1, float beta2, float one_minus_b2, float tau,
                         float lr, int kind, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        m_out[i] = m[i] * beta1 + one_minus_b1 * d[i];
    if (kind == 0)
        for (Py_ssize_t i = 0; i < n; i++)
            v_out[i] = v[i] * beta2 + one_minus_b2 * d[i] * d[i];
    else if (kind == 1)
        for (Py_ssize_t i = 0; i < n; i++) {
            float d2 = d[i] * d[i], diff = v[i] - d2;
            float sign = (float)((diff > 0.0f) - (diff < 0.0f));
            v_out[i] = v[i] + -one_minus_b2 * d2 * sign;
        }
    else
        for (Py_ssize_t i = 0; i < n; i++)
            v_out[i] = v[i] + d[i] * d[i];
    for (Py_ssize_t i = 0; i < n; i++)
        x_out[i] = x[i] + lr * (m_out[i] / (sqrtf(v_out[i]) + tau));
}

/* SHAT's master and its mirror of the client's model (shat.py): theta_out = theta + a·g, the mirror's own step
 * s = mirror + b·g, mirror_out = lerp(s, theta_out, mix) (mix ≤ 0: s; mirror_out NULL: the caller keeps theta_out
 * itself, mix ≥ 1); Σ (theta − mirror)² read in the pass. */
CLONES static double mirrored_f32(float *theta_out, float *mirror_out, const float *theta, const float *mirror, const float *g,
                           float a, float b, float mix, Py_ssize_t n) {
    double total = 0;
    for (Py_ssize_t k = 0; k < n; k += BLOCK) {
        Py_ssize_t m = MIN(BLOCK, n - k);
        total += sq_dist_f32(theta + k, mirror + k, m);
        if (mirror_out != NULL) {
            for (Py_ssize_t i = k; i < k + m; i++)
                mirror_out[i] = mirror[i] + b * g[i];
            for (Py_ssize_t i = k; i < k + m; i++)
                theta_out[i] = theta[i] + a * g[i];
            if (mix > 0.0f)
                lerp_block(mirror_out + k, mirror_out + k, theta_out + k, mix, m);
        } else {
            for (Py_ssize_t i = k; i < k + m; i++)
                theta_out[i] = theta[i] + a * g[i];
        }
    }
    return total;
}

/* DC-ASGD's and DANA-DC's compensated gradient (momentum_asgd.delay_compensate): out = g + lam·(g⊙g)⊙(theta − sent),
 * each operation rounded as torch's mul, sub and addcmul round it; Σ (theta − sent)² (the gap) read in the pass. */
CLONES static double delay_compensated_f32(float *out, const float *g, const float *theta, const float *sent, float lam,
                                    Py_ssize_t n) {
    double total = 0;
    for (Py_ssize_t k = 0; k < n; k += BLOCK) {
        Py_ssize_t m = MIN(BLOCK, n - k);
        total += sq_dist_f32(theta + k, sent + k, m);
        for (Py_ssize_t i = k; i < k + m; i++) {
            float drift = theta[i] - sent[i], gg = g[i] * g[i];
            out[i] = g[i] + lam * gg * drift;
        }
    }
    return total;
}

/* A vector of float32 pairs split into its two halves: a[i] = pairs[2i], b[i] = pairs[2i + 1] (SCAFFOLD's update). */
CLONES static void split_pairs_f32(float *a, float *b, const float *pairs, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        a[i] = pairs[2 * i];
        b[i] = pairs[2 * i + 1];
    }
}

/* The DGS family's master step (dgs.DGSServer, Alg. 2): m_out = m − the update's entries (idx ascending and unique:
 * each block's entries are subtracted once its copy is written, rounded as torch's index_add with alpha −1 rounds
 * them), Σ (m − v)² (the gap, before the update) read in the same pass, and G = m_out − v's nonzero entries written to
 * where/values (room for n each; the count is returned). A value that is not 0 (NaN is not) is an entry of G. */
CLONES static Py_ssize_t sparse_difference_f32(float *m_out, const float *m, const float *v, const int64_t *idx,
                                        const float *val, Py_ssize_t nnz, int64_t *where, float *values,
                                        Py_ssize_t n, double *sq) {
    double total = 0;
    Py_ssize_t j = 0, count = 0;
    for (Py_ssize_t k = 0; k < n; k += BLOCK) {
        Py_ssize_t mb = MIN(BLOCK, n - k);
        total += sq_dist_f32(m + k, v + k, mb);
        memcpy(m_out + k, m + k, mb * sizeof(float));
        for (; j < nnz && idx[j] < k + mb; j++)
            m_out[idx[j]] = m_out[idx[j]] + (-val[j]);
        const float *o = m_out + k, *vk = v + k;
        for (Py_ssize_t i = 0; i < mb; i++) { /* no branch: written always, kept when not 0 (a test that skipped
                                                * chunks of 16 without an entry ran slower: most hold one) */
            float g = o[i] - vk[i];
            where[count] = k + i;
            values[count] = g;
            count += (g != 0.0f);
        }
    }
    *sq = total;
    return count;
}

/* The address arguments p[0..count): ints (0 for none) into a[0..count). Returns 0, or -1 with an exception. */
static int addresses(PyObject **p, void **a, int count) {
    for (int k = 0; k < count; k++) {
        a[k] = PyLong_AsVoidPtr(p[k]);
        if (PyErr_Occurred())
            return -1;
    }
    return 0;
}

/* sq_dist(a, b, numel) -> Σ (a − b)² of two float32 vectors. */
static PyObject *sq_dist(PyObject *self, PyObject *args) {
    PyObject *p[2];
    void *a[2];
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOn", &p[0], &p[1], &n) || addresses(p, a, 2) < 0)
        return NULL;
    double total;
    if (n * 8 >= RELEASE_GIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        total = sq_dist_blocked(a[0], a[1], n);
        Py_END_ALLOW_THREADS
    } else {
        total = sq_dist_blocked(a[0], a[1], n);
    }
    return PyFloat_FromDouble(total);
}

/* step(out, x, y, scale, alpha, a, b, numel) -> out = scale·x + alpha·y; returns Σ (a − b)² (0.0 when a is 0). */
static PyObject *step(PyObject *self, PyObject *args) {
    PyObject *p[5];
    void *a[5];
    double scale, alpha;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOOddOOn", &p[0], &p[1], &p[2], &scale, &alpha, &p[3], &p[4], &n) ||
        addresses(p, a, 5) < 0)
        return NULL;
    double total;
    Py_BEGIN_ALLOW_THREADS
    total = step_f32(a[0], a[1], a[2], (float)scale, (float)alpha, a[3], a[4], n);
    Py_END_ALLOW_THREADS
    return PyFloat_FromDouble(total);
}

/* accumulate(sum, x, w, first, numel): sum (float64) = w·x if first else sum + w·x, x float32. */
static PyObject *accumulate(PyObject *self, PyObject *args) {
    PyObject *p[2];
    void *a[2];
    double w;
    int first;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOdpn", &p[0], &p[1], &w, &first, &n) || addresses(p, a, 2) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    accumulate_f64(a[0], a[1], w, first, n);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* mean(out, sum, divisor, multiplier, theta, eps, numel): out = (float)(sum / divisor · multiplier), or
 * theta + eps·that when theta is not 0. */
static PyObject *mean(PyObject *self, PyObject *args) {
    PyObject *p[3];
    void *a[3];
    double divisor, multiplier, eps;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOddOdn", &p[0], &p[1], &divisor, &multiplier, &p[2], &eps, &n) ||
        addresses(p, a, 3) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    mean_f32(a[0], a[1], divisor, multiplier, a[2], (float)eps, n);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* momentum(theta_out, v_out, theta, v, g, mu, b, c, sent, numel) -> Σ (theta − sent)² (0.0 when sent is 0). */
static PyObject *momentum(PyObject *self, PyObject *args) {
    PyObject *p[6];
    void *a[6];
    double mu, b, c;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOOOOdddOn", &p[0], &p[1], &p[2], &p[3], &p[4], &mu, &b, &c, &p[5], &n) ||
        addresses(p, a, 6) < 0)
        return NULL;
    double total;
    Py_BEGIN_ALLOW_THREADS
    total = momentum_f32(a[0], a[1], a[2], a[3], a[4], (float)mu, (float)b, (float)c, a[5], n);
    Py_END_ALLOW_THREADS
    return PyFloat_FromDouble(total);
}

/* momentum_sum(theta_out, v_out, sum_out, theta, v, g, sum, mu, b, c, sent, numel) -> Σ (theta − sent)² (0.0 when sent
 * is 0). */
static PyObject *momentum_sum(PyObject *self, PyObject *args) {
    PyObject *p[8];
    void *a[8];
    double mu, b, c;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOOOOOOdddOn", &p[0], &p[1], &p[2], &p[3], &p[4], &p[5], &p[6], &mu, &b, &c, &p[7],
                          &n) || addresses(p, a, 8) < 0)
        return NULL;
    double total;
    Py_BEGIN_ALLOW_THREADS
    total = momentum_sum_f32(a[0], a[1], a[2], a[3], a[4], a[5], a[6], (float)mu, (float)b, (float)c, a[7], n);
    Py_END_ALLOW_THREADS
    return PyFloat_FromDouble(total);
}

/* lerp(theta_out, delta_out, theta, x, w, sent, numel) -> (Σ (theta − sent)², Σ delta²); delta_out and sent may be 0. */
static PyObject *lerp(PyObject *self, PyObject *args) {
    PyObject *p[5];
    void *a[5];
    double w;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOOOdOn", &p[0], &p[1], &p[2], &p[3], &w, &p[4], &n) || addresses(p, a, 5) < 0)
        return NULL;
    double out[2];
    Py_BEGIN_ALLOW_THREADS
    lerp_f32(a[0], a[1], a[2], a[3], (float)w, a[4], out, n);
    Py_END_ALLOW_THREADS
    return Py_BuildValue("(dd)", out[0], out[1]);
}

/* adaptive(x_out, m_out, v_out, x, m, v, d, beta1, 1 − beta1, beta2, 1 − beta2, tau, lr, kind, numel). */
static PyObject *adaptive(PyObject *self, PyObject *args) {
    PyObject *p[7];
    void *a[7];
    double beta1, omb1, beta2, omb2, tau, lr;
    int kind;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOOOOOOddddddin", &p[0], &p[1], &p[2], &p[3], &p[4], &p[5], &p[6], &beta1, &omb1, &beta2,
                          &omb2, &tau, &lr, &kind, &n) || addresses(p, a, 7) < 0)
        return NULL;
    if (kind < 0 || kind > 2) {
        PyErr_Format(PyExc_ValueError, "kind %d: expected 0 (adam), 1 (yogi) or 2 (adagrad)", kind);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    adaptive_f32(a[0], a[1], a[2], a[3], a[4], a[5], a[6], (float)beta1, (float)omb1, (float)beta2, (float)omb2, (float)tau,
                 (float)lr, kind, n);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* mirrored(theta_out, mirror_out, theta, mirror, g, a, b, mix, numel) -> Σ (theta − mirror)²; mirror_out may be 0. */
static PyObject *mirrored(PyObject *self, PyObject *args) {
    PyObject *p[5];
    void *a[5];
    double sa, sb, mix;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOOOOdddn", &p[0], &p[1], &p[2], &p[3], &p[4], &sa, &sb, &mix, &n) ||
        addresses(p, a, 5) < 0)
        return NULL;
    double total;
    Py_BEGIN_ALLOW_THREADS
    total = mirrored_f32(a[0], a[1], a[2], a[3], a[4], (float)sa, (float)sb, (float)mix, n);
    Py_END_ALLOW_THREADS
    return PyFloat_FromDouble(total);
}

/* delay_compensated(out, g, theta, sent, lam, numel) -> Σ (theta − sent)²; out = g + lam·g⊙g⊙(theta − sent). */
static PyObject *delay_compensated(PyObject *self, PyObject *args) {
    PyObject *p[4];
    void *a[4];
    double lam;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOOOdn", &p[0], &p[1], &p[2], &p[3], &lam, &n) || addresses(p, a, 4) < 0)
        return NULL;
    double total;
    Py_BEGIN_ALLOW_THREADS
    total = delay_compensated_f32(a[0], a[1], a[2], a[3], (float)lam, n);
    Py_END_ALLOW_THREADS
    return PyFloat_FromDouble(total);
}

/* split_pairs(a, b, pairs, numel): numel pairs of float32 into a and b. */
static PyObject *split_pairs(PyObject *self, PyObject *args) {
    PyObject *p[3];
    void *a[3];
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOOn", &p[0], &p[1], &p[2], &n) || addresses(p, a, 3) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    split_pairs_f32(a[0], a[1], a[2], n);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* sparse_difference(m_out, m, v, idx, val, nnz, where, values, numel) -> (count of G's entries, Σ (m − v)²); idx
 * must be ascending and unique (checked here: -1 and no change when it is not). */
static PyObject *sparse_difference(PyObject *self, PyObject *args) {
    PyObject *p[7];
    void *a[7];
    Py_ssize_t nnz, n;
    if (!PyArg_ParseTuple(args, "OOOOOnOOn", &p[0], &p[1], &p[2], &p[3], &p[4], &nnz, &p[5], &p[6], &n) ||
        addresses(p, a, 7) < 0)
        return NULL;
    const int64_t *idx = a[3];
    for (Py_ssize_t j = 0; j < nnz; j++)
        if (idx[j] < 0 || idx[j] >= n || (j > 0 && idx[j] <= idx[j - 1]))
            return Py_BuildValue("nd", (Py_ssize_t)-1, 0.0);
    double total = 0;
    Py_ssize_t count;
    Py_BEGIN_ALLOW_THREADS
    count = sparse_difference_f32(a[0], a[1], a[2], idx, a[4], nnz, a[5], a[6], n, &total);
    Py_END_ALLOW_THREADS
    return Py_BuildValue("nd", count, total);
}

static PyMethodDef methods[] = {
    {"sq_dist", sq_dist, METH_VARARGS, "Sum of squared differences of two float32 vectors at addresses."},
    {"step", step, METH_VARARGS, "out = scale*x + alpha*y over float32 vectors, with a squared distance in the pass."},
    {"accumulate", accumulate, METH_VARARGS, "A float64 running sum plus w times a float32 vector."},
    {"mean", mean, METH_VARARGS, "A float64 sum's mean rounded to float32, optionally applied as theta + eps*mean."},
    {"momentum", momentum, METH_VARARGS, "v' = mu*v + b*g and theta' = theta + c*v' in one pass, with a gap."},
    {"delay_compensated", delay_compensated, METH_VARARGS, "DC-ASGD's compensated gradient and the gap, one pass."},
    {"sparse_difference", sparse_difference, METH_VARARGS, "DGS's master step, its gap and G's entries, one pass."},
    {"split_pairs", split_pairs, METH_VARARGS, "A vector of float32 pairs into its two halves, one pass."},
    {"momentum_sum", momentum_sum, METH_VARARGS, "momentum with a running sum of the velocities, one pass."},
    {"lerp", lerp, METH_VARARGS, "theta' = lerp(theta, x, w), its step and a gap in one pass."},
    {"adaptive", adaptive, METH_VARARGS, "FedAdam/FedYogi/FedAdagrad's m, v and x in one pass."},
    {"mirrored", mirrored, METH_VARARGS, "SHAT's step and its mirror's, with their squared distance, in one pass."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_model_passes",
                                    "Single passes over model-sized vectors for the coordinator's server halves.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__model_passes(void) { return PyModule_Create(&module); }
