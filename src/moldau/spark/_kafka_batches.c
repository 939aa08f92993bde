/*
 * Decode the records of Kafka v2 record batches into Arrow column buffers, in one call.
 *
 * Why C: the Spark source's row path spends most of its time creating one Python object per
 * record field. Here the Python side walks only the 61-byte batch headers (transaction
 * filtering, decompression: one call per batch), then hands the uncompressed records
 * sections of a whole fetch to decode(), which fills Arrow-layout buffers (int32 offsets +
 * data, LSB validity bitmaps) that pyarrow wraps without copying. No Python object is made
 * per record.
 *
 * decode(chunks, start, until, include_headers) -> tuple
 *   chunks: list of (records: buffer, count: int, base_offset: int, base_timestamp: int,
 *                    log_append_time: int)   log_append_time < 0: CreateTime, else the
 *                                            batch's LogAppendTime (its max timestamp)
 *   Only records with start <= offset < until are kept.
 *   Returns (rows, offset, timestamp, timestamp_valid, timestamp_type,
 *            key_offsets, key_data, key_valid, value_offsets, value_data, value_valid,
 *            header_list_offsets, header_list_valid, header_key_offsets, header_key_data,
 *            header_value_offsets, header_value_data, header_value_valid)
 *   as bytes objects; the header ones are None unless include_headers. A record with no
 *   headers gets a null list (what the row path gives). Raises ValueError on malformed data.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    char *data;
    size_t len;
    size_t cap;
} Buf;

static int buf_reserve(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    char *p = PyMem_Realloc(b->data, cap);
    if (!p) { PyErr_NoMemory(); return -1; }
    b->data = p;
    b->cap = cap;
    return 0;
}

static int buf_put(Buf *b, const void *src, size_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    if (n) memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

static int put_i32(Buf *b, int32_t v) { return buf_put(b, &v, sizeof v); }
static int put_i64(Buf *b, int64_t v) { return buf_put(b, &v, sizeof v); }

/* A validity bitmap: one bit per row, LSB first, as Arrow lays it out. */
typedef struct {
    Buf bytes;
    size_t bits;
} Bitmap;

static int bit_put(Bitmap *m, int valid) {
    if ((m->bits & 7) == 0) {
        uint8_t zero = 0;
        if (buf_put(&m->bytes, &zero, 1) < 0) return -1;
    }
    if (valid) m->bytes.data[m->bits >> 3] |= (uint8_t)(1u << (m->bits & 7));
    m->bits++;
    return 0;
}

/* A binary/string column: int32 offsets (starting with 0), data, validity. */
typedef struct {
    Buf offsets;
    Buf data;
    Bitmap valid;
} BinCol;

static int bincol_init(BinCol *c) { return put_i32(&c->offsets, 0); }

static int bincol_put(BinCol *c, const uint8_t *p, int64_t n) {
    /* n < 0: null */
    if (n > 0) {
        if (c->data.len + (size_t)n > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "column data exceeds 2 GiB in one batch");
            return -1;
        }
        if (buf_put(&c->data, p, (size_t)n) < 0) return -1;
    }
    if (put_i32(&c->offsets, (int32_t)c->data.len) < 0) return -1;
    return bit_put(&c->valid, n >= 0);
}

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} Reader;

/* Zigzag varint of at most max_bytes bytes. */
static int read_varlong(Reader *r, int max_bytes, int64_t *out) {
    uint64_t raw = 0;
    int shift = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (r->p >= r->end) goto bad;
        uint8_t byte = *r->p++;
        raw |= (uint64_t)(byte & 0x7F) << shift;
        if (!(byte & 0x80)) {
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            return 0;
        }
        shift += 7;
    }
bad:
    PyErr_SetString(PyExc_ValueError, "malformed varint in a record");
    return -1;
}

static int read_varint(Reader *r, int64_t *out) { return read_varlong(r, 5, out); }

