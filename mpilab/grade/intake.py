"""A submission checked before nbgrader touches it, and what was found told to the student.

nbgrader copies a submission as whoever runs it (root under ``scripts/grade.sh``) and follows
links: a ``ring.c`` that is a link to ``/etc/shadow`` lands in the student's feedback, a
``lab2.ipynb`` that is a link to the solution notebook is graded as theirs, ``/dev/zero`` behind a
file's name is copied until the disk is full, and a FIFO stops the copy for good. And a notebook
nbgrader cannot read gives a silent 0. So, per student, before ``nbgrader autograde``
(:func:`before`):

* anything in ``submitted/<student>/<lab>/`` that is not a regular file or a directory (a
  symbolic link, a FIFO, a socket, a device), a file with other names (a hard link), a file over
  :data:`Limits.file_mb`, anything past :data:`Limits.entries` entries, :data:`Limits.total_mb`
  in all or :data:`Limits.depth` folders deep is moved out, unread and unfollowed, to
  ``refused/<lab>/<student>/`` in the course (nothing is deleted);
* the notebook is read as nbgrader will read it: if it cannot be (not JSON, not a notebook,
  nbgrader's metadata invalid), nothing in it can be graded and the reason is kept; if it can,
  the grading metadata of every cell the release has (its grade id, whether it is an answer, a
  test, locked, its points) is set back to the release's, so a test cell turned into an answer
  cell (graded by hand from outputs the student wrote) or an answer cell given points (which
  stops nbgrader) counts as released. The notebook as submitted is kept in
  ``intake/<lab>/<student>/``.

After autograde (:func:`after`), what was found goes into that student's feedback: a note at the
top of the graded notebook, or, when there is no graded notebook (nbgrader could not read it, or
it ran out of time), a feedback page that says why.

``nbgrader collect`` copies from the exchange with the same links followed: the course's
configuration makes it use :class:`SafeCollect`, which copies regular files and folders only,
within the same limits, and leaves the rest where the student put it. :func:`archives` does the
same for ``nbgrader zip_collect``'s downloads (an archive too large unpacked, or with too many
entries, is moved out before it is unpacked).

Usage (``scripts/grade.sh``, in the course root)::

    python -m mpilab.grade.intake before LAB STUDENT
    python -m mpilab.grade.intake after LAB STUDENT STATUS
    python -m mpilab.grade.intake archives LAB
"""

import argparse
import html
import json
import os
import shutil
import stat
import sys
import tarfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.nbgraderformat import MetadataValidator, ValidationError

from mpilab.core.errors import UsageError

#: Where refused entries go, and where each student's record and original notebook are kept.
REFUSED, RECORDS = "refused", "intake"
#: Grading metadata the release decides (nbgrader's cell metadata keys).
GRADING_KEYS = ("grade", "solution", "locked", "task", "points", "grade_id")


@dataclass(frozen=True)
class Limits:
    """What one submission may hold (``MPILAB_INTAKE_*`` override each)."""

    file_mb: float = 50.0
    total_mb: float = 200.0
    entries: int = 500
    depth: int = 8

    @classmethod
    def from_env(cls):
        out = {}
        for name, kind in (("file_mb", float), ("total_mb", float), ("entries", int), ("depth", int)):
            raw = os.environ.get(f"MPILAB_INTAKE_{name.upper()}")
            if raw is None:
                continue
            try:
                value = kind(raw)
            except ValueError:
                value = -1
            if not value > 0:
                raise UsageError(
                    f"MPILAB_INTAKE_{name.upper()}={raw!r} is not a positive number "
                    f"(default {getattr(cls, name)})"
                )
            out[name] = value
        return cls(**out)


@dataclass
class Refusal:
    """One entry of a submission that was not taken: its path in the submission and why."""

    path: str
    why: str


def kind(st):
    """What a file system entry is, in words, from its ``lstat``."""
    mode = st.st_mode
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISREG, "a regular file"),
    ):
        if test(mode):
            return name
    return "a file of an unknown kind"


