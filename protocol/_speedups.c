/* The message-set hot paths in C: the producer's encode_records, the broker's scan of v1
 * entries, the consumer's decode of plain v1 messages, a v2 batch's records, encoded and
 * parsed, and the Heartbeats the broker's idle lane answers, parsed and answered.
 *
 * Each function does exactly what the Python function it stands in for does (the Python code
 * stays as the fallback; protocol/speedups.py chooses): the same bytes, the same entries, the
 * same stopping place for every input. Inputs are read through the buffer protocol, and every
 * length is checked before anything is read. What this module does not handle (an odd record,
 * a value out of range) goes to the Python function, which raises what it raises.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#define LOG_OVERHEAD 12
#define HEADER_V1 34     /* LOG_OVERHEAD + the v1 size minimum */
#define MIN_SIZE_V1 22   /* crc, magic, attributes, timestamp, key and value lengths */
#define CRC_START 16     /* the CRC covers the entry from its magic byte on */
#define CODEC_MASK 0x07
#define MAX_CODEC 3      /* Codec.LZ4 */
#define TIMESTAMP_TYPE_BIT 0x08

static PyObject *encode_fallback = NULL; /* protocol.messageset's encode_records */

static inline int64_t get_i64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static inline int32_t get_i32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
                     (uint32_t)p[3]);
}

static inline uint32_t get_u32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
           (uint32_t)p[3];
}

static inline void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
}

static inline void put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* CRC-32 of short spans by table, eight bytes a step ("slicing by 8"), on little-endian
 * machines. zlib 1.2.13's crc32 costs about 130 ns a call on the 118-byte body of a 100-byte
 * message, whatever its speed over long buffers (6 GB/s); the tables take 38 ns there and are
 * slower only beyond about 300 bytes, so spans from SHORT_CRC on go to zlib. */
#define SHORT_CRC 256
static uint32_t crc_table[8][256];

static void make_crc_tables(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

static uint32_t short_crc(uint32_t crc, const unsigned char *p, Py_ssize_t n)
{
    crc = ~crc;
#if PY_LITTLE_ENDIAN
    for (; n >= 8; p += 8, n -= 8) {
        uint32_t a, b;
        memcpy(&a, p, 4);
        memcpy(&b, p + 4, 4);
        a ^= crc;
        crc = crc_table[7][a & 0xff] ^ crc_table[6][(a >> 8) & 0xff] ^
              crc_table[5][(a >> 16) & 0xff] ^ crc_table[4][a >> 24] ^
              crc_table[3][b & 0xff] ^ crc_table[2][(b >> 8) & 0xff] ^
              crc_table[1][(b >> 16) & 0xff] ^ crc_table[0][b >> 24];
    }
#endif
    for (; n > 0; p++, n--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p) & 0xff];
    return ~crc;
}

/* The CRC-32 (zlib's, continuing from crc) of n bytes at p. zlib's crc32 takes a 32-bit
 * length: longer spans in pieces. */
static uint32_t crc_of(uint32_t crc, const unsigned char *p, Py_ssize_t n)
{
    if (n < SHORT_CRC)
        return short_crc(crc, p, n);
    while (n > 0) {
        uInt step = n > (Py_ssize_t)0x40000000 ? 0x40000000u : (uInt)n;
        crc = (uint32_t)crc32((uLong)crc, p, step);
        p += step;
        n -= step;
    }
    return crc;
}

/* The pair (a, b), taking over both references; NULL (and both released) if either is NULL,
   as when the call that made it failed, or if the tuple cannot be made. */
static PyObject *pair(PyObject *a, PyObject *b)
{
    PyObject *result = (a == NULL || b == NULL) ? NULL : PyTuple_New(2);
    if (result == NULL) {
        Py_XDECREF(a);
        Py_XDECREF(b);
        return NULL;
    }
    PyTuple_SET_ITEM(result, 0, a);
    PyTuple_SET_ITEM(result, 1, b);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* encode_records(records, *, base_offset=0, attributes=0) -> bytes */

static PyObject *call_encode_fallback(PyObject *args, PyObject *kwargs)
{
    if (encode_fallback == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "protocol._speedups: no encode_records fallback set");
        return NULL;
    }
    return PyObject_Call(encode_fallback, args, kwargs);
}

/* The length of a key or value (bytes or None, -1 for None); -2 for anything else. */
static inline Py_ssize_t field_length(PyObject *o)
{
    if (o == Py_None)
        return -1;
    if (PyBytes_CheckExact(o))
        return PyBytes_GET_SIZE(o);
    return -2;
}

