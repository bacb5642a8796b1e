"""Archives from strangers: the one place with the rules for unpacking a .tar.gz / .tgz / .tar /
.zip, used alike by `compilewatch ingest`, the inbox worker and the dashboard's Upload page.

Every member is checked before a byte of it is written: no path outside the target (``../``,
absolute paths, drive letters), no links or device files in a tar, no symlinks in a zip. Extraction
streams each member through a counter, so a decompression bomb stops at the cap, not after it has
filled the disk: the caps are on total bytes written, number of entries and the ratio of bytes
written to the archive's own size. Nested archives are unpacked by the caller, up to ``max_depth``,
sharing one ``Budget`` so a bomb cannot hide one level down.

A damaged archive (bad CRC, a cut-off stream, an unknown compression method) is refused as a
whole with the member where it broke: storing half a bundle would later collide with the whole
one. Whatever was written for a refused archive is removed before the error is raised.
"""
from __future__ import annotations

import errno
import gzip
import os
import shutil
import stat
import tarfile
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from compilewatch.core import settings
from compilewatch.core.errors import InputError

SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")
_CHUNK = 1 << 20
_SKIP_TOP = ("__MACOSX",)


class ArchiveError(InputError):
    """An archive that is damaged, unsafe or over a cap; nothing of it is stored."""

    hint = "re-create the archive from the original files (.tar.gz, .tgz, .tar and .zip are read)"


@dataclass(frozen=True)
class ArchiveLimits:
    """Caps for one archive, nested archives included (the settings archive_max_*)."""

    max_total_bytes: int
    max_entries: int
    max_ratio: float                  # bytes written / archive bytes; logs compress 10-40x, zeros 1000x
    max_depth: int                    # an archive inside an archive inside an archive, no deeper
    ratio_floor_bytes: int = 64 * 2**20  # below this, any ratio: a small archive of text is fine

    @classmethod
    def from_settings(cls) -> "ArchiveLimits":
        """The caps from compilewatch's settings table (environment, else default). A value that is
        not a positive number is an InputError naming the variable."""
        values = {}
        for attr, name, conv in (("max_total_bytes", "archive_max_bytes", int), ("max_entries", "archive_max_entries", int),
                                 ("max_ratio", "archive_max_ratio", float), ("max_depth", "archive_max_depth", int)):
            raw = settings.get(name)
            try:
                values[attr] = conv(raw)
            except ValueError:
                values[attr] = -1
            if values[attr] < 0 or (values[attr] == 0 and attr != "max_depth"):
                s = settings.BY_NAME[name]
                raise InputError(f"{s.env}={raw!r} is not a positive number", f"unset it to use the default {s.default}")
        return cls(**values)


@dataclass
class Budget:
    """What one top-level archive (with its nested archives) has used so far."""

    limits: ArchiveLimits = field(default_factory=ArchiveLimits.from_settings)
    archive_bytes: int = 0
    written: int = 0
    entries: int = 0
    names: list = field(default_factory=list)

    def charge_entry(self, archive: str, member: str) -> None:
        self.entries += 1
        if self.entries > self.limits.max_entries:
            raise ArchiveError(f"{archive}: more than {self.limits.max_entries:,} entries (at {member!r})",
                               "split the upload, or raise COMPILEWATCH_ARCHIVE_MAX_ENTRIES")

    def charge_bytes(self, archive: str, member: str, n: int) -> None:
        self.written += n
        lim = self.limits
        if self.written > lim.max_total_bytes:
            raise ArchiveError(f"{archive}: unpacks to more than {lim.max_total_bytes / 2**20:,.0f} MiB (at {member!r})",
                               "split the upload, or raise COMPILEWATCH_ARCHIVE_MAX_BYTES")
        if self.written > lim.ratio_floor_bytes and self.written > lim.max_ratio * max(self.archive_bytes, 1):
            raise ArchiveError(
                f"{archive}: unpacks to more than {lim.max_ratio:g}x its own size (at {member!r}); "
                "this looks like a decompression bomb",
                "logs compress 10-40x; if this archive is genuine, raise COMPILEWATCH_ARCHIVE_MAX_RATIO")