/* A length-prefixed field: *n = -1 for null. */
static int read_bytes(Reader *r, const uint8_t **p, int64_t *n) {
    if (read_varint(r, n) < 0) return -1;
    if (*n < -1 || (*n > 0 && *n > r->end - r->p)) {
        PyErr_SetString(PyExc_ValueError, "record field length out of bounds");
        return -1;
    }
    *p = r->p;
    if (*n > 0) r->p += *n;
    return 0;
}

typedef struct {
    Py_ssize_t rows;
    Buf offset, timestamp, timestamp_type;
    Bitmap timestamp_valid;
    BinCol key, value;
    int headers;
    Buf header_list_offsets;
    Bitmap header_list_valid;
    BinCol header_key, header_value;
    int32_t header_count;
} Out;

static void out_free(Out *o) {
    Buf *bufs[] = {
        &o->offset, &o->timestamp, &o->timestamp_type, &o->timestamp_valid.bytes,
        &o->key.offsets, &o->key.data, &o->key.valid.bytes,
        &o->value.offsets, &o->value.data, &o->value.valid.bytes,
        &o->header_list_offsets, &o->header_list_valid.bytes,
        &o->header_key.offsets, &o->header_key.data, &o->header_key.valid.bytes,
        &o->header_value.offsets, &o->header_value.data, &o->header_value.valid.bytes,
    };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) PyMem_Free(bufs[i]->data);
}

static int decode_chunk(Out *o, const uint8_t *data, Py_ssize_t size, long long count,
                        long long base_offset, long long base_timestamp,
                        long long log_append_time, int64_t start, int64_t until) {
    Reader batch = {data, data + size};
    int32_t type = log_append_time >= 0 ? 1 : 0;
    for (long long i = 0; i < count; i++) {
        int64_t length;
        if (read_varint(&batch, &length) < 0) return -1;
        if (length < 0 || length > batch.end - batch.p) {
            PyErr_SetString(PyExc_ValueError, "record length out of bounds");
            return -1;
        }
        Reader r = {batch.p, batch.p + length};
        batch.p += length;
        int64_t ts_delta, offset_delta, key_n, value_n, header_n;
        const uint8_t *key, *value;
        if (r.p >= r.end) { PyErr_SetString(PyExc_ValueError, "empty record"); return -1; }
        r.p++;  /* attributes: unused in v2 */
        if (read_varlong(&r, 10, &ts_delta) < 0 || read_varint(&r, &offset_delta) < 0)
            return -1;
        int64_t offset;
        if (__builtin_add_overflow((int64_t)base_offset, offset_delta, &offset)) {
            PyErr_SetString(PyExc_ValueError, "record offset out of range");
            return -1;
        }
        if (offset < start || offset >= until) continue;
        if (read_bytes(&r, &key, &key_n) < 0 || read_bytes(&r, &value, &value_n) < 0 ||
            read_varint(&r, &header_n) < 0)
            return -1;
        if (header_n < 0) header_n = 0;
        int64_t ts = log_append_time;
        if (ts < 0 && __builtin_add_overflow((int64_t)base_timestamp, ts_delta, &ts)) ts = -1;
        /* Microseconds for Arrow; a stamp that cannot be one (negative, or past year
         * 294,000) is null, as librdkafka's "no timestamp". */
        int valid_ts = ts >= 0 && ts <= INT64_MAX / 1000;
        if (put_i64(&o->offset, offset) < 0 ||
            put_i64(&o->timestamp, valid_ts ? ts * 1000 : 0) < 0 ||
            bit_put(&o->timestamp_valid, valid_ts) < 0 ||
            put_i32(&o->timestamp_type, type) < 0 ||
            bincol_put(&o->key, key, key_n) < 0 || bincol_put(&o->value, value, value_n) < 0)
            return -1;
        if (o->headers) {
            for (int64_t h = 0; h < header_n; h++) {
                const uint8_t *hk, *hv;
                int64_t hk_n, hv_n;
                if (read_bytes(&r, &hk, &hk_n) < 0 || read_bytes(&r, &hv, &hv_n) < 0)
                    return -1;
                /* Header keys are never null in Kafka; a -1 length reads as "". */
                if (bincol_put(&o->header_key, hk, hk_n < 0 ? 0 : hk_n) < 0 ||
                    bincol_put(&o->header_value, hv, hv_n) < 0)
                    return -1;
                o->header_count++;
            }
            if (put_i32(&o->header_list_offsets, o->header_count) < 0 ||
                bit_put(&o->header_list_valid, header_n > 0) < 0)
                return -1;
        }
        o->rows++;
    }
    return 0;
}