static PyObject *encode_records(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"records", "base_offset", "attributes", NULL};
    PyObject *records, *base_obj = NULL, *attr_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OO:encode_records", kwlist, &records,
                                     &base_obj, &attr_obj))
        return NULL;
    long long base_offset = 0;
    long attributes = 0;
    if (base_obj != NULL) {
        int overflow = 0;
        if (!PyLong_CheckExact(base_obj))
            return call_encode_fallback(args, kwargs);
        base_offset = PyLong_AsLongLongAndOverflow(base_obj, &overflow);
        if (overflow)
            return call_encode_fallback(args, kwargs);
        if (base_offset == -1 && PyErr_Occurred())
            return NULL;
    }
    if (attr_obj != NULL) {
        int overflow = 0;
        if (!PyLong_Check(attr_obj))
            return call_encode_fallback(args, kwargs);
        attributes = PyLong_AsLongAndOverflow(attr_obj, &overflow);
        if (overflow || attributes < -128 || attributes > 127)
            return call_encode_fallback(args, kwargs);
        if (attributes == -1 && PyErr_Occurred())
            return NULL;
    }
    if (!PyList_CheckExact(records) && !PyTuple_CheckExact(records))
        return call_encode_fallback(args, kwargs);
    /* A list is not changed while it is read: nothing below runs Python code. */
    Py_ssize_t count = PySequence_Fast_GET_SIZE(records);
    PyObject **items = PySequence_Fast_ITEMS(records);
    if (count > 0 && base_offset > INT64_MAX - (count - 1))
        return call_encode_fallback(args, kwargs);
    /* First pass: every record is a (bytes|None, bytes|None, int) tuple, every size fits. */
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *rec = items[i];
        /* a tuple, or a subclass that iterates as one (a Record) */
        if (!PyTuple_Check(rec) || Py_TYPE(rec)->tp_iter != PyTuple_Type.tp_iter ||
            PyTuple_GET_SIZE(rec) != 3)
            return call_encode_fallback(args, kwargs);
        Py_ssize_t klen = field_length(PyTuple_GET_ITEM(rec, 0));
        Py_ssize_t vlen = field_length(PyTuple_GET_ITEM(rec, 1));
        PyObject *ts = PyTuple_GET_ITEM(rec, 2);
        if (klen == -2 || vlen == -2 || !PyLong_Check(ts))
            return call_encode_fallback(args, kwargs);
        int overflow = 0;
        (void)PyLong_AsLongLongAndOverflow(ts, &overflow);
        if (overflow)
            return call_encode_fallback(args, kwargs);
        Py_ssize_t k = klen > 0 ? klen : 0, v = vlen > 0 ? vlen : 0;
        if (k > INT32_MAX - MIN_SIZE_V1 || v > INT32_MAX - MIN_SIZE_V1 - k)
            return call_encode_fallback(args, kwargs); /* the size field would not fit */
        Py_ssize_t body = HEADER_V1 + k + v;
        if (total > PY_SSIZE_T_MAX - body)
            return call_encode_fallback(args, kwargs);
        total += body;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        return NULL;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    long long offset = base_offset;
    for (Py_ssize_t i = 0; i < count; i++, offset++) {
        PyObject *rec = items[i];
        PyObject *key = PyTuple_GET_ITEM(rec, 0), *value = PyTuple_GET_ITEM(rec, 1);
        long long ts = PyLong_AsLongLong(PyTuple_GET_ITEM(rec, 2));
        if (ts == -1 && PyErr_Occurred()) {
            Py_DECREF(out);
            return NULL;
        }
        Py_ssize_t klen = key == Py_None ? -1 : PyBytes_GET_SIZE(key);
        Py_ssize_t vlen = value == Py_None ? -1 : PyBytes_GET_SIZE(value);
        Py_ssize_t k = klen > 0 ? klen : 0, v = vlen > 0 ? vlen : 0;
        unsigned char *entry = p;
        put_u64(p, (uint64_t)offset);
        put_u32(p + 8, (uint32_t)(MIN_SIZE_V1 + k + v));
        p[16] = 1;
        p[17] = (unsigned char)(attributes & 0xff);
        put_u64(p + 18, (uint64_t)ts);
        put_u32(p + 26, (uint32_t)(int32_t)klen);
        p += 30;
        if (k) {
            memcpy(p, PyBytes_AS_STRING(key), (size_t)k);
            p += k;
        }
        put_u32(p, (uint32_t)(int32_t)vlen);
        p += 4;
        if (v) {
            memcpy(p, PyBytes_AS_STRING(value), (size_t)v);
            p += v;
        }
        put_u32(entry + 12, crc_of(0, entry + CRC_START, p - entry - CRC_START));
    }
    return out;
}

/* ------------------------------------------------------------------------------------------ */
/* scan_v1(data, pos, verify_crc, last, found) -> (pos, last)  (protocol.entry_scan._scan_v1) */

static PyObject *scan_v1(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "scan_v1 takes 5 arguments");
        return NULL;
    }
    PyObject *found = args[4];
    if (!PyTuple_Check(found) || PyTuple_GET_SIZE(found) != 7) {
        PyErr_SetString(PyExc_TypeError, "scan_v1: found must be a _Columns of 7 lists");
        return NULL;
    }
    PyObject *cols[7];
    for (int i = 0; i < 7; i++) {
        cols[i] = PyTuple_GET_ITEM(found, i);
        if (!PyList_Check(cols[i])) {
            PyErr_SetString(PyExc_TypeError, "scan_v1: found must be a _Columns of 7 lists");
            return NULL;
        }
    }
    Py_ssize_t pos = PyNumber_AsSsize_t(args[1], PyExc_OverflowError);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    if (pos < 0) {
        PyErr_SetString(PyExc_ValueError, "scan_v1: a negative position");
        return NULL;
    }
    int verify_crc = PyObject_IsTrue(args[2]);
    if (verify_crc < 0)
        return NULL;
    /* last: None, or an int compared with int64 offsets (beyond their range: always or never) */
    PyObject *last_obj = args[3];
    int has_last = last_obj != Py_None;
    long long last = 0;
    int last_above = 0, last_below = 0;
    if (has_last) {
        int overflow = 0;
        if (!PyLong_Check(last_obj)) {
            PyErr_SetString(PyExc_TypeError, "scan_v1: last must be an int or None");
            return NULL;
        }
        last = PyLong_AsLongLongAndOverflow(last_obj, &overflow);
        if (last == -1 && PyErr_Occurred())
            return NULL;
        last_above = overflow > 0;
        last_below = overflow < 0;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *d = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len;
    int moved = 0; /* last is an offset read here, not the one passed in */
    while (pos <= n - HEADER_V1) {
        const unsigned char *e = d + pos;
        int64_t offset = get_i64(e);
        int32_t size = get_i32(e + 8);
        unsigned char magic = e[16], attributes = e[17];
        if (magic != 1 || size < MIN_SIZE_V1)
            break;
        if ((int64_t)size > (int64_t)(n - pos) - LOG_OVERHEAD)
            break;
        Py_ssize_t whole = (Py_ssize_t)LOG_OVERHEAD + size;
        Py_ssize_t end = pos + whole;
        if ((attributes & CODEC_MASK) > MAX_CODEC)
            break;
        if (has_last && (last_above || (!last_below && offset <= last)))
            break;
        int64_t timestamp = get_i64(e + 18);
        int32_t klen = get_i32(e + 26);
        int32_t vlen = get_i32(e + 30);
        Py_ssize_t room;
        if (klen != -1) {
            if (klen < 0 || (Py_ssize_t)klen > whole - HEADER_V1)
                break;
            vlen = get_i32(e + HEADER_V1 - 4 + klen);
            room = whole - HEADER_V1 - klen;
        } else {
            room = whole - HEADER_V1;
        }
        if (((Py_ssize_t)vlen != room && (vlen != -1 || room)) ||
            (verify_crc && crc_of(0, e + CRC_START, whole - CRC_START) != get_u32(e + 12)))
            break;
        PyObject *vals[7] = {PyLong_FromSsize_t(pos), PyLong_FromLongLong(offset),
                             PyLong_FromSsize_t(whole), PyLong_FromLong(1),
                             PyLong_FromLong(attributes), PyLong_FromLongLong(timestamp),
                             PyLong_FromLong(klen)};
        int failed = 0;
        for (int i = 0; i < 7; i++) {
            if (vals[i] == NULL || (!failed && PyList_Append(cols[i], vals[i]) < 0))
                failed = 1;
            Py_XDECREF(vals[i]);
        }
        if (failed) {
            PyBuffer_Release(&view);
            return NULL;
        }
        if (has_last) {
            last = offset;
            last_above = last_below = 0;
            moved = 1;
        }
        pos = end;
    }
    PyBuffer_Release(&view);
    PyObject *last_out;
    if (!has_last) {
        last_out = Py_NewRef(Py_None);
    } else if (moved) {
        last_out = PyLong_FromLongLong(last); /* NULL on failure: pair() passes it on */
    } else {
        last_out = Py_NewRef(last_obj);
    }
    return pair(PyLong_FromSsize_t(pos), last_out);
}


