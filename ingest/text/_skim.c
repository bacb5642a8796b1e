/* The TORCH_LOGS reader's hot loop, compiled: the lines the record assembler only skims.
 *
 * Of the 656,000 lines of the benchmark's 105 MB log, 482,000 only continue the record before them
 * (torch's formatter repeats a record's prefix on every line of its message), 51,000 start a record
 * no parser wants from the same process as the record before (guards, perf hints, bytecode), and
 * 74,000 carry no prefix at all (program output, or a record's lines printed without one). In
 * Python each costs a split-off string and a few calls; here they are found on the decoded block
 * with memchr and memcmp, and only the message text of a record a parser keeps becomes a string.
 *
 * skim(assembler, text, pos, end, line_no, max_lines, rules) -> (pos, line_no)
 *
 *   assembler       the reader.RecordAssembler whose state the lines change, as its own methods
 *                   would: its current record (_last, which keeps the lines of a record a parser
 *                   wants), _last_prefix, _bare_ok and its record count
 *   text[pos:end]   whole lines separated by "\n" (the last may lack it), no "\r"
 *   max_lines       reader.MAX_RECORD_LINES: a record is cut (Record.cut) at that many lines
 *   rules           reader._SKIM_RULES, every fact about the format this loop needs (see there)
 *   returns         where the first line it leaves to RecordAssembler._fresh starts (or end), and
 *                   that line's number
 *
 * It takes a line only in these cases, and leaves anything else to _fresh:
 *   - the line continues the current record: it starts with the record's prefix and its message
 *     (from len(prefix) + 1) does not start a record;
 *   - the line is empty;
 *   - the current record is one no parser wants, and the line's glog prefix (the reader's own
 *     compiled pattern, called from here: the format is defined there alone) starts another one of
 *     the same process, without a rank: that record takes the current one's place, in place (one
 *     no parser wants holds no lines, and nothing but the assembler refers to it);
 *   - the line has no prefix and cannot have one: it starts with none of a prefix's first
 *     characters and holds no mark of a prefix later in the line, and does not start a record.
 *
 * reader.RecordAssembler.feed_lines and _fresh are the same rules in Python, used where this module
 * is not built; tests/ingest/text/test_text_block_reader.py keeps both giving the same records. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static PyObject *s_last, *s_last_prefix, *s_bare_ok, *s_records, *s_open, *s_parser, *s_lines,
    *s_line_nos, *s_cut, *s_rank, *s_prefix, *s_start_line, *s_compile_id, *s_artifact,
    *s_level, *s_groups, *s_end;

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

/* text[at:lim] starts with one of the strs of `tuple` (str.startswith with a tuple) */
static int
starts_with_any(PyObject *text, Py_ssize_t at, Py_ssize_t lim, PyObject *tuple)
{
    if (at >= lim)
        return 0;
    Py_UCS4 c = PyUnicode_READ_CHAR(text, at);
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(tuple); k++) {
        PyObject *p = PyTuple_GET_ITEM(tuple, k);
        if (PyUnicode_GET_LENGTH(p) == 0)
            return 1;
        if (PyUnicode_READ_CHAR(p, 0) == c && matches_at(text, at, lim, p))
            return 1;
    }
    return 0;
}

static int
has_char(PyObject *chars, Py_UCS4 c)
{
    return PyUnicode_FindChar(chars, c, 0, PyUnicode_GET_LENGTH(chars), 1) >= 0;
}

/* where the line at pos ends: its "\n", or end (-2 on error) */
static Py_ssize_t
line_end(PyObject *text, Py_ssize_t pos, Py_ssize_t end)
{
    if (PyUnicode_KIND(text) == PyUnicode_1BYTE_KIND) {
        const char *data = PyUnicode_DATA(text);
        const char *q = memchr(data + pos, '\n', (size_t)(end - pos));
        return q ? q - data : end;
    }
    Py_ssize_t eol = PyUnicode_FindChar(text, '\n', pos, end, 1);
    return eol == -1 ? end : eol;
}

