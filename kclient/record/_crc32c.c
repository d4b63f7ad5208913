/*
 * CRC-32C (Castagnoli: polynomial 0x1EDC6F41, reflected 0x82F63B78, initial value and final
 * xor 0xFFFFFFFF), the checksum of a record batch v2, in C: RecordsWriter._close_framed
 * (_speedups.c) computes it here instead of calling the crc32c package with a memoryview
 * when it was handed that package's function. On x86-64 CPUs with SSE4.2 the crc32
 * instruction does it 8 bytes at a time; elsewhere a 256-entry table, a byte at a time.
 * tests/record/test_crc32c_c.py compares it with the package.
 *
 * Threads: any (the table is filled at the first call with the GIL held).
 */
#include "_crc32c.h"

#define POLY 0x82F63B78u

static uint32_t table[256];
static int table_ready;

static void
fill_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
        }
        table[i] = c;
    }
    table_ready = 1;
}

static uint32_t
crc_table(uint32_t crc, const unsigned char *p, Py_ssize_t len)
{
    if (!table_ready) {
        fill_table();
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    }
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_HW_CRC 1
__attribute__((target("sse4.2"))) static uint32_t
crc_hw(uint32_t crc, const unsigned char *p, Py_ssize_t len)
{
    uint64_t c = crc;
    while (len >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = __builtin_ia32_crc32di(c, word);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len > 0) {
        c32 = __builtin_ia32_crc32qi(c32, *p);
        p++;
        len--;
    }
    return c32;
}
#endif

uint32_t
kclient_crc32c(const unsigned char *data, Py_ssize_t len)
{
#ifdef HAVE_HW_CRC
    static int hw = -1;
    if (hw < 0) {
        __builtin_cpu_init();
        hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    }
    if (hw) {
        return crc_hw(0xFFFFFFFFu, data, len) ^ 0xFFFFFFFFu;
    }
#endif
    return crc_table(0xFFFFFFFFu, data, len) ^ 0xFFFFFFFFu;
}

int
kclient_is_package_crc32c(PyObject *fn)
{
    static PyObject *package_fn;
    static int looked;
    if (!looked) {
        looked = 1;
        PyObject *package = PyImport_ImportModule("crc32c");
        package_fn = package == NULL ? NULL : PyObject_GetAttrString(package, "crc32c");
        Py_XDECREF(package);
        if (package_fn == NULL) {
            PyErr_Clear(); /* not installed: always call the function given */
        }
    }
    return package_fn != NULL && fn == package_fn;
}

PyObject *
kclient_crc32c_py(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "crc32c(data: bytes, table: bool = False)");
        return NULL;
    }
    int use_table = nargs == 2 ? PyObject_IsTrue(args[1]) : 0;
    if (use_table < 0) {
        return NULL;
    }
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t len = PyBytes_GET_SIZE(args[0]);
    uint32_t crc = use_table ? crc_table(0xFFFFFFFFu, data, len) ^ 0xFFFFFFFFu
                             : kclient_crc32c(data, len);
    return PyLong_FromUnsignedLong(crc);
}