def is_archive(path: Path) -> bool:
    return Path(path).name.lower().endswith(SUFFIXES)


def unpacked_size(path: Path) -> int:
    """About how many bytes there are to read in ``path`` once unpacked: a zip's members' sizes from
    its directory, a gzip stream's from its trailer (the last member's size, modulo 4 GiB), else
    the file's own size. For planning work only (ingest/workers.py), never for the caps above,
    which count what is really written."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError:
        return 0
    try:
        if path.name.lower().endswith(".zip"):
            with zipfile.ZipFile(path) as zf:
                return sum(info.file_size for info in zf.infolist())
        with open(path, "rb") as f:
            if size < 18 or f.read(2) != b"\x1f\x8b":
                return size
            f.seek(-4, os.SEEK_END)
            return max(size, int.from_bytes(f.read(4), "little"))
    except (OSError, zipfile.BadZipFile, ValueError):   # refused when unpacked, for its own reason
        return size


def _safe_relpath(archive: str, name: str) -> PurePosixPath | None:
    """The member's path relative to the target, or None for an entry to skip silently (the
    archive's own folder entry). Raises for anything that would land outside the target."""
    clean = name.replace("\\", "/")
    p = PurePosixPath(clean)
    if clean.startswith("/") or (len(clean) > 1 and clean[1] == ":") or ".." in p.parts:
        raise ArchiveError(f"{archive}: member {name!r} escapes the archive (a path outside it)",
                           "re-create the archive with relative paths inside one folder")
    if any(ord(c) < 32 for c in clean):
        raise ArchiveError(f"{archive}: member {name!r} has control characters in its name",
                           "rename the file before archiving it")
    parts = [x for x in p.parts if x not in ("", ".")]
    if not parts:
        return None
    return PurePosixPath(*parts)


def _copy_limited(src, dest: Path, archive: str, member: str, budget: Budget) -> None:
    with open(dest, "wb") as out:
        while True:
            chunk = src.read(_CHUNK)
            if not chunk:
                break
            budget.charge_bytes(archive, member, len(chunk))  # before writing: nothing past the cap
            out.write(chunk)