/* the record's parser is not None: a parser wants it (-1 on error) */
static int
is_kept(PyObject *rec)
{
    PyObject *parser = PyObject_GetAttr(rec, s_parser);
    if (parser == NULL)
        return -1;
    int kept = parser != Py_None;
    Py_DECREF(parser);
    return kept;
}

static int
attr_true(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    int t = PyObject_IsTrue(v);
    Py_DECREF(v);
    return t;
}

/* RecordAssembler._add: the line's message and number appended unless the record is cut; cut once
 * it holds max_lines (0 on success, -1 on error) */
static int
add_line(PyObject *rec, PyObject *text, Py_ssize_t start, Py_ssize_t stop, Py_ssize_t line_no,
         Py_ssize_t max_lines)
{
    int cut = attr_true(rec, s_cut);
    if (cut != 0)
        return cut < 0 ? -1 : 0;
    PyObject *lines = PyObject_GetAttr(rec, s_lines), *nos = NULL, *line = NULL, *no = NULL;
    int rc = -1;
    if (lines == NULL || (nos = PyObject_GetAttr(rec, s_line_nos)) == NULL)
        goto done;
    if ((line = PyUnicode_Substring(text, start, stop)) == NULL || PyList_Append(lines, line) < 0)
        goto done;
    if ((no = PyLong_FromSsize_t(line_no)) == NULL || PyList_Append(nos, no) < 0)
        goto done;
    rc = PyList_GET_SIZE(lines) >= max_lines ? PyObject_SetAttr(rec, s_cut, Py_True) : 0;
done:
    Py_XDECREF(lines);
    Py_XDECREF(nos);
    Py_XDECREF(line);
    Py_XDECREF(no);
    return rc;
}

typedef struct {
    PyObject *firsts, *starts, *cont_starts, *prefix_firsts, *levels, *glog_match, *known_arts, *marks;
} Rules;

/* A line whose glog prefix starts a record no parser wants, of the process of `last` (a record no
 * parser wants, without a rank): `last` becomes that record, as RecordAssembler._prefixed would
 * make it (1), or the line is not such a line and is left to _fresh (0), or an error (-1). */