def _why_not(path, st, limits, depth, seen):
    """Why the entry at ``path`` is refused (its lstat ``st``), or None; ``seen`` = [entries, bytes]."""
    seen[0] += 1
    if seen[0] > limits.entries:
        return f"the submission holds more than {limits.entries} files and folders"
    if stat.S_ISLNK(st.st_mode):
        try:
            return f"a symbolic link (to {os.readlink(path)}): the grader reads only files you wrote"
        except OSError:
            return "a symbolic link: the grader reads only files you wrote"
    if stat.S_ISDIR(st.st_mode):
        return f"folders deeper than {limits.depth} levels" if depth >= limits.depth else None
    if not stat.S_ISREG(st.st_mode):
        return f"{kind(st)}, not a regular file"
    if st.st_nlink > 1:
        return "a hard link (the file has other names on this disk): hand in a copy"
    if st.st_size > limits.file_mb * 2**20:
        return f"{st.st_size / 2**20:.0f} MiB: a file may hold at most {limits.file_mb:g} MiB"
    seen[1] += st.st_size
    if seen[1] > limits.total_mb * 2**20:
        seen[1] -= st.st_size
        return f"the submission would pass {limits.total_mb:g} MiB in all"
    return None


def _entries(folder, rel, names, limits, depth, seen):
    """``(name, path, relative path, lstat, why refused or None)`` of each entry ``names`` of
    ``folder`` that still exists, never followed (:func:`_why_not` counts it in ``seen``)."""
    for name in names:
        path = os.path.join(folder, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        yield (
            name,
            path,
            os.path.join(rel, name) if rel else name,
            st,
            _why_not(path, st, limits, depth, seen),
        )


def screen(submission, quarantine, limits=None, first=()):
    """Move out of ``submission`` everything :func:`_why_not` refuses; return the refusals.

    Entries are never opened or followed: they are renamed (moved) into ``quarantine``, at the
    same relative path. ``first`` names files to look at before the others (the notebook: it
    counts against the limits before anything else does).
    """
    limits = limits or Limits()
    submission = Path(submission)
    refused, seen = [], [0, 0]

    def walk(folder, rel, depth):
        try:
            names = sorted(os.listdir(folder))
        except OSError as exc:
            refused.append(Refusal(rel or ".", f"the folder cannot be read ({exc.strerror})"))
            return
        if not rel:
            names = [n for n in first if n in names] + [n for n in names if n not in first]
        for _, path, relpath, st, why in _entries(folder, rel, names, limits, depth, seen):
            if why:
                _move(path, Path(quarantine) / relpath)
                refused.append(Refusal(relpath, why))
            elif stat.S_ISDIR(st.st_mode):
                walk(path, relpath, depth + 1)

    walk(os.fspath(submission), "", 0)
    return refused


def _move(src, dest):
    """Rename ``src`` (any kind, not followed) to ``dest`` (a free name next to it if taken)."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    target, k = dest, 0
    while os.path.lexists(target):
        k += 1
        target = dest.with_name(f"{dest.name}.{k}")
    try:
        os.rename(src, target)
        return
    except OSError as exc:
        if exc.errno != 18:  # EXDEV: another file system below the course; recreate it there
            raise
    st = os.lstat(src)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), target)
    elif stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        shutil.move(src, target)
        return
    else:
        os.mknod(target, st.st_mode, st.st_rdev)
    os.unlink(src)


# ---- the notebook ------------------------------------------------------------------------------


def released_cells(course, lab):
    """``{grade_id: nbgrader metadata}`` of the release's cells, from the course's gradebook
    (``nbgrader generate_assignment`` wrote it); None when the gradebook has no such notebook."""
    db = Path(course) / "gradebook.db"
    if not db.exists():
        return None
    with Gradebook(f"sqlite:///{db}") as gb:
        try:
            nb = gb.find_notebook(lab, lab)
        except MissingEntry:
            return None
        grades = {c.name: c for c in nb.grade_cells}
        solutions = {c.name for c in nb.solution_cells}
        tasks = {c.name for c in nb.task_cells}
        out = {}
        for c in nb.source_cells:
            meta = {
                "grade": c.name in grades,
                "solution": c.name in solutions,
                "locked": bool(c.locked),
                "task": c.name in tasks,
                "grade_id": c.name,
            }
            if c.name in grades:
                meta["points"] = float(grades[c.name].max_score)
            out[c.name] = meta
        return out


def read_notebook(path, limits=None):
    """The notebook at ``path`` as nbgrader reads it, or raise ValueError saying why it cannot."""
    limits = limits or Limits()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise ValueError(f"it cannot be opened ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("it is not a regular file")
        raw = f.read(int(limits.file_mb * 2**20) + 1)
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"it is not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"it is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    try:
        nb = nbformat.reads(json.dumps(data), as_version=4)
        nbformat.validate(nb)
    except Exception as exc:  # nbformat raises several kinds on a broken notebook
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"it is not a valid notebook ({first[:300]})") from None
    return nb


def check_metadata(nb):
    """Raise ValueError saying why nbgrader's metadata checks refuse ``nb`` (they stop autograde)."""
    try:
        MetadataValidator().validate_nb(nb)
    except ValidationError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ValueError(f"nbgrader's metadata in it is invalid ({first[:300]})") from None
    except Exception as exc:  # an older or newer metadata schema
        raise ValueError(f"nbgrader's metadata in it cannot be read ({type(exc).__name__}: {exc})") from None


def _differs(key, have, want):
    if key == "points":
        if have is None and want is None:  # a cell that is not graded has no points
            return False
        try:
            return float(have) != float(want)
        except (TypeError, ValueError):
            return True
    return bool(have) != bool(want) if isinstance(want, bool) else have != want


def restore_grading(nb, released):
    """Set each cell's grading metadata back to the release's; return what was changed, in words.

    A cell with a grade id the release has gets the release's flags and points; a second cell
    with the same id loses its grading metadata (nbgrader grades the last, as it does); a cell
    whose id the release does not have loses it too (nbgrader drops it).
    """
    notes, seen = [], set()
    for index, cell in reversed(list(enumerate(nb.cells))):
        meta = cell.get("metadata", {}).get("nbgrader")
        if not isinstance(meta, dict) or "grade_id" not in meta:
            continue
        gid = str(meta["grade_id"])
        want = released.get(gid)
        if want is None:
            if meta.get("grade") or meta.get("solution") or meta.get("locked"):
                notes.append(
                    f"cell {index + 1} has the grade id {gid!r}, which the lab does not have: graded as plain"
                )
            cell.metadata.pop("nbgrader")
            continue
        if gid in seen:
            notes.append(f"the cell {gid!r} appears more than once: only the last one is graded")
            cell.metadata.pop("nbgrader")
            continue
        seen.add(gid)
        changed = sorted({k for k in GRADING_KEYS if _differs(k, meta.get(k), want.get(k))} - {"grade_id"})
        if changed:
            notes.append(f"the cell {gid!r} had its {', '.join(changed)} changed: it was graded as released")
            meta.pop("points", None)
            meta.update(want)
    for gid, want in released.items():
        if gid in seen:
            continue
        if want["grade"]:
            notes.append(f"the graded cell {gid!r} is missing: the released one was put back and graded")
        elif want["locked"]:
            notes.append(f"the locked cell {gid!r} is missing: the cells after it ran without it")
    return list(reversed(notes))


# ---- before and after autograde ----------------------------------------------------------------


def record_path(course, lab, student):
    return Path(course) / RECORDS / lab / f"{student}.json"


def _plain_name(name):
    return bool(name) and "/" not in name and not name.startswith(".") and name not in ("..",)


def before(course, lab, student, limits=None):
    """Check ``submitted/<student>/<lab>`` in ``course`` (see the module's description) and keep
    what was found for :func:`after`. Returns the record (also written as JSON)."""
    limits = limits or Limits.from_env()
    course = Path(course)
    if not _plain_name(student) or not _plain_name(lab):
        raise UsageError(f"bad student or lab name {student!r} / {lab!r}: a plain folder name is valid")
    record = {"refused": [], "notes": [], "unreadable": None}
    collected = record_path(course, lab, student).with_suffix(".collect.json")
    if collected.exists():
        record["refused"] += json.loads(collected.read_text()).get("refused", [])
    quarantine = course / REFUSED / lab / student
    for folder in (course / "submitted" / student, course / "submitted" / student / lab):
        st = os.lstat(folder) if os.path.lexists(folder) else None
        if st is not None and not stat.S_ISDIR(st.st_mode):
            _move(folder, quarantine / "submission-itself")
            record["refused"].append(asdict(Refusal(str(folder.relative_to(course)), kind(st))))
            record["unreadable"] = f"your submission's folder was {kind(st)}, not a folder"
    sub = course / "submitted" / student / lab
    notebook = f"{lab}.ipynb"
    if sub.is_dir() and not sub.is_symlink():
        record["refused"] += [asdict(r) for r in screen(sub, quarantine, limits, first=(notebook,))]
    path = sub / notebook
    if record["unreadable"] is None:
        refused = [r for r in record["refused"] if r["path"] == notebook]
        if refused:
            record["unreadable"] = f"{notebook} was refused: {refused[0]['why']}"
        elif not path.is_file():
            record["unreadable"] = f"there is no {notebook} in your submission"
        else:
            try:
                nb = read_notebook(path, limits)
                released = released_cells(course, lab)
                if released:
                    record["notes"] = restore_grading(nb, released)
                check_metadata(nb)
            except ValueError as exc:
                record["unreadable"] = f"{notebook} cannot be read: {exc}"
            else:
                if record["notes"]:
                    keep = record_path(course, lab, student).with_suffix("")
                    keep.mkdir(parents=True, exist_ok=True, mode=0o700)
                    shutil.copyfile(path, keep / notebook, follow_symlinks=False)
                    nbformat.write(nb, path)
    out = record_path(course, lab, student)
    out.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    out.write_text(json.dumps(record, indent=1))
    return record


def _ended(status):
    """How autograde ended, in words, from grade.sh's status ("ok", "killed at the 600 s limit",
    "failed (exit 1)")."""
    if status.startswith("killed"):
        return f"the grading of your notebook was stopped ({status}): it ran too long"
    return f"the grading of your notebook {status}"


def _lines(record, status):
    lines = [f"{r['path']}: {r['why']}; it was not graded" for r in record["refused"]]
    lines += record["notes"]
    if status not in ("ok", "", None) and not record["unreadable"]:
        lines.append(_ended(status))
    return lines


def after(course, lab, student, status="ok"):
    """Put what :func:`before` found (and how autograde ended, ``status``) into the student's
    feedback: a note at the top of the graded notebook, or a feedback page when there is none.
    Returns the lines told (none: nothing changed)."""
    course = Path(course)
    path = record_path(course, lab, student)
    record = (
        json.loads(path.read_text()) if path.exists() else {"refused": [], "notes": [], "unreadable": None}
    )
    lines = _lines(record, status)
    graded = course / "autograded" / student / lab / f"{lab}.ipynb"
    if graded.is_file() and not graded.is_symlink() and not record["unreadable"]:
        if lines:
            nb = nbformat.read(graded, as_version=4)
            text = "**The grader's notes on your submission**\n\n" + "\n".join(
                f"- {_markdown(line)}" for line in lines
            )
            nb.cells.insert(0, nbformat.v4.new_markdown_cell(text, metadata={"mpilab": "intake"}))
            nbformat.write(nb, graded)
        return lines
    why = record["unreadable"] or _ended(status) + ", so there is no graded notebook"
    lines = [why] + [line for line in lines if line != why]
    page = course / "feedback" / student / lab / f"{lab}.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    page.write_text(
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(lab)}: not graded</title>"
        f"</head><body><h1>{html.escape(lab)}: your submission could not be graded</h1>"
        f"<p>Every automatically graded cell scores 0, because {html.escape(why)}.</p><ul>{items}</ul>"
        "<p>Fix this and hand the lab in again, or ask your instructor.</p></body></html>\n"
    )
    return lines