/* ------------------------------------------------------------------------------------------ */
/* decode_plain(data, verify_crc, cls, prefix, suffix) -> (list, pos)  (messageset._decode_plain) */

/* cls(*prefix, offset, timestamp, ts_type, key, value, *suffix) as tuple.__new__(cls, ...)
 * builds it; steals the references to key and value. */
static PyObject *new_record(PyTypeObject *cls, PyObject *prefix, PyObject *suffix,
                            int64_t offset, int64_t timestamp, int ts_type, PyObject *key,
                            PyObject *value)
{
    Py_ssize_t np = PyTuple_GET_SIZE(prefix);
    Py_ssize_t ns = PyTuple_GET_SIZE(suffix);
    PyObject *o_offset = PyLong_FromLongLong(offset);
    PyObject *o_ts = PyLong_FromLongLong(timestamp);
    PyObject *o_type = PyLong_FromLong(ts_type);
    PyObject *rec = NULL;
    if (o_offset == NULL || o_ts == NULL || o_type == NULL)
        goto fail;
    rec = cls == &PyTuple_Type ? PyTuple_New(np + 5 + ns) : cls->tp_alloc(cls, np + 5 + ns);
    if (rec == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < np; i++)
        PyTuple_SET_ITEM(rec, i, Py_NewRef(PyTuple_GET_ITEM(prefix, i)));
    PyTuple_SET_ITEM(rec, np, o_offset);
    PyTuple_SET_ITEM(rec, np + 1, o_ts);
    PyTuple_SET_ITEM(rec, np + 2, o_type);
    PyTuple_SET_ITEM(rec, np + 3, key);
    PyTuple_SET_ITEM(rec, np + 4, value);
    for (Py_ssize_t i = 0; i < ns; i++)
        PyTuple_SET_ITEM(rec, np + 5 + i, Py_NewRef(PyTuple_GET_ITEM(suffix, i)));
    return rec;
fail:
    Py_XDECREF(o_offset);
    Py_XDECREF(o_ts);
    Py_XDECREF(o_type);
    Py_DECREF(key);
    Py_DECREF(value);
    return NULL;
}

static PyObject *decode_plain(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "decode_plain takes 5 arguments");
        return NULL;
    }
    int verify_crc = PyObject_IsTrue(args[1]);
    if (verify_crc < 0)
        return NULL;
    PyObject *cls_obj = args[2];
    PyTypeObject *cls = (PyTypeObject *)cls_obj;
    /* cls, prefix and suffix are looked at when the first record is built, as the Python code
     * does */
    PyObject *prefix = NULL, *suffix = NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *d = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len;
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t pos = 0;
    while (pos <= n - HEADER_V1) {
        const unsigned char *e = d + pos;
        int64_t offset = get_i64(e);
        int32_t size = get_i32(e + 8);
        unsigned char magic = e[16], attributes = e[17];
        if (magic != 1 || (attributes & CODEC_MASK) || size < MIN_SIZE_V1)
            break;
        if ((int64_t)size > (int64_t)(n - pos) - LOG_OVERHEAD)
            break;
        Py_ssize_t whole = (Py_ssize_t)LOG_OVERHEAD + size;
        Py_ssize_t end = pos + whole;
        if (verify_crc && crc_of(0, e + CRC_START, whole - CRC_START) != get_u32(e + 12))
            break;
        int64_t timestamp = get_i64(e + 18);
        int32_t klen = get_i32(e + 26);
        int32_t vlen = get_i32(e + 30);
        Py_ssize_t p; /* where the value starts, relative to the entry */
        if (klen != -1 && (klen < 0 || (Py_ssize_t)klen > whole - HEADER_V1))
            break;
        if (klen != -1) {
            vlen = get_i32(e + 30 + klen);
            p = HEADER_V1 + klen;
        } else {
            p = HEADER_V1;
        }
        if (!((vlen == -1 && p == whole) || (vlen >= 0 && p + vlen == whole)))
            break;
        PyObject *key, *value;
        if (klen == -1) {
            key = Py_NewRef(Py_None);
        } else {
            key = PyBytes_FromStringAndSize((const char *)e + 30, klen);
            if (key == NULL)
                goto error;
        }
        if (vlen == -1) {
            value = Py_NewRef(Py_None);
        } else {
            value = PyBytes_FromStringAndSize((const char *)e + p, vlen);
            if (value == NULL) {
                Py_DECREF(key);
                goto error;
            }
        }
        if (prefix == NULL) {
            if (!PyType_Check(cls_obj) || !PyType_IsSubtype(cls, &PyTuple_Type)) {
                PyErr_SetString(PyExc_TypeError, "decode_plain: cls must be a tuple type");
                prefix = NULL;
            } else if ((prefix = PySequence_Tuple(args[3])) != NULL) {
                suffix = PySequence_Tuple(args[4]);
                if (suffix == NULL)
                    Py_CLEAR(prefix);
            }
            if (prefix == NULL) {
                Py_DECREF(key);
                Py_DECREF(value);
                goto error;
            }
        }
        PyObject *rec = new_record(cls, prefix, suffix, offset, timestamp,
                                   (attributes & TIMESTAMP_TYPE_BIT) >> 3, key, value);
        if (rec == NULL)
            goto error;
        int appended = PyList_Append(out, rec);
        Py_DECREF(rec);
        if (appended < 0)
            goto error;
        pos = end;
    }
    Py_XDECREF(prefix);
    Py_XDECREF(suffix);
    PyBuffer_Release(&view);
    return pair(out, PyLong_FromSsize_t(pos));