def _write_member(dest: Path, rel: PurePosixPath | None, name: str, is_dir: bool, open_src, display: str,
                  budget: Budget) -> None:
    if rel is None:
        return
    budget.charge_entry(display, name)
    target = dest / rel
    if is_dir:
        target.mkdir(parents=True, exist_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    with open_src() as src:
        _copy_limited(src, target, display, name, budget)


def _extract_zip(path: Path, dest: Path, budget: Budget, display: str) -> None:
    with zipfile.ZipFile(path) as zf:
        members = zf.infolist()
        for info in members:  # every name and type checked before anything is written
            rel = _safe_relpath(display, info.filename)
            mode = info.external_attr >> 16
            if rel is not None and stat.S_ISLNK(mode):
                raise ArchiveError(f"{display}: member {info.filename!r} is a symbolic link",
                                   "archive the files themselves, not links to them")
            if info.flag_bits & 0x1:
                raise ArchiveError(f"{display}: member {info.filename!r} is encrypted", "archive it without a password")
        for info in members:
            _write_member(dest, _safe_relpath(display, info.filename), info.filename, info.is_dir(),
                          lambda info=info: zf.open(info), display, budget)


def _extract_tar(path: Path, dest: Path, budget: Budget, display: str) -> None:
    # Streamed member by member ("r|"): the caps apply while reading, and a huge or endless
    # member list never sits in memory.
    with open(path, "rb") as raw:
        gz = None
        if raw.read(2) == b"\x1f\x8b":
            # tarfile's own gzip reader never checks the CRC, so damaged bytes would unpack as
            # garbage; GzipFile checks it at the end of the stream (read to the end below).
            gz = gzip.GzipFile(fileobj=raw)
        raw.seek(0)
        with tarfile.open(fileobj=gz or raw, mode="r|" if gz else "r|*") as tf:
            _extract_tar_members(tf, dest, budget, display)
        if gz is not None:
            while gz.read(_CHUNK):
                pass


def _tar_member_rel(display: str, member) -> PurePosixPath | None:
    """A tar member's path under the target, after the checks every tar member must pass."""
    rel = _safe_relpath(display, member.name)
    if member.issym() or member.islnk():
        raise ArchiveError(f"{display}: member {member.name!r} is a link (to {member.linkname!r})",
                           "archive the files themselves (tar without -h keeps links)")
    if not (member.isfile() or member.isdir()):
        raise ArchiveError(f"{display}: member {member.name!r} is a device or special file",
                           "archive only regular files and folders")
    return rel


def _extract_tar_members(tf, dest: Path, budget: Budget, display: str) -> None:
    for member in tf:
        rel = _tar_member_rel(display, member)
        _write_member(dest, rel, member.name, member.isdir(), lambda member=member: tf.extractfile(member),
                      display, budget)


def check_tar(path: Path, budget: Budget | None = None, display: str | None = None) -> int:
    """Check a .tar / .tar.gz against the rules and caps above without writing a byte: every
    member's path and type, the number of entries, and the bytes its members declare (a tar
    member's size is exactly what unpacking it writes). Returns how many regular files it holds.
    Raises ArchiveError with the reason, as `extract` would. For a server that takes archives from
    strangers and queues them: the refusal is said at once, the unpacking left to the ingest."""
    path = Path(path)
    display = display or path.name
    budget = budget if budget is not None else Budget()
    budget.archive_bytes += path.stat().st_size
    files = 0
    try:
        with open(path, "rb") as raw:
            gz = gzip.GzipFile(fileobj=raw) if raw.read(2) == b"\x1f\x8b" else None
            raw.seek(0)
            with tarfile.open(fileobj=gz or raw, mode="r|") as tf:
                for member in tf:
                    rel = _tar_member_rel(display, member)
                    if rel is None:
                        continue
                    budget.charge_entry(display, member.name)
                    if member.isfile():
                        files += 1
                        budget.charge_bytes(display, member.name, member.size)
            if gz is not None:
                while gz.read(_CHUNK):   # to the end, where the CRC is checked
                    pass
    except ArchiveError:
        raise
    except (tarfile.TarError, zlib.error, EOFError, OSError, ValueError) as e:
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            raise
        raise ArchiveError(f"{display} is damaged or not a readable archive: {type(e).__name__}: {e}") from None
    return files


def extract(path: Path, dest: Path, budget: Budget | None = None, display: str | None = None) -> Path:
    """Unpack ``path`` into ``dest`` under the rules above and return the folder to read: the one
    top-level folder when the archive holds exactly one, else ``dest``. Raises ArchiveError (an
    InputError) with the reason; ``dest`` is then removed."""
    path, dest = Path(path), Path(dest)
    display = display or path.name
    if budget is None:
        budget = Budget()
    budget.archive_bytes += path.stat().st_size
    dest.mkdir(parents=True, exist_ok=True)
    try:
        if path.name.lower().endswith(".zip"):
            _extract_zip(path, dest, budget, display)
        else:
            _extract_tar(path, dest, budget, display)
    except ArchiveError:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    except (tarfile.TarError, zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError,
            ValueError, OSError) as e:
        shutil.rmtree(dest, ignore_errors=True)
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            raise  # the store's disk is full: not the archive's fault, and not to be reported as such
        raise ArchiveError(f"{display} is damaged or not a readable archive: {type(e).__name__}: {e}") from None
    entries = [p for p in dest.iterdir() if not p.name.startswith(".") and p.name not in _SKIP_TOP]
    if len(entries) == 1 and entries[0].is_dir():
        return entries[0]
    return dest
