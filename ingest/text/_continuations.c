/* The TORCH_LOGS reader's hot loop, compiled: a run of lines that continue the current log record.
 *
 * torch's formatter repeats a record's prefix on every line of its message, so most lines of a
 * TORCH_LOGS capture (482,000 of the 656,000 in the benchmark's 105 MB log) only continue the record
 * before them. In Python each of them costs a split-off string, two startswith calls and a loop
 * step; here a run of them is found with memchr and memcmp on the decoded block, and only the
 * message text of a record a parser keeps becomes a string. Everything else about the format (the
 * prefixes, where records start, which records are kept) stays in reader.py, which passes it in:
 * this file knows only "same prefix, then one character, and not a record start".
 *
 * take_run(text, pos, end, prefix, firsts, starts, out_lines, out_nos, line_no, room) -> (pos, n)
 *
 *   text[pos:end]   whole lines separated by "\n" (the last may lack it), no "\r"
 *   prefix          the record's prefix; a line continues it when it starts with it and its
 *                   message (from len(prefix) + 1) does not start with one of `starts`
 *                   (`firsts`: the first characters of `starts`, a cheap test before them)
 *   out_lines, out_nos   the record's message lines and line numbers to append to, or None for a
 *                   record no parser wants (its lines are only skipped); at most `room` appended
 *   returns         where the first line that does not continue the record starts (or end), and
 *                   how many lines continued it
 *
 * reader.RecordAssembler.feed_lines is the same loop in Python, used where this module is not
 * built; tests/ingest/text/test_text_block_reader.py keeps both giving the same records. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* text[at:at + len(p)] == p, within text[:lim]; any mix of string kinds */
static int
matches_at(PyObject *text, Py_ssize_t at, Py_ssize_t lim, PyObject *p)
{
    Py_ssize_t plen = PyUnicode_GET_LENGTH(p);
    if (at + plen > lim)
        return 0;
    int kt = PyUnicode_KIND(text), kp = PyUnicode_KIND(p);
    const void *td = PyUnicode_DATA(text), *pd = PyUnicode_DATA(p);
    if (kt == kp)
        return memcmp((const char *)td + at * kt, pd, (size_t)(plen * kt)) == 0;
    for (Py_ssize_t k = 0; k < plen; k++)
        if (PyUnicode_READ(kt, td, at + k) != PyUnicode_READ(kp, pd, k))
            return 0;
    return 1;
}

static PyObject *
take_run(PyObject *module, PyObject *args)
{
    PyObject *text, *prefix, *firsts, *starts, *out_lines, *out_nos;
    Py_ssize_t pos, end, line_no, room;
    if (!PyArg_ParseTuple(args, "UnnUUO!OOnn:take_run", &text, &pos, &end, &prefix, &firsts,
                          &PyTuple_Type, &starts, &out_lines, &out_nos, &line_no, &room))
        return NULL;
#if PY_VERSION_HEX < 0x030C0000  /* before 3.12 a str may still need its compact form built */
    if (PyUnicode_READY(text) < 0 || PyUnicode_READY(prefix) < 0 || PyUnicode_READY(firsts) < 0)
        return NULL;
#endif
    int keep = out_lines != Py_None;
    if (keep && (!PyList_Check(out_lines) || !PyList_Check(out_nos))) {
        PyErr_SetString(PyExc_TypeError, "take_run: out_lines and out_nos must be lists or None");
        return NULL;
    }
    if (pos < 0 || end > PyUnicode_GET_LENGTH(text) || pos > end) {
        PyErr_SetString(PyExc_ValueError, "take_run: pos and end must lie within text");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(starts); k++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(starts, k))) {
            PyErr_SetString(PyExc_TypeError, "take_run: starts must be a tuple of str");
            return NULL;
        }
#if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(PyTuple_GET_ITEM(starts, k)) < 0)
            return NULL;
#endif
    }
    /* the message starts after the prefix and the one space glog and the old format print */
    Py_ssize_t msg = PyUnicode_GET_LENGTH(prefix) + 1;
    Py_ssize_t nstarts = PyTuple_GET_SIZE(starts), nfirsts = PyUnicode_GET_LENGTH(firsts);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = 0;
    while (pos < end) {
        Py_ssize_t eol;
        if (kind == PyUnicode_1BYTE_KIND) {
            const char *q = memchr((const char *)data + pos, '\n', (size_t)(end - pos));
            eol = q ? q - (const char *)data : end;
        } else {
            eol = PyUnicode_FindChar(text, '\n', pos, end, 1);
            if (eol == -2)
                return NULL;
            if (eol < 0)
                eol = end;
        }
        if (!matches_at(text, pos, eol, prefix))
            break;
        if (eol - pos > msg) {
            Py_UCS4 c = PyUnicode_READ(kind, data, pos + msg);
            if (PyUnicode_FindChar(firsts, c, 0, nfirsts, 1) >= 0) {
                int starts_record = 0;
                for (Py_ssize_t k = 0; k < nstarts && !starts_record; k++)
                    starts_record = matches_at(text, pos + msg, eol, PyTuple_GET_ITEM(starts, k));
                if (starts_record)
                    break;
            }
        }
        if (keep && room > 0) {
            PyObject *line = PyUnicode_Substring(text, pos + msg < eol ? pos + msg : eol, eol);
            if (line == NULL)
                return NULL;
            int failed = PyList_Append(out_lines, line);
            Py_DECREF(line);
            if (failed)
                return NULL;
            PyObject *no = PyLong_FromSsize_t(line_no + n);
            if (no == NULL)
                return NULL;
            failed = PyList_Append(out_nos, no);
            Py_DECREF(no);
            if (failed)
                return NULL;
            room--;
        }
        n++;
        pos = eol + 1;
    }
    return Py_BuildValue("nn", pos < end ? pos : end, n);
}

static PyMethodDef methods[] = {
    {"take_run", take_run, METH_VARARGS,
     "take_run(text, pos, end, prefix, firsts, starts, out_lines, out_nos, line_no, room) -> (pos, n)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_continuations",
    "The run of lines that continue a TORCH_LOGS record, found in C (see reader.py).", -1, methods,
};

PyMODINIT_FUNC
PyInit__continuations(void)
{
    return PyModule_Create(&module);
}