static int
next_unkept(PyObject *assembler, PyObject *last, PyObject *text, Py_ssize_t pos, Py_ssize_t eol,
            Py_ssize_t line_no, const Rules *r, PyObject **new_prefix)
{
    PyObject *rank = PyObject_GetAttr(last, s_rank);
    if (rank == NULL)
        return -1;
    int ranked = rank != Py_None;
    Py_DECREF(rank);
    if (ranked)
        return 0;
    PyObject *m = PyObject_CallFunction(r->glog_match, "Onn", text, pos, eol);
    if (m == NULL)
        return -1;
    if (m == Py_None) {
        Py_DECREF(m);
        return 0;
    }
    int rc = -1;
    PyObject *groups = NULL, *endobj = NULL, *pid = NULL, *art = NULL, *key = NULL;
    PyObject *open = NULL, *prefix = NULL;
    /* level, md, hms, us, pid, path, lineno, cid, art: reader._GLOG's groups */
    if ((groups = PyObject_CallMethodNoArgs(m, s_groups)) == NULL)
        goto done;
    if (!PyTuple_Check(groups) || PyTuple_GET_SIZE(groups) != 9) {
        PyErr_SetString(PyExc_TypeError, "skim: the glog pattern must have 9 groups");
        goto done;
    }
    if ((endobj = PyObject_CallMethodNoArgs(m, s_end)) == NULL)
        goto done;
    Py_ssize_t mend = PyLong_AsSsize_t(endobj);
    if (mend == -1 && PyErr_Occurred())
        goto done;
    if ((pid = PyLong_FromUnicodeObject(PyTuple_GET_ITEM(groups, 4), 10)) == NULL)
        goto done;
    /* the prefix ends with "]"; the match, with the one space after it when there is one */
    Py_ssize_t pend = PyUnicode_READ_CHAR(text, mend - 1) == ' ' ? mend - 1 : mend;
    if ((prefix = PyUnicode_Substring(text, pos, pend)) == NULL)
        goto done;
    PyObject *last_prefix = PyObject_GetAttr(last, s_prefix);
    if (last_prefix == NULL)
        goto done;
    int same = PyObject_RichCompareBool(prefix, last_prefix, Py_EQ);
    Py_DECREF(last_prefix);
    if (same != 0) {   /* the same prefix: _prefixed decides whether the line continues the record */
        rc = same < 0 ? -1 : 0;
        goto done;
    }
    /* its message starts a record: _prefixed asks whether a parser wants it */
    if (mend < eol && has_char(r->firsts, PyUnicode_READ_CHAR(text, mend))
            && starts_with_any(text, mend, eol, r->starts)) {
        rc = 0;
        goto done;
    }
    PyObject *art_group = PyTuple_GET_ITEM(groups, 8);
    if (art_group != Py_None) {
        if ((art = PyUnicode_Substring(art_group, 2, PyUnicode_GET_LENGTH(art_group))) == NULL)
            goto done;
        int known = PySequence_Contains(r->known_arts, art);
        if (known < 0)
            goto done;
        if (known) {   /* the tail of a record whose start is missing, an error _prefixed reports */
            rc = 0;
            goto done;
        }
    } else {
        art = Py_NewRef(Py_None);
    }
    /* the open record of (no rank, this pid) must be the current one: of the same process */
    if ((open = PyObject_GetAttr(assembler, s_open)) == NULL || (key = PyTuple_Pack(2, Py_None, pid)) == NULL)
        goto done;
    if (!PyDict_Check(open)) {
        PyErr_SetString(PyExc_TypeError, "skim: the assembler's _open must be a dict");
        goto done;
    }
    PyObject *current = PyDict_GetItemWithError(open, key);   /* borrowed */
    if (current != last) {
        rc = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    PyObject *start_line = PyLong_FromSsize_t(line_no);
    if (start_line == NULL)
        goto done;
    int failed = PyObject_SetAttr(last, s_start_line, start_line) < 0
        || PyObject_SetAttr(last, s_prefix, prefix) < 0
        || PyObject_SetAttr(last, s_compile_id, PyTuple_GET_ITEM(groups, 7)) < 0
        || PyObject_SetAttr(last, s_artifact, art) < 0
        || PyObject_SetAttr(last, s_level, PyTuple_GET_ITEM(groups, 0)) < 0;
    Py_DECREF(start_line);
    if (failed)
        goto done;
    *new_prefix = Py_NewRef(prefix);
    rc = 1;
done:
    Py_DECREF(m);
    Py_XDECREF(groups);
    Py_XDECREF(endobj);
    Py_XDECREF(pid);
    Py_XDECREF(art);
    Py_XDECREF(open);
    Py_XDECREF(key);
    Py_XDECREF(prefix);
    return rc;
}

static PyObject *
skim(PyObject *module, PyObject *args)
{
    PyObject *assembler, *text, *rules_t;
    Py_ssize_t pos, end, line_no, max_lines;
    if (!PyArg_ParseTuple(args, "OUnnnnO!:skim", &assembler, &text, &pos, &end, &line_no, &max_lines,
                          &PyTuple_Type, &rules_t))
        return NULL;
    Rules r;
    if (!PyArg_ParseTuple(rules_t, "UO!O!UUOOO!:skim rules", &r.firsts, &PyTuple_Type, &r.starts,
                          &PyTuple_Type, &r.cont_starts, &r.prefix_firsts, &r.levels, &r.glog_match,
                          &r.known_arts, &PyTuple_Type, &r.marks))
        return NULL;
    if (pos < 0 || end > PyUnicode_GET_LENGTH(text) || pos > end) {
        PyErr_SetString(PyExc_ValueError, "skim: pos and end must lie within text");
        return NULL;
    }
#if PY_VERSION_HEX < 0x030C0000  /* before 3.12 a str may still need its compact form built */
    PyObject *strs[5] = {text, r.firsts, r.prefix_firsts, r.levels, NULL};
    for (int t = 0; strs[t] != NULL; t++)
        if (PyUnicode_READY(strs[t]) < 0)
            return NULL;
#endif
    PyObject *tuples[3] = {r.starts, r.cont_starts, r.marks};
    for (int t = 0; t < 3; t++)
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(tuples[t]); k++) {
            PyObject *item = PyTuple_GET_ITEM(tuples[t], k);
            if (!PyUnicode_Check(item)) {
                PyErr_SetString(PyExc_TypeError, "skim: the rules' tuples must hold str");
                return NULL;
            }
#if PY_VERSION_HEX < 0x030C0000
            if (PyUnicode_READY(item) < 0)
                return NULL;
#endif
        }

    PyObject *last = PyObject_GetAttr(assembler, s_last), *lp = NULL, *result = NULL;
    if (last == NULL || (lp = PyObject_GetAttr(assembler, s_last_prefix)) == NULL)
        goto out;
    if (lp != Py_None && !PyUnicode_Check(lp)) {
        PyErr_SetString(PyExc_TypeError, "skim: the assembler's _last_prefix must be a str or None");
        goto out;
    }
    int bare_ok = attr_true(assembler, s_bare_ok);
    if (bare_ok < 0)
        goto out;
    /* whether a parser wants the current record: the same for the whole call, since `last` is only
     * ever replaced in place by another record no parser wants (next_unkept) */
    int kept = last == Py_None ? 0 : is_kept(last);
    if (kept < 0)
        goto out;
    int bare_ok_was = bare_ok, prefix_changed = 0;
    Py_ssize_t records = 0;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t eol = -1;   /* where the line at pos ends, once found (-1: not yet) */

    while (pos < end) {
        /* a run of lines that continue the current record */
        if (lp != Py_None) {
            int keep = kept;
            PyObject *lines = NULL, *nos = NULL;
            Py_ssize_t room = 0, msg = PyUnicode_GET_LENGTH(lp) + 1, n = 0;
            if (keep) {
                int cut = attr_true(last, s_cut);
                if (cut < 0)
                    goto out;
                keep = !cut;
            }
            if (keep) {
                if ((lines = PyObject_GetAttr(last, s_lines)) == NULL)
                    goto out;
                if ((nos = PyObject_GetAttr(last, s_line_nos)) == NULL || !PyList_Check(lines)
                        || !PyList_Check(nos)) {
                    if (nos != NULL)
                        PyErr_SetString(PyExc_TypeError, "skim: a record's lines must be lists");
                    Py_DECREF(lines);
                    Py_XDECREF(nos);
                    goto out;
                }
                room = max_lines - PyList_GET_SIZE(lines);
            }
            while (pos < end) {
                if ((eol = line_end(text, pos, end)) == -2)
                    goto fail_run;
                if (!matches_at(text, pos, eol, lp))
                    break;   /* eol stays the end of the line at pos, found once */
                if (eol - pos > msg && has_char(r.firsts, PyUnicode_READ(kind, data, pos + msg))
                        && starts_with_any(text, pos + msg, eol, r.starts))
                    break;
                if (keep && n < room) {
                    PyObject *line = PyUnicode_Substring(text, pos + msg < eol ? pos + msg : eol, eol);
                    if (line == NULL)
                        goto fail_run;
                    int failed = PyList_Append(lines, line);
                    Py_DECREF(line);
                    if (failed)
                        goto fail_run;
                    PyObject *no = PyLong_FromSsize_t(line_no + n);
                    if (no == NULL)
                        goto fail_run;
                    failed = PyList_Append(nos, no);
                    Py_DECREF(no);
                    if (failed)
                        goto fail_run;
                }
                n++;
                pos = eol + 1;
            }
            if (pos > end)
                pos = end;
            line_no += n;
            if (n > 0)
                bare_ok = 1;   /* a line with the record's prefix: unprefixed lines may continue it */
            Py_XDECREF(lines);
            Py_XDECREF(nos);
            if (keep && n > 0 && n >= room && PyObject_SetAttr(last, s_cut, Py_True) < 0)
                goto out;
            if (pos >= end)
                break;
            goto run_done;
        fail_run:
            Py_XDECREF(lines);
            Py_XDECREF(nos);
            goto out;
        }
    run_done:;
        /* the line at pos does not continue the current record */
        if (eol < pos && (eol = line_end(text, pos, end)) == -2)
            goto out;
        if (eol == pos) {   /* an empty line: part of a record that may take unprefixed lines */
            if (bare_ok && kept && add_line(last, text, pos, pos, line_no, max_lines) < 0)
                goto out;
        } else {
            Py_UCS4 c = PyUnicode_READ(kind, data, pos);
            if (has_char(r.levels, c)) {
                if (last == Py_None || kept)
                    break;
                PyObject *prefix = NULL;
                int took = next_unkept(assembler, last, text, pos, eol, line_no, &r, &prefix);
                if (took < 0)
                    goto out;
                if (!took)
                    break;
                Py_SETREF(lp, prefix);
                prefix_changed = 1;
                bare_ok = 1;
                records++;
            } else if (has_char(r.prefix_firsts, c)) {
                break;   /* it may start with a prefix other than glog's */
            } else {
                int marked = 0;
                for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(r.marks) && !marked; k++) {
                    Py_ssize_t at = PyUnicode_Find(text, PyTuple_GET_ITEM(r.marks, k), pos, eol, 1);
                    if (at == -2)
                        goto out;
                    marked = at >= 0;
                }
                if (marked || starts_with_any(text, pos, eol, r.starts))
                    break;   /* a prefix later in the line, or the start of a bare record */
                if (bare_ok && last != Py_None && starts_with_any(text, pos, eol, r.cont_starts)) {
                    if (kept && add_line(last, text, pos, eol, line_no, max_lines) < 0)
                        goto out;
                } else {
                    bare_ok = 0;   /* plain program output: ends any unprefixed continuation */
                }
            }
        }
        line_no++;
        pos = eol + 1;
    }
    if (pos > end)
        pos = end;
    if (prefix_changed && PyObject_SetAttr(assembler, s_last_prefix, lp) < 0)
        goto out;
    if (bare_ok != bare_ok_was && PyObject_SetAttr(assembler, s_bare_ok, bare_ok ? Py_True : Py_False) < 0)
        goto out;
    if (records) {
        PyObject *was = PyObject_GetAttr(assembler, s_records), *delta = NULL, *now = NULL;
        int failed = was == NULL || (delta = PyLong_FromSsize_t(records)) == NULL
            || (now = PyNumber_Add(was, delta)) == NULL || PyObject_SetAttr(assembler, s_records, now) < 0;
        Py_XDECREF(was);
        Py_XDECREF(delta);
        Py_XDECREF(now);
        if (failed)
            goto out;
    }
    result = Py_BuildValue("nn", pos, line_no);