error:
    Py_XDECREF(prefix);
    Py_XDECREF(suffix);
    PyBuffer_Release(&view);
    Py_DECREF(out);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* parse_records_v2(data, start, end, count, base_offset, base_timestamp, ts_override, cls,
 *                  prefix, ts_type) -> list | None  (protocol.record_batch._py_parse_records)
 *
 * Each record built as cls(*prefix, offset, timestamp, key, value, headers) -- with ts_type
 * after the timestamp unless it is None (the consumer's records: one allocation, not a second
 * tuple per record) -- as the Python function builds it, or None whenever the
 * records section is not exactly ``count`` whole, valid records -- and for the few values this
 * code does not take (an offset or timestamp past int64) -- so that the Python function runs
 * and raises, or returns, what it does. */

/* A zigzag varint of at most max_bytes (5: int32, 10: int64) at *pp, read below end; 0 when
 * it runs to end, is longer or does not fit. */
static inline int read_varint(const unsigned char **pp, const unsigned char *end, int max_bytes,
                              int64_t *out)
{
    const unsigned char *p = *pp;
    uint64_t result = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (p >= end)
            return 0;
        unsigned char b = *p++;
        if (i == 9 && (b & 0x7f) > 1)
            return 0; /* beyond 64 bits */
        result |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            if (max_bytes == 5 && (result >> 32))
                return 0;
            *out = (int64_t)(result >> 1) ^ -(int64_t)(result & 1);
            *pp = p;
            return 1;
        }
    }
    return 0;
}

/* A key, value or header value of length n at *pp (below end): bytes, None for -1; NULL with
 * *bad set for any other length or one past end, NULL without it on a Python error. */
static inline PyObject *read_bytes(const unsigned char **pp, const unsigned char *end,
                                   int64_t n, int *bad)
{
    if (n == -1)
        return Py_NewRef(Py_None);
    if (n < 0 || n > end - *pp) {
        *bad = 1;
        return NULL;
    }
    PyObject *o = PyBytes_FromStringAndSize((const char *)*pp, (Py_ssize_t)n);
    *pp += n;
    return o;
}

/* The headers of one record: a tuple of (str, bytes | None); NULL with *bad set when they do
 * not parse. */
static PyObject *read_headers(const unsigned char **pp, const unsigned char *end, int *bad)
{
    const unsigned char *p = *pp;
    int64_t count;
    if (!read_varint(&p, end, 5, &count) || count < 0 || count > (end - p) / 2) {
        *bad = 1;
        return NULL;
    }
    PyObject *headers = PyTuple_New((Py_ssize_t)count);
    if (headers == NULL)
        return NULL;
    for (int64_t h = 0; h < count; h++) {
        int64_t klen, vlen;
        if (!read_varint(&p, end, 5, &klen) || klen < 0 || klen > end - p) {
            *bad = 1;
            goto fail;
        }
        PyObject *name = PyUnicode_DecodeUTF8((const char *)p, (Py_ssize_t)klen,
                                              "surrogateescape");
        if (name == NULL)
            goto fail;
        p += klen;
        PyObject *value = NULL;
        if (!read_varint(&p, end, 5, &vlen))
            *bad = 1;
        else
            value = read_bytes(&p, end, vlen, bad);
        if (value == NULL) {
            Py_DECREF(name);
            goto fail;
        }
        PyObject *pair_ = PyTuple_New(2);
        if (pair_ == NULL) {
            Py_DECREF(name);
            Py_DECREF(value);
            goto fail;
        }
        PyTuple_SET_ITEM(pair_, 0, name);
        PyTuple_SET_ITEM(pair_, 1, value);
        PyTuple_SET_ITEM(headers, (Py_ssize_t)h, pair_);
    }
    *pp = p;
    return headers;
fail:
    Py_DECREF(headers);
    return NULL;
}