def _markdown(text):
    """``text`` shown literally in a Markdown cell (file names may hold * _ ` < and the like):
    HTML's three (not quotes: their entity's ``#`` would be escaped below and show as text),
    then Markdown's punctuation."""
    out = html.escape(text, quote=False)
    for c in "\\`*_{}[]#+!|~>":
        out = out.replace(c, "\\" + c)
    return out


# ---- collecting ---------------------------------------------------------------------------------


def copy_tree(src, dest, limits=None):
    """Copy the folders and regular files of ``src`` into ``dest`` (created), never following a
    link and within ``limits``; return what was left behind (:class:`Refusal`)."""
    limits = limits or Limits()
    refused, seen = [], [0, 0]

    def walk(folder, target, rel, depth):
        os.makedirs(target, exist_ok=True)
        for name, path, relpath, st, why in _entries(
            folder, rel, sorted(os.listdir(folder)), limits, depth, seen
        ):
            if why:
                refused.append(Refusal(relpath, why))
            elif stat.S_ISDIR(st.st_mode):
                walk(path, os.path.join(target, name), relpath, depth + 1)
            else:
                try:
                    fi = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                except OSError as exc:
                    refused.append(Refusal(relpath, f"it cannot be read ({exc.strerror})"))
                    continue
                with os.fdopen(fi, "rb") as fin:
                    if not stat.S_ISREG(os.fstat(fi).st_mode):
                        refused.append(Refusal(relpath, "it is not a regular file"))
                        continue
                    with open(os.path.join(target, name), "xb") as fout:
                        shutil.copyfileobj(fin, fout)
                    os.utime(os.path.join(target, name), ns=(st.st_atime_ns, st.st_mtime_ns))

    walk(os.fspath(src), os.fspath(dest), "", 0)
    return refused


