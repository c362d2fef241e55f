/* The two checks every received update goes through, as one pass of C each over a tensor's memory
 * (edgesync/buffer_checks.py wraps them; it falls back to torch where this is not built).
 *
 * Why C: a sparse update of the DGS family is about 15 KB. Checking it with torch takes three or four calls
 * (aminmax, sum, item, ...), and a coordinator meets each of them cold, its code pushed out of the CPU's
 * caches by the training step or the socket read in between: each such call costs more than copying the
 * whole message. One small C loop per check does not (docs/benchmarks.md, "The coordinator against its floor").
 *
 * Each takes a buffer (a received frame) or a CPU tensor's address and length (`t.data_ptr()`, `t.numel()`); for
 * the latter the Python wrapper checks that the tensor is a contiguous CPU tensor of the dtype it names and keeps
 * it alive during the call. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Compiled for AVX2 beside the baseline where the platform resolves target_clones (x86-64 Linux with glibc): the
 * loader picks the processor's copy (as _model_passes.c). Counts and bounds are integers: the same answer either way. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) && (defined(__GNUC__) || defined(__clang__))
#define CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CLONES
#endif

#define RELEASE_GIL_BYTES (256 * 1024) /* smaller loops take less time than handing the GIL over */

/* Values whose exponent bits are all ones are Inf or NaN, in every IEEE format. Loads go through memcpy:
 * a zmq frame's memory need not be aligned to the element size. */
#define COUNT_NONFINITE(TYPE, MASK)                                  \
    CLONES static Py_ssize_t nonfinite_##TYPE(const char *p, Py_ssize_t n) { \
        Py_ssize_t bad = 0;                                            \
        for (Py_ssize_t i = 0; i < n; i++) {                           \
            TYPE bits;                                                 \
            memcpy(&bits, p + i * (Py_ssize_t)sizeof(TYPE), sizeof(TYPE)); \
            bad += (bits & MASK) == MASK;                              \
        }                                                              \
        return bad;                                                    \
    }
COUNT_NONFINITE(uint16_t, 0x7c00u)              /* float16 */
COUNT_NONFINITE(uint32_t, 0x7f800000u)          /* float32 */
COUNT_NONFINITE(uint64_t, 0x7ff0000000000000ull) /* float64 */

CLONES static Py_ssize_t nonfinite_bfloat16(const char *p, Py_ssize_t n) {
    Py_ssize_t bad = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint16_t bits;
        memcpy(&bits, p + 2 * i, 2);
        bad += (bits & 0x7f80u) == 0x7f80u;
    }
    return bad;
}

#define MIN_MAX(TYPE)                                                          \
    CLONES static void min_max_##TYPE(const char *p, Py_ssize_t n, int64_t *lo, int64_t *hi) { \
        TYPE low, high;                                                        \
        memcpy(&low, p, sizeof(TYPE));                                         \
        high = low;                                                            \
        for (Py_ssize_t i = 1; i < n; i++) {                                   \
            TYPE v;                                                            \
            memcpy(&v, p + i * (Py_ssize_t)sizeof(TYPE), sizeof(TYPE));       \
            low = v < low ? v : low;                                           \
            high = v > high ? v : high;                                        \
        }                                                                      \
        *lo = (int64_t)low;                                                    \
        *hi = (int64_t)high;                                                   \
    }
MIN_MAX(int32_t)
MIN_MAX(int64_t)

/* Where the values are: a buffer (a received frame: bytes, memoryview), its length in bytes divided by `item`
 * giving numel; or an address (a tensor's `data_ptr()`) with numel given. Returns 0, or -1 with an exception. */
typedef struct {
    const char *p;
    Py_ssize_t n;
    Py_buffer view; /* held while p points into it; view.obj is NULL for an address */
} Source;