static PyObject *parse_records_v2(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "parse_records_v2 takes 10 arguments");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t stop = PyLong_AsSsize_t(args[2]);
    long long count = PyLong_AsLongLong(args[3]);
    long long base_offset = PyLong_AsLongLong(args[4]);
    long long base_ts = PyLong_AsLongLong(args[5]);
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return NULL;
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *ts_override = args[6];
    PyObject *cls_obj = args[7];
    if (!PyType_Check(cls_obj) || !PyType_IsSubtype((PyTypeObject *)cls_obj, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "parse_records_v2: cls must be a tuple type");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)cls_obj;
    PyObject *prefix = args[8];
    if (!PyTuple_Check(prefix)) {
        PyErr_SetString(PyExc_TypeError, "parse_records_v2: prefix must be a tuple");
        return NULL;
    }
    PyObject *ts_type = args[9];
    if (ts_type != Py_None && !PyLong_Check(ts_type)) {
        PyErr_SetString(PyExc_TypeError, "parse_records_v2: ts_type must be an int or None");
        return NULL;
    }
    Py_ssize_t np = PyTuple_GET_SIZE(prefix);
    Py_ssize_t nt = ts_type == Py_None ? 0 : 1; /* 1: the timestamp type follows the timestamp */
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (start < 0 || stop < start || stop > view.len || count < 0) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    const unsigned char *p = (const unsigned char *)view.buf + start;
    const unsigned char *end = (const unsigned char *)view.buf + stop;
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int bad = 0;
    int64_t previous_delta = -1; /* deltas increase; compaction leaves gaps between them */
    for (long long i = 0; i < count; i++) {
        int64_t length, ts_delta, offset_delta, klen, vlen, offset, ts = 0;
        if (!read_varint(&p, end, 5, &length) || length < 6 || length > end - p)
            goto fallback;
        const unsigned char *rend = p + length;
        p++; /* attributes: unused in v2 */
        if (!read_varint(&p, rend, 10, &ts_delta) || !read_varint(&p, rend, 5, &offset_delta) ||
            offset_delta <= previous_delta || !read_varint(&p, rend, 5, &klen))
            goto fallback;
        previous_delta = offset_delta;
        if (__builtin_add_overflow(base_offset, offset_delta, &offset))
            goto fallback;
        if (ts_override == Py_None && __builtin_add_overflow(base_ts, ts_delta, &ts))
            goto fallback;
        PyObject *key = read_bytes(&p, rend, klen, &bad);
        if (key == NULL)
            goto failed;
        PyObject *value = NULL;
        if (!read_varint(&p, rend, 5, &vlen))
            bad = 1;
        else
            value = read_bytes(&p, rend, vlen, &bad);
        if (value == NULL) {
            Py_DECREF(key);
            goto failed;
        }
        PyObject *headers;
        if (p < rend && *p == 0) { /* no headers, the common case */
            p++;
            headers = PyTuple_New(0);
        } else {
            headers = read_headers(&p, rend, &bad);
        }
        if (headers == NULL || p != rend) {
            bad |= headers != NULL;
            Py_DECREF(key);
            Py_DECREF(value);
            Py_XDECREF(headers);
            goto failed;
        }
        PyObject *o_offset = PyLong_FromLongLong(offset);
        PyObject *o_ts = ts_override == Py_None ? PyLong_FromLongLong(ts) : Py_NewRef(ts_override);
        PyObject *rec = (o_offset == NULL || o_ts == NULL) ? NULL
                        : cls->tp_alloc(cls, np + nt + 5);
        if (rec == NULL) {
            Py_XDECREF(o_offset);
            Py_XDECREF(o_ts);
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(headers);
            goto error;
        }
        for (Py_ssize_t j = 0; j < np; j++)
            PyTuple_SET_ITEM(rec, j, Py_NewRef(PyTuple_GET_ITEM(prefix, j)));
        PyTuple_SET_ITEM(rec, np, o_offset);
        PyTuple_SET_ITEM(rec, np + 1, o_ts);
        if (nt)
            PyTuple_SET_ITEM(rec, np + 2, Py_NewRef(ts_type));
        PyTuple_SET_ITEM(rec, np + nt + 2, key);
        PyTuple_SET_ITEM(rec, np + nt + 3, value);
        PyTuple_SET_ITEM(rec, np + nt + 4, headers);
        int appended = PyList_Append(out, rec);
        Py_DECREF(rec);
        if (appended < 0)
            goto error;
    }
    if (p != end)
        goto fallback;
    PyBuffer_Release(&view);
    return out;
failed:
    if (!bad)
        goto error; /* a Python error (memory), not a malformed record */
fallback:
    Py_DECREF(out);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
error:
    Py_DECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* encode_records_v2(records, base_timestamp) -> (bytes, count, max_timestamp) | None
 *   (protocol.record_batch._py_encode_records)
 *
 * Takes a list or tuple of (key, value, timestamp[, headers]) tuples whose keys and values are
 * bytes or None, timestamps ints within int64, headers a tuple or list of (str, bytes | None)
 * pairs (or empty, or None); the same bytes as the Python function. Anything else: None, and
 * the Python function runs. */

static inline uint64_t zigzag64(int64_t n)
{
    return ((uint64_t)n << 1) ^ (uint64_t)(n >> 63);
}

static inline Py_ssize_t varint_size(uint64_t u)
{
    Py_ssize_t n = 1;
    while (u >= 0x80) {
        u >>= 7;
        n++;
    }
    return n;
}

static inline unsigned char *put_varint(unsigned char *p, uint64_t u)
{
    while (u >= 0x80) {
        *p++ = (unsigned char)(u | 0x80);
        u >>= 7;
    }
    *p++ = (unsigned char)u;
    return p;
}

/* Bytes of a length-prefixed field: a varint of its length (zigzag), then it; -1 is null. */
static inline Py_ssize_t sized_field(Py_ssize_t len)
{
    return len < 0 ? 1 : varint_size((uint64_t)len << 1) + len;
}

static inline unsigned char *put_field(unsigned char *p, PyObject *o, Py_ssize_t len)
{
    if (len < 0) {
        *p++ = 0x01; /* zigzag -1 */
        return p;
    }
    p = put_varint(p, (uint64_t)len << 1);
    memcpy(p, PyBytes_AS_STRING(o), (size_t)len);
    return p + len;
}

/* The headers of one record as this code takes them: their count (0 for None or empty) and
 * the bytes they take after the count; -1 for anything else. */
static Py_ssize_t headers_size(PyObject *headers, Py_ssize_t *count)
{
    *count = 0;
    if (headers == NULL || headers == Py_None)
        return 0;
    if (!PyTuple_Check(headers) && !PyList_Check(headers))
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(headers), size = 0;
    for (Py_ssize_t h = 0; h < n; h++) {
        PyObject *pair_ = PySequence_Fast_GET_ITEM(headers, h);
        if (!PyTuple_Check(pair_) || PyTuple_GET_SIZE(pair_) != 2 ||
            !PyUnicode_Check(PyTuple_GET_ITEM(pair_, 0)))
            return -1;
        Py_ssize_t name_len;
        if (PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(pair_, 0), &name_len) == NULL) {
            PyErr_Clear(); /* lone surrogates: the Python code's surrogateescape takes them */
            return -1;
        }
        Py_ssize_t value_len = field_length(PyTuple_GET_ITEM(pair_, 1));
        if (value_len == -2)
            return -1;
        size += sized_field(name_len) + sized_field(value_len);
    }
    *count = n;
    return size;
}