def archives(course, lab, limits=None):
    """Move out of ``downloaded/<lab>/archive/`` the archives ``nbgrader zip_collect`` must not
    unpack: more entries than allowed, more bytes unpacked than allowed, or unreadable. Returns
    ``{archive name: why}``."""
    limits = limits or Limits.from_env()
    folder = Path(course) / "downloaded" / lab / "archive"
    out = {}
    for path in sorted(folder.glob("*")) if folder.is_dir() else []:
        st = os.lstat(path)
        why = None
        if not stat.S_ISREG(st.st_mode):
            why = f"{kind(st)}, not a regular file"
        elif path.suffix in (".zip", ".gz"):
            why = _archive_too_big(path, limits)
        if why:
            _move(path, Path(course) / REFUSED / lab / "archive" / path.name)
            out[path.name] = why
    return out


def _archive_too_big(path, limits):
    """Why the archive at ``path`` must not be unpacked, or None (its own header's sizes)."""
    entries = size = 0
    # a whole course's download: the per-student limits times the students it may hold
    most_entries, most_bytes = limits.entries * 1000, limits.total_mb * 2**20 * 1000
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                for info in z.infolist():
                    entries, size = entries + 1, size + info.file_size
                    if entries > most_entries or size > most_bytes:
                        break
        else:
            with tarfile.open(path) as t:
                for member in t:
                    entries, size = entries + 1, size + member.size
                    if entries > most_entries or size > most_bytes:
                        break
    except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError) as exc:
        return f"it cannot be read as an archive ({exc})"
    if entries > most_entries:
        return f"it holds more than {most_entries} entries"
    if size > most_bytes:
        return f"it unpacks to more than {most_bytes / 2**20:g} MiB"
    return None