static int open_source(PyObject *where, PyObject *numel, Py_ssize_t item, Source *src) {
    src->view.obj = NULL;
    if (PyLong_Check(where)) {
        if (numel == Py_None) {
            PyErr_SetString(PyExc_TypeError, "an address needs numel");
            return -1;
        }
        src->p = (const char *)PyLong_AsVoidPtr(where);
        src->n = PyLong_AsSsize_t(numel);
        if (PyErr_Occurred())
            return -1;
    } else {
        if (PyObject_GetBuffer(where, &src->view, PyBUF_SIMPLE) < 0)
            return -1;
        src->p = (const char *)src->view.buf;
        src->n = src->view.len / item;
        if (src->view.len % item != 0) {
            PyErr_Format(PyExc_ValueError, "%zd bytes are not a whole number of %zd-byte values", src->view.len, item);
            PyBuffer_Release(&src->view);
            return -1;
        }
    }
    if (src->n < 0) {
        PyErr_SetString(PyExc_ValueError, "numel must be >= 0");
        if (src->view.obj) PyBuffer_Release(&src->view);
        return -1;
    }
    return 0;
}

static void close_source(Source *src) {
    if (src->view.obj)
        PyBuffer_Release(&src->view);
}

/* count_nonfinite(source, kind, numel=None): how many values are NaN or ±Inf; kind is "float16", "bfloat16",
 * "float32" or "float64"; source a buffer, or an address with numel. */
static PyObject *count_nonfinite(PyObject *self, PyObject *args) {
    PyObject *where, *numel = Py_None;
    const char *kind;
    if (!PyArg_ParseTuple(args, "Os|O", &where, &kind, &numel))
        return NULL;
    Py_ssize_t (*count)(const char *, Py_ssize_t);
    Py_ssize_t item;
    if (strcmp(kind, "float32") == 0) {
        count = nonfinite_uint32_t; item = 4;
    } else if (strcmp(kind, "float16") == 0) {
        count = nonfinite_uint16_t; item = 2;
    } else if (strcmp(kind, "bfloat16") == 0) {
        count = nonfinite_bfloat16; item = 2;
    } else if (strcmp(kind, "float64") == 0) {
        count = nonfinite_uint64_t; item = 8;
    } else {
        PyErr_Format(PyExc_ValueError, "kind %s: expected float16, bfloat16, float32 or float64", kind);
        return NULL;
    }
    Source src;
    if (open_source(where, numel, item, &src) < 0)
        return NULL;
    Py_ssize_t bad = 0;
    if (src.n * item >= RELEASE_GIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        bad = count(src.p, src.n);
        Py_END_ALLOW_THREADS
    } else if (src.n > 0) {
        bad = count(src.p, src.n);
    }
    close_source(&src);
    return PyLong_FromSsize_t(bad);
}

/* index_range(source, kind, numel=None): (smallest, largest) of one or more indices; kind is "int32" or
 * "int64"; source a buffer, or an address with numel. */
static PyObject *index_range(PyObject *self, PyObject *args) {
    PyObject *where, *numel = Py_None;
    const char *kind;
    if (!PyArg_ParseTuple(args, "Os|O", &where, &kind, &numel))
        return NULL;
    int wide = strcmp(kind, "int64") == 0;
    if (!wide && strcmp(kind, "int32") != 0) {
        PyErr_Format(PyExc_ValueError, "kind %s: expected int32 or int64", kind);
        return NULL;
    }
    Source src;
    if (open_source(where, numel, wide ? 8 : 4, &src) < 0)
        return NULL;
    if (src.n == 0) {
        close_source(&src);
        PyErr_SetString(PyExc_ValueError, "index_range needs at least one index");
        return NULL;
    }
    int64_t low, high;
    if (wide)
        min_max_int64_t(src.p, src.n, &low, &high);
    else
        min_max_int32_t(src.p, src.n, &low, &high);
    close_source(&src);
    return Py_BuildValue("(LL)", (long long)low, (long long)high);
}

static PyMethodDef methods[] = {
    {"count_nonfinite", count_nonfinite, METH_VARARGS, "How many of numel floats at an address are NaN or Inf."},
    {"index_range", index_range, METH_VARARGS, "(smallest, largest) of numel integers at an address."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_buffer_checks",
                                    "Range and finiteness checks of a tensor's memory in one C pass.", -1, methods};

PyMODINIT_FUNC PyInit__buffer_checks(void) { return PyModule_Create(&module); }