static PyObject *encode_records_v2(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "encode_records_v2 takes 2 arguments");
        return NULL;
    }
    PyObject *records = args[0];
    int overflow = 0;
    long long base = PyLong_Check(args[1]) ? PyLong_AsLongLongAndOverflow(args[1], &overflow) : 0;
    if (PyErr_Occurred())
        return NULL;
    if (!PyLong_Check(args[1]) || overflow || !(PyList_CheckExact(records) ||
                                                 PyTuple_CheckExact(records)))
        Py_RETURN_NONE;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(records);
    PyObject **items = PySequence_Fast_ITEMS(records);
    Py_ssize_t total = 0;
    long long max_ts = -1; /* NO_TIMESTAMP */
    for (Py_ssize_t i = 0; i < n; i++) { /* sizes, and whether this code takes every record */
        PyObject *rec = items[i];
        if (!PyTuple_Check(rec) || PyTuple_GET_SIZE(rec) < 3 || PyTuple_GET_SIZE(rec) > 4)
            Py_RETURN_NONE;
        Py_ssize_t klen = field_length(PyTuple_GET_ITEM(rec, 0));
        Py_ssize_t vlen = field_length(PyTuple_GET_ITEM(rec, 1));
        PyObject *ts_obj = PyTuple_GET_ITEM(rec, 2);
        if (klen == -2 || vlen == -2 || !PyLong_Check(ts_obj))
            Py_RETURN_NONE;
        long long ts = PyLong_AsLongLongAndOverflow(ts_obj, &overflow);
        int64_t delta;
        if (overflow || __builtin_sub_overflow((int64_t)ts, (int64_t)base, &delta))
            Py_RETURN_NONE;
        if (ts > max_ts)
            max_ts = ts;
        Py_ssize_t hcount;
        Py_ssize_t hsize = headers_size(PyTuple_GET_SIZE(rec) == 4 ? PyTuple_GET_ITEM(rec, 3)
                                                                   : NULL, &hcount);
        if (hsize < 0)
            Py_RETURN_NONE;
        Py_ssize_t body = 1 + varint_size(zigzag64(delta)) + varint_size((uint64_t)i << 1) +
                          sized_field(klen) + sized_field(vlen) +
                          varint_size((uint64_t)hcount << 1) + hsize;
        total += varint_size((uint64_t)body << 1) + body;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        return NULL;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) { /* the bytes, as measured */
        PyObject *rec = items[i];
        PyObject *key = PyTuple_GET_ITEM(rec, 0), *value = PyTuple_GET_ITEM(rec, 1);
        PyObject *headers = PyTuple_GET_SIZE(rec) == 4 ? PyTuple_GET_ITEM(rec, 3) : NULL;
        Py_ssize_t klen = field_length(key), vlen = field_length(value), hcount;
        int64_t delta = (int64_t)PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(rec, 2),
                                                              &overflow) - (int64_t)base;
        Py_ssize_t hsize = headers_size(headers, &hcount);
        Py_ssize_t body = 1 + varint_size(zigzag64(delta)) + varint_size((uint64_t)i << 1) +
                          sized_field(klen) + sized_field(vlen) +
                          varint_size((uint64_t)hcount << 1) + hsize;
        p = put_varint(p, (uint64_t)body << 1);
        *p++ = 0; /* attributes */
        p = put_varint(p, zigzag64(delta));
        p = put_varint(p, (uint64_t)i << 1);
        p = put_field(p, key, klen);
        p = put_field(p, value, vlen);
        p = put_varint(p, (uint64_t)hcount << 1);
        for (Py_ssize_t h = 0; h < hcount; h++) {
            PyObject *pair_ = PySequence_Fast_GET_ITEM(headers, h);
            Py_ssize_t name_len;
            const char *name = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(pair_, 0), &name_len);
            p = put_varint(p, (uint64_t)name_len << 1);
            memcpy(p, name, (size_t)name_len);
            p += name_len;
            PyObject *hv = PyTuple_GET_ITEM(pair_, 1);
            p = put_field(p, hv, field_length(hv));
        }
    }
    return Py_BuildValue("(NnL)", out, n, max_ts);
}

/* ------------------------------------------------------------------------------------------ */
/* Heartbeats, the requests the broker's idle lane answers: protocol.wire's parse_heartbeats
 * and encode_error_code_response. The parser takes one canonical form of msgpack only -- the
 * one our encoder and every msgpack packer write -- and stops at anything else, which the
 * Python decoder then decodes or refuses: what it takes, it decodes as decode_heartbeat does. */

typedef struct {
    const unsigned char *p, *end;
} mp_reader;

/* An integer of any msgpack integer type into *out; 0 (nothing read) for anything else. */
static int mp_int(mp_reader *r, int64_t *out)
{
    if (r->p >= r->end)
        return 0;
    unsigned char t = r->p[0];
    const unsigned char *q = r->p + 1;
    Py_ssize_t left = r->end - q, size;
    if (t <= 0x7f || t >= 0xe0) {
        *out = (int8_t)t; /* a positive fixint is below 0x80: the same value either way */
        r->p = q;
        return 1;
    }
    switch (t) {
    case 0xcc: size = 1; break;
    case 0xcd: size = 2; break;
    case 0xce: size = 4; break;
    case 0xcf: size = 8; break;
    case 0xd0: size = 1; break;
    case 0xd1: size = 2; break;
    case 0xd2: size = 4; break;
    case 0xd3: size = 8; break;
    default: return 0;
    }
    if (left < size)
        return 0;
    uint64_t u = 0;
    for (Py_ssize_t i = 0; i < size; i++)
        u = (u << 8) | q[i];
    if (t >= 0xd0) { /* signed: extend from its width */
        int shift = 64 - 8 * (int)size;
        *out = shift ? (int64_t)(u << shift) >> shift : (int64_t)u;
    } else {
        if (u > (uint64_t)INT64_MAX)
            return 0; /* beyond every range checked here: the Python decoder refuses it */
        *out = (int64_t)u;
    }
    r->p = q + size;
    return 1;
}