static PyObject *as_bytes(Buf *b) {
    return PyBytes_FromStringAndSize(b->data ? b->data : "", (Py_ssize_t)b->len);
}

static PyObject *decode(PyObject *self, PyObject *args) {
    PyObject *chunks;
    long long start, until;
    int include_headers;
    if (!PyArg_ParseTuple(args, "O!LLp", &PyList_Type, &chunks, &start, &until,
                          &include_headers))
        return NULL;
    Out o;
    memset(&o, 0, sizeof o);
    o.headers = include_headers;
    PyObject *result = NULL;
    if (bincol_init(&o.key) < 0 || bincol_init(&o.value) < 0) goto done;
    if (o.headers && (put_i32(&o.header_list_offsets, 0) < 0 ||
                      bincol_init(&o.header_key) < 0 || bincol_init(&o.header_value) < 0))
        goto done;
    Py_ssize_t n = PyList_GET_SIZE(chunks);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_buffer view;
        long long count, base_offset, base_timestamp, log_append_time;
        PyObject *item = PyList_GET_ITEM(chunks, i);
        if (!PyArg_ParseTuple(item, "y*LLLL", &view, &count, &base_offset, &base_timestamp,
                              &log_append_time))
            goto done;
        int rc = decode_chunk(&o, view.buf, view.len, count, base_offset, base_timestamp,
                              log_append_time, start, until);
        PyBuffer_Release(&view);
        if (rc < 0) goto done;
    }
    if (o.headers) {
        result = Py_BuildValue(
            "(nNNNNNNNNNNNNNNNNN)", o.rows, as_bytes(&o.offset), as_bytes(&o.timestamp),
            as_bytes(&o.timestamp_valid.bytes), as_bytes(&o.timestamp_type),
            as_bytes(&o.key.offsets), as_bytes(&o.key.data), as_bytes(&o.key.valid.bytes),
            as_bytes(&o.value.offsets), as_bytes(&o.value.data), as_bytes(&o.value.valid.bytes),
            as_bytes(&o.header_list_offsets), as_bytes(&o.header_list_valid.bytes),
            as_bytes(&o.header_key.offsets), as_bytes(&o.header_key.data),
            as_bytes(&o.header_value.offsets), as_bytes(&o.header_value.data),
            as_bytes(&o.header_value.valid.bytes));
    } else {
        result = Py_BuildValue(
            "(nNNNNNNNNNNOOOOOOO)", o.rows, as_bytes(&o.offset), as_bytes(&o.timestamp),
            as_bytes(&o.timestamp_valid.bytes), as_bytes(&o.timestamp_type),
            as_bytes(&o.key.offsets), as_bytes(&o.key.data), as_bytes(&o.key.valid.bytes),
            as_bytes(&o.value.offsets), as_bytes(&o.value.data), as_bytes(&o.value.valid.bytes),
            Py_None, Py_None, Py_None, Py_None, Py_None, Py_None, Py_None);
    }
done:
    out_free(&o);
    return result;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS,
     "decode(chunks, start, until, include_headers): records of v2 batches as Arrow buffers"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kafka_batches",
    "Kafka v2 record batches to Arrow column buffers (see decode).", -1, methods,
};

PyMODINIT_FUNC PyInit__kafka_batches(void) { return PyModule_Create(&module); }