out:   /* on success and on errors alike: result is NULL unless everything above succeeded */
    Py_XDECREF(last);
    Py_XDECREF(lp);
    return result;
}

static PyMethodDef methods[] = {
    {"skim", skim, METH_VARARGS, "skim(assembler, text, pos, end, line_no, max_lines, rules) -> (pos, line_no)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_skim",
    "The lines the TORCH_LOGS record assembler only skims, read in C (see reader.py).", -1, methods,
};

PyMODINIT_FUNC
PyInit__skim(void)
{
    struct { PyObject **slot; const char *name; } names[] = {
        {&s_last, "_last"}, {&s_last_prefix, "_last_prefix"}, {&s_bare_ok, "_bare_ok"},
        {&s_records, "records"}, {&s_open, "_open"}, {&s_parser, "parser"}, {&s_lines, "lines"},
        {&s_line_nos, "line_nos"}, {&s_cut, "cut"}, {&s_rank, "rank"},
        {&s_prefix, "prefix"}, {&s_start_line, "start_line"}, {&s_compile_id, "compile_id"},
        {&s_artifact, "artifact"}, {&s_level, "level"}, {&s_groups, "groups"},
        {&s_end, "end"},
    };
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if ((*names[k].slot = PyUnicode_InternFromString(names[k].name)) == NULL)
            return NULL;
    return PyModule_Create(&module);
}