/* A str's bytes (not yet checked as UTF-8); 0 for anything else. */
static int mp_str(mp_reader *r, const char **s, Py_ssize_t *len)
{
    if (r->p >= r->end)
        return 0;
    unsigned char t = r->p[0];
    const unsigned char *q = r->p + 1;
    Py_ssize_t left = r->end - q, n;
    if (t >= 0xa0 && t <= 0xbf) {
        n = t & 0x1f;
    } else if (t == 0xd9 && left >= 1) {
        n = q[0];
        q += 1;
    } else if (t == 0xda && left >= 2) {
        n = ((Py_ssize_t)q[0] << 8) | q[1];
        q += 2;
    } else if (t == 0xdb && left >= 4) {
        n = (Py_ssize_t)get_u32(q);
        q += 4;
    } else {
        return 0;
    }
    if (r->end - q < n)
        return 0;
    *s = (const char *)q;
    *len = n;
    r->p = q + n;
    return 1;
}

static int mp_str_equals(const char *s, Py_ssize_t len, const char *name)
{
    return (size_t)len == strlen(name) && memcmp(s, name, (size_t)len) == 0;
}

/* A str decoded strictly, as msgpack's unpacker decodes one; NULL with no error set if it is
 * not UTF-8 (the Python decoder then refuses it). */
static PyObject *mp_decode_str(const char *s, Py_ssize_t len)
{
    PyObject *str = PyUnicode_DecodeUTF8(s, len, NULL);
    if (str == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
        PyErr_Clear();
    return str;
}

#define IN_INT32(v) ((v) >= INT32_MIN && (v) <= INT32_MAX)

/* One Heartbeat's payload, d[0:n]: a new (end, correlation_id, client_id, group_id,
 * member_id, generation_id) tuple, or NULL -- with an error set only if Python failed. */
static PyObject *heartbeat_item(const unsigned char *d, Py_ssize_t n, Py_ssize_t end,
                                int64_t api_key, int64_t min_version, int64_t max_version)
{
    mp_reader r = {d, d + n};
    int64_t version, corr, generation = 0;
    const char *client = NULL, *group = NULL, *member = NULL, *s;
    Py_ssize_t client_len = 0, group_len = 0, member_len = 0, len;
    int nil_client = 0, have_generation = 0;
    /* an array of five, the API key a positive fixint: how our encoder begins a Heartbeat */
    if (n < 2 || d[0] != 0x95 || api_key < 0 || api_key > 0x7f || d[1] != api_key)
        return NULL;
    r.p += 2;
    if (!mp_int(&r, &version) || version < min_version || version > max_version)
        return NULL;
    if (!mp_int(&r, &corr) || !IN_INT32(corr))
        return NULL;
    if (r.p < r.end && r.p[0] == 0xc0) {
        nil_client = 1;
        r.p++;
    } else if (!mp_str(&r, &client, &client_len)) {
        return NULL;
    }
    if (r.p >= r.end || r.p[0] != 0x83) /* a map of exactly the three fields */
        return NULL;
    r.p++;
    for (int i = 0; i < 3; i++) {
        if (!mp_str(&r, &s, &len))
            return NULL;
        if (mp_str_equals(s, len, "group_id") && group == NULL) {
            if (!mp_str(&r, &group, &group_len))
                return NULL;
        } else if (mp_str_equals(s, len, "member_id") && member == NULL) {
            if (!mp_str(&r, &member, &member_len))
                return NULL;
        } else if (mp_str_equals(s, len, "generation_id") && !have_generation) {
            if (!mp_int(&r, &generation) || !IN_INT32(generation))
                return NULL;
            have_generation = 1;
        } else {
            return NULL;
        }
    }
    if (r.p != r.end) /* extra data: msgpack's unpacker refuses the payload */
        return NULL;
    PyObject *client_id = nil_client ? Py_NewRef(Py_None) : mp_decode_str(client, client_len);
    if (client_id == NULL)
        return NULL;
    PyObject *group_id = mp_decode_str(group, group_len);
    PyObject *member_id = group_id == NULL ? NULL : mp_decode_str(member, member_len);
    if (member_id == NULL) {
        Py_DECREF(client_id);
        Py_XDECREF(group_id);
        return NULL;
    }
    return Py_BuildValue("(nLNNNL)", end, (long long)corr, client_id, group_id, member_id,
                         (long long)generation);
}

/* parse_heartbeats(buf, start, stop, limit, api_key, min_version, max_version):
 * ([(end, correlation_id, client_id, group_id, member_id, generation_id), ...], end) for the
 * whole frames in buf[start:stop], up to limit, that are Heartbeats in the canonical form. */
static PyObject *parse_heartbeats(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "parse_heartbeats takes 7 arguments");
        return NULL;
    }
    Py_ssize_t nums[6];
    for (int i = 0; i < 6; i++) {
        nums[i] = PyNumber_AsSsize_t(args[i + 1], PyExc_OverflowError);
        if (nums[i] == -1 && PyErr_Occurred())
            return NULL;
    }
    Py_ssize_t pos = nums[0], stop = nums[1], limit = nums[2];
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (pos < 0 || stop > view.len || pos > stop) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "parse_heartbeats: start and stop out of the buffer");
        return NULL;
    }
    PyObject *items = PyList_New(0);
    const unsigned char *d = (const unsigned char *)view.buf;
    while (items != NULL && PyList_GET_SIZE(items) < limit && stop - pos >= 4) {
        Py_ssize_t length = (Py_ssize_t)get_u32(d + pos);
        if (length > stop - pos - 4)
            break;
        PyObject *item = heartbeat_item(d + pos + 4, length, pos + 4 + length, nums[3],
                                        nums[4], nums[5]);
        if (item == NULL) {
            if (PyErr_Occurred())
                Py_CLEAR(items);
            break;
        }
        int failed = PyList_Append(items, item);
        Py_DECREF(item);
        if (failed)
            Py_CLEAR(items);
        else
            pos += 4 + length;
    }
    PyBuffer_Release(&view);
    if (items == NULL)
        return NULL;
    return Py_BuildValue("(Nn)", items, pos);
}