class SafeCollect(ExchangeCollect):
    """nbgrader's exchange collect whose copy follows no link (see the module's description):
    the course's configuration selects it (``ExchangeFactory.collect``)."""

    def init_src(self):
        super().init_src()
        # an inbound folder's name gives the student id: "../x" would put (and first delete!)
        # a folder outside submitted/
        bad = [r for r in self.src_records if not _plain_name(r["username"])]
        for r in bad:
            self.log.error("refused to collect %s: %r is not a student id", r["filename"], r["username"])
        self.src_records = [r for r in self.src_records if r not in bad]

    def do_copy(self, src, dest, log=None):
        student = os.path.basename(os.path.dirname(dest))
        refused = copy_tree(src, dest, Limits.from_env())
        if refused:
            lab = os.path.basename(dest)
            out = record_path(self.coursedir.root, lab, student).with_suffix(".collect.json")
            out.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            out.write_text(json.dumps({"refused": [asdict(r) for r in refused]}, indent=1))
            for r in refused:
                self.log.warning("%s: left %s in the exchange: %s", student, r.path, r.why)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m mpilab.grade.intake", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    b = sub.add_parser("before", help="check a submission before nbgrader autograde")
    b.add_argument("lab")
    b.add_argument("student")
    a = sub.add_parser("after", help="tell the student what was found, after nbgrader autograde")
    a.add_argument("lab")
    a.add_argument("student")
    a.add_argument("status", nargs="?", default="ok")
    z = sub.add_parser("archives", help="refuse LMS archives before nbgrader zip_collect")
    z.add_argument("lab")
    parser.add_argument("--course", default=".", help="the course root (default: here)")
    args = parser.parse_args(argv)
    try:
        if args.step == "before":
            record = before(args.course, args.lab, args.student)
            for r in record["refused"]:
                print(f"intake: {args.student}: refused {r['path']}: {r['why']}")
            for note in record["notes"]:
                print(f"intake: {args.student}: {note}")
            if record["unreadable"]:
                print(f"intake: {args.student}: nothing can be graded: {record['unreadable']}")
        elif args.step == "after":
            after(args.course, args.lab, args.student, args.status)
        else:
            for name, why in archives(args.course, args.lab).items():
                print(f"intake: refused the archive {name}: {why}")
    except UsageError as exc:
        print(f"intake: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
