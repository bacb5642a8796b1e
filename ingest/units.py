"""Paths in, units of work out: one unit is one file, with what its bundle says about it.

Files, folders (walked; bundles inside are recognised), bundles and archives are expanded here;
each file's kind is then decided from its content (``resolve_kind``), a bundle's manifest role
confirming it. ``counts_events`` is the one rule for which files' events count.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from compilewatch.core.errors import InputError
from compilewatch.ingest import archives
from compilewatch.ingest import bundle as bundle_mod
from compilewatch.ingest import file_kind as detect
from compilewatch.ingest.results import FAILED, FileResult

ROLE_KIND = {"torch_logs": detect.TORCH_LOGS, "torch_trace": detect.TORCH_TRACE, "timings": detect.TIMINGS,
             "timings_ranks": detect.TIMINGS, "bench": detect.BENCH_CSV, "manifest": detect.MANIFEST}

TEXT_BESIDE_TRACE = "kept raw; this bundle's events come from its TORCH_TRACE"


@dataclass
class Unit:
    path: Path
    name: str
    role: str | None = None               # from a bundle manifest; None = sniff
    manifest: bundle_mod.Manifest | None = None
    events: bool = True                   # see counts_events
    explicit: bool = False                # named by the user (not found by walking a folder or archive)


@dataclass(eq=False)
class Packed:
    """An archive that ``expand(..., unpack_archives=False)`` left packed, at its place among the
    units: the parse worker that takes it unpacks it (``unpack``) and parses its files, so the
    archives of a folder are unpacked on every core rather than by the writing process before any
    parse starts (ingest/workers.py). It holds the same place among the failures, where what its
    unpacking failed on goes (``settle``)."""
    path: Path
    name: str
    limits: archives.ArchiveLimits


@dataclass(eq=False)
class NoFiles:
    """The place of "the folder holds no files to ingest" when all that ``expand(...,
    unpack_archives=False)`` found under a path was packed archives: said only if none of them
    holds a file or a failure either (``settle``)."""
    result: FileResult
    packed: list[Packed]


def counts_events(kind: str | None, bundle_kinds: set[str] | None) -> bool:
    """False for a bundle's TORCH_LOGS text when the bundle also has a TORCH_TRACE: both describe
    the same graph breaks and recompiles, so counting both would double every number. The trace is
    the structured, complete source; the text is still kept raw and listed with the run.
    `bundle_kinds` holds the kinds of the bundle's files; None for a file outside a bundle."""
    return not (bundle_kinds is not None and kind == detect.TORCH_LOGS and detect.TORCH_TRACE in bundle_kinds)


def missing(paths: Iterable) -> list[Path]:
    """The paths that do not exist: bad input the CLI refuses before doing anything."""
    return [Path(p) for p in paths if not Path(p).exists()]


def missing_error(paths: list[Path]) -> InputError:
    names = ", ".join(str(p) for p in paths)
    return InputError(f"no such file or folder: {names}", "check the path (a folder, bundle, archive or log file)")


def expand(paths: Iterable, tmp_root: Path, limits: archives.ArchiveLimits | None = None,
           unpack_archives: bool = True) -> tuple[list[Unit], list[FileResult]]:
    """Files, folders, bundles and archives -> units of work. A path that cannot be read becomes a
    failed FileResult; inside a folder that is per entry, so one corrupt archive or manifest among
    a hundred bundles fails alone. A folder or archive with no file in it is a failure too.
    Archives follow ingest/archives.py's rules and caps. With `unpack_archives` False, each archive that
    gets caps of its own (one given as a path, or found by walking a folder) is left packed: a
    ``Packed`` among the units and the failures, and ``settle`` gives the failures once each is
    unpacked."""
    units: list = []
    failures: list = []
    limits = limits or archives.ArchiveLimits.from_settings()
    for p in paths:
        p = Path(p)
        if not p.exists():
            failures.append(FileResult(p.name, detect.UNKNOWN, FAILED, message=str(missing_error([p])), bad_input=True))
        elif p.is_dir() or bundle_mod.is_archive(p):
            before = (len(units), len(failures))
            _expand_entry(p, p.name, tmp_root, units, failures, archives.Budget(limits), 0, unpack_archives)
            found, failed = units[before[0]:], failures[before[1]:]
            what = "folder" if p.is_dir() else "archive"
            empty = FileResult(p.name, detect.UNKNOWN, FAILED, bad_input=True,
                               message=f"the {what} holds no files to ingest")
            if not found and not failed:
                failures.append(empty)
            elif all(isinstance(u, Packed) for u in found) and len(failed) == len(found):
                # nothing but packed archives (each is one entry of both lists): known once unpacked
                failures.append(NoFiles(empty, found))
        else:
            units.append(Unit(p, p.name, explicit=True))
    return units, failures