/* protocol.framing's frame_prefixes: from ``at``, the length prefixes of the frames that follow
 * one another in the buffer, up to the first one not whole in it. Returns ``(at, oversized)``:
 * where that prefix begins (it may lie past the buffer's end, in a frame's body), or where the
 * first prefix above ``max_frame_bytes`` begins, with True. */
static PyObject *frame_prefixes(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "frame_prefixes takes 3 arguments");
        return NULL;
    }
    Py_ssize_t at = PyNumber_AsSsize_t(args[1], PyExc_OverflowError);
    if (at == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t max_frame = PyNumber_AsSsize_t(args[2], PyExc_OverflowError);
    if (max_frame == -1 && PyErr_Occurred())
        return NULL;
    if (at < 0) {
        PyErr_SetString(PyExc_ValueError, "frame_prefixes: at is negative");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *d = (const unsigned char *)view.buf;
    int oversized = 0;
    while (at <= view.len - 4) {
        Py_ssize_t length = (Py_ssize_t)get_u32(d + at);
        if (length > max_frame) {
            oversized = 1;
            break;
        }
        at += 4 + length;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(nO)", at, oversized ? Py_True : Py_False);
}

/* encode_error_code_response's frame: the envelope [correlation_id, body] with ``body`` packed
 * already, the correlation id packed as msgpack's packer packs an int (its smallest form). */
static PyObject *error_code_response(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyBytes_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "error_code_response takes an int and bytes");
        return NULL;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(args[0], &overflow);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    uint64_t above = 0; /* a value past int64's: uint64, as msgpack packs it */
    if (overflow > 0) {
        above = PyLong_AsUnsignedLongLong(args[0]);
        if (above == (uint64_t)-1 && PyErr_Occurred())
            return NULL;
    } else if (overflow < 0) {
        PyErr_SetString(PyExc_OverflowError, "error_code_response: an int below int64");
        return NULL;
    }
    unsigned char head[9];
    Py_ssize_t h;
    if (v >= 0 || overflow > 0) {
        uint64_t u = overflow > 0 ? above : (uint64_t)v;
        if (u <= 0x7f) { head[0] = (unsigned char)u; h = 1; }
        else if (u <= 0xff) { head[0] = 0xcc; h = 2; }
        else if (u <= 0xffff) { head[0] = 0xcd; h = 3; }
        else if (u <= 0xffffffffu) { head[0] = 0xce; h = 5; }
        else { head[0] = 0xcf; h = 9; }
        if (h > 1)
            for (Py_ssize_t i = h - 1; i >= 1; i--, u >>= 8)
                head[i] = (unsigned char)(u & 0xff);
    } else {
        uint64_t u = (uint64_t)v;
        if (v >= -32) { head[0] = (unsigned char)(int8_t)v; h = 1; }
        else if (v >= -128) { head[0] = 0xd0; h = 2; }
        else if (v >= -32768) { head[0] = 0xd1; h = 3; }
        else if (v >= INT32_MIN) { head[0] = 0xd2; h = 5; }
        else { head[0] = 0xd3; h = 9; }
        if (h > 1)
            for (Py_ssize_t i = h - 1; i >= 1; i--, u >>= 8)
                head[i] = (unsigned char)(u & 0xff);
    }
    Py_ssize_t body = PyBytes_GET_SIZE(args[1]);
    Py_ssize_t payload = 1 + h + body;
    if (payload > 0x7fffffff) {
        PyErr_SetString(PyExc_ValueError, "error_code_response: body too large");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, 4 + payload);
    if (out == NULL)
        return NULL;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    put_u32(o, (uint32_t)payload);
    o[4] = 0x92;
    memcpy(o + 5, head, (size_t)h);
    memcpy(o + 5 + h, PyBytes_AS_STRING(args[1]), (size_t)body);
    return out;
}

/* ------------------------------------------------------------------------------------------ */

static PyObject *set_encode_fallback(PyObject *self, PyObject *fn)
{
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "set_encode_fallback needs a callable");
        return NULL;
    }
    Py_XSETREF(encode_fallback, Py_NewRef(fn));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"encode_records", (PyCFunction)(void (*)(void))encode_records, METH_VARARGS | METH_KEYWORDS,
     "protocol.messageset.encode_records in C."},
    {"scan_v1", (PyCFunction)(void (*)(void))scan_v1, METH_FASTCALL,
     "protocol.entry_scan._scan_v1 in C."},
    {"decode_plain", (PyCFunction)(void (*)(void))decode_plain, METH_FASTCALL,
     "protocol.messageset._decode_plain in C."},
    {"parse_records_v2", (PyCFunction)(void (*)(void))parse_records_v2, METH_FASTCALL,
     "protocol.record_batch._py_parse_records in C."},
    {"encode_records_v2", (PyCFunction)(void (*)(void))encode_records_v2, METH_FASTCALL,
     "protocol.record_batch._py_encode_records in C."},
    {"parse_heartbeats", (PyCFunction)(void (*)(void))parse_heartbeats, METH_FASTCALL,
     "protocol.wire._py_parse_heartbeats in C."},
    {"frame_prefixes", (PyCFunction)(void (*)(void))frame_prefixes, METH_FASTCALL,
     "protocol.framing._py_frame_prefixes in C."},
    {"error_code_response", (PyCFunction)(void (*)(void))error_code_response, METH_FASTCALL,
     "protocol.wire._py_error_code_response in C."},
    {"set_encode_fallback", set_encode_fallback, METH_O,
     "The Python encode_records, for the records this module does not take."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "protocol._speedups",
    "The message-set hot paths in C (protocol.speedups chooses them).", -1, methods,
};

PyMODINIT_FUNC PyInit__speedups(void)
{
    make_crc_tables();
    return PyModule_Create(&module);
}
