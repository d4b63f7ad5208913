/* CRC-32C (Castagnoli), the record batch checksum, computed in C (_crc32c.c): with the
 * SSE4.2 crc32 instruction where the CPU has it, else a table. */
#ifndef KCLIENT_CRC32C_H
#define KCLIENT_CRC32C_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* crc32c(data): the same value as the crc32c package's crc32c(data). */
uint32_t kclient_crc32c(const unsigned char *data, Py_ssize_t len);

/* Whether `fn` is the crc32c package's crc32c function (imported once, on the first call):
 * then kclient_crc32c computes what it would. 1, 0 (also when the package is missing). */
int kclient_is_package_crc32c(PyObject *fn);

/* _speedups.crc32c(data: bytes, table=False) -> int, for the tests that compare it with the
 * package (table: the table's way even where the CPU has the instruction). */
PyObject *kclient_crc32c_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