def unpack(packed: Packed, tmp_root: Path) -> tuple[list[Unit], list[FileResult]]:
    """The units and failures of an archive ``expand`` left packed, as ``expand`` would have found
    them there (in a parse worker, or in the writing process)."""
    units: list[Unit] = []
    failures: list[FileResult] = []
    _expand_entry(packed.path, packed.name, tmp_root, units, failures, archives.Budget(packed.limits), 0)
    return units, failures


def settle(failures: list, unpacked: dict) -> list[FileResult]:
    """The failures of ``expand(..., unpack_archives=False)`` once every ``Packed`` is unpacked (`unpacked`:
    Packed -> its units and failures): the same failures, in the same order, that ``expand`` gives
    when it unpacks as it goes."""
    out: list[FileResult] = []
    for f in failures:
        if isinstance(f, Packed):
            out.extend(unpacked[f][1])
        elif isinstance(f, NoFiles):
            if not any(unpacked[p][0] or unpacked[p][1] for p in f.packed):
                out.append(f.result)
        else:
            out.append(f)
    return out


def unpack_all(units: list, failures: list, tmp_root: Path) -> tuple[list[Unit], list[FileResult]]:
    """Every ``Packed`` of ``expand(..., unpack_archives=False)`` unpacked here, in order."""
    unpacked = {u: unpack(u, tmp_root) for u in units if isinstance(u, Packed)}
    return ([x for u in units for x in (unpacked[u][0] if isinstance(u, Packed) else [u])],
            settle(failures, unpacked))


def _expand_entry(p: Path, name: str, tmp_root: Path, units: list, failures: list,
                  budget: archives.Budget, depth: int, unpack_archives: bool = True) -> None:
    try:
        if p.is_file():  # an archive: unpacked under the ingest's temp root, removed at the end
            if depth == 0:
                if not unpack_archives:
                    packed = Packed(p, name, budget.limits)
                    units.append(packed)
                    failures.append(packed)
                    return
                budget = archives.Budget(budget.limits)  # each top-level archive gets the full caps
            depth += 1
            if depth > budget.limits.max_depth:
                raise archives.ArchiveError(f"{name}: archives nested deeper than {budget.limits.max_depth} levels",
                                            "unpack the inner archives, or raise COMPILEWATCH_ARCHIVE_MAX_DEPTH")
            p = bundle_mod.extract_archive(p, Path(tempfile.mkdtemp(dir=tmp_root)), budget, name)
        if bundle_mod.is_bundle_dir(p):
            units.extend(bundle_units(p, name))
            return
    except (InputError, OSError) as e:
        failures.append(FileResult(name, detect.UNKNOWN, FAILED, message=str(e)))
        return
    for dirpath, dirnames, filenames in os.walk(p):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        d = Path(dirpath)
        if d != p and bundle_mod.is_bundle_dir(d):
            _expand_entry(d, f"{name}/{d.relative_to(p).as_posix()}", tmp_root, units, failures, budget, depth,
                          unpack_archives)
            dirnames[:] = []
            continue
        for fn in sorted(filenames):
            if fn.startswith("."):
                continue
            fp = d / fn
            rel = f"{name}/{fp.relative_to(p).as_posix()}"
            if bundle_mod.is_archive(fp):
                _expand_entry(fp, rel, tmp_root, units, failures, budget, depth, unpack_archives)
            else:
                units.append(Unit(fp, rel))


def bundle_units(root: Path, prefix: str) -> list[Unit]:
    manifest = bundle_mod.read_manifest(root)
    units = [Unit(root / bundle_mod.MANIFEST, f"{prefix}/{bundle_mod.MANIFEST}", "manifest", manifest)]
    roles = bundle_mod.bundle_files(root, manifest)
    kinds = {ROLE_KIND.get(role) for role, files in roles.items() if files} | {detect.MANIFEST}
    for role, files in roles.items():
        for f in files:
            units.append(Unit(f, f"{prefix}/{f.relative_to(root).as_posix()}", role, manifest,
                              events=counts_events(ROLE_KIND.get(role), kinds)))
    return units


def resolve_kind(unit: Unit) -> tuple[str, detect.Sniffed | None]:
    """(kind, Sniffed or None): the content decides, a bundle's manifest role confirms it. Raises
    OSError when the file cannot be read."""
    if unit.role == "manifest":
        return detect.MANIFEST, None
    sniffed = detect.sniff(unit.path, now=datetime.fromtimestamp(unit.path.stat().st_mtime, timezone.utc))
    kind = sniffed.kind
    if unit.role and ROLE_KIND.get(unit.role) and kind != detect.UNKNOWN:
        kind = ROLE_KIND[unit.role]
    return kind, sniffed
