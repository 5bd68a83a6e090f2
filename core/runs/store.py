"""Run store: every run's config, status, timings, progress, curves, metrics and artefacts, and the user's note
and tags on it.

One SQLite file (`<root>/runs.sqlite`) shared by the Streamlit app, the CLI and the detached
worker processes, so a run survives the browser tab that started it. WAL mode lets readers go on
while a worker commits; busy_timeout makes concurrent writers wait instead of failing. Every
operation opens its own short connection and transaction, so no connection crosses a thread or a
process. Loss points and evaluation points live in their own tables: appending is one INSERT,
so two writers can never overwrite each other's points.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import shutil
import signal
import sqlite3
import time
import unicodedata
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import UserError, os_error, shorten
from core.storage import home

STATUSES = ("queued", "running", "done", "failed", "cancelled")
ACTIVE = ("queued", "running")
PARENT_KINDS = ("sweep", "reproduce")  # kinds whose runs train child runs (their sweep_id names the parent)
DB_NAME = "runs.sqlite"
TMP_NAME = ".tmp"  # a run's staged artefacts live in <run_dir>/.tmp until the job has succeeded
BUSY_TIMEOUT_S = 30.0
ORPHAN_GRACE_S = 300.0  # a queued run nobody claimed for this long will never start
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_ACTIVE_SQL = "status IN ('queued', 'running')"
_ANY_PID = object()  # _finish: no condition on which process owns the run
# SQLite's primary result codes (sqlite3.Error.sqlite_errorcode & 0xFF) that a user can act on.
_PERM, _BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 3, 5, 6, 8, 10, 11, 13, 14, 26
_LOW_SPACE = 1 << 20  # an I/O error with less free space than this is a full disk
NOTE_MAX = 5_000  # characters of a run's note: a paragraph or two, not a lab notebook
TAG_MAX = 40  # characters of one tag
TAGS_MAX = 20  # tags on one run
_INVISIBLE = ("Cc", "Cf", "Cs", "Co", "Cn")  # control, format (zero-width), surrogate, private and unassigned

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    created REAL NOT NULL,
    started REAL,
    finished REAL,
    config TEXT NOT NULL,
    progress TEXT NOT NULL DEFAULT '{}',
    metrics_before TEXT,
    metrics_after TEXT,
    artefacts TEXT NOT NULL DEFAULT '{}',
    error TEXT,
    pid INTEGER,
    sweep_id TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    note TEXT NOT NULL DEFAULT '',
    tags TEXT NOT NULL DEFAULT '[]',
    corpus_name TEXT
);
CREATE INDEX IF NOT EXISTS runs_created ON runs (created);
CREATE INDEX IF NOT EXISTS runs_sweep ON runs (sweep_id);
CREATE TABLE IF NOT EXISTS losses (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step INTEGER NOT NULL,
    loss REAL
);
CREATE INDEX IF NOT EXISTS losses_run ON losses (run_id);
CREATE TABLE IF NOT EXISTS history (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    point TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS history_run ON history (run_id);
CREATE TABLE IF NOT EXISTS exits (
    pid INTEGER NOT NULL,
    status INTEGER NOT NULL,
    at REAL NOT NULL
);
"""
# Columns added after the first release: a database made before gets them on opening (ALTER TABLE ADD COLUMN, in
# the same write transaction as the schema, so two processes opening it at once add each column once).
_ADDED_COLUMNS = {
    "note": "TEXT NOT NULL DEFAULT ''",
    "tags": "TEXT NOT NULL DEFAULT '[]'",
    "corpus_name": "TEXT",
}


@dataclass
class Run:
    """One row of the store, with its loss curve and evaluation history."""

    id: str
    kind: str
    status: str
    created: float
    started: float | None
    finished: float | None
    config: dict
    progress: dict
    metrics_before: dict | None
    metrics_after: dict | None
    history: list[dict]
    losses: list[dict]
    artefacts: dict
    error: str | None
    pid: int | None
    sweep_id: str | None
    cancel_requested: bool
    note: str = ""
    tags: list[str] = field(default_factory=list)
    corpus_name: str | None = None  # the corpus as the user named it (an upload's file name); None: not recorded
    damaged: list[str] = field(default_factory=list)  # stored fields whose JSON could not be read (see `error`)

    @property
    def active(self) -> bool:
        """Queued or running: not finished one way or another yet."""
        return self.status in ACTIVE

    @property
    def before(self) -> dict | None:
        """The base model's metrics: stored when the run finished, else those it reported while running, since a
        run cancelled or failed after measuring them still measured them."""
        return self.metrics_before or self.progress.get("metrics_before")


def pid_alive(pid: int) -> bool:
    """True if the process exists and has not exited (an exited, un-waited child is a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # no procfs (macOS) or the process just went away
        return False
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"


def _json_default(obj: Any) -> Any:
    """Metrics often arrive as numpy scalars/arrays and configs as Paths; store them as plain JSON."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _dumps(obj: Any) -> str | None:
    return None if obj is None else json.dumps(obj, default=_json_default)


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


DAMAGED = "damaged record"  # how a run whose stored JSON cannot be read is described (Run.error)
_SHAPES: dict[str, tuple[type, ...]] = {  # what each JSON column holds, and what it reads as when it cannot be read
    "config": (dict,), "progress": (dict,), "metrics_before": (dict, type(None)), "metrics_after": (dict, type(None)),
    "artefacts": (dict,), "tags": (list,), "point": (dict,)}


def _read(text: str | None, column: str, damaged: list[str]) -> Any:
    """A JSON column's value, or its empty value with the column added to `damaged` when the text is not JSON of
    the column's shape (edited by hand, a torn write): one bad row must not stop every listing."""
    shapes = _SHAPES[column]
    try:
        value = _loads(text)
    except (ValueError, RecursionError):
        value = damaged  # not of any column's shape
    if isinstance(value, shapes):
        return value
    damaged.append(column)
    return shapes[0]()


def clean_note(note: object) -> str:
    """A run's note as stored: text with surrounding whitespace trimmed, at most NOTE_MAX characters (a longer one is
    refused, not cut, so nothing the user wrote is silently lost)."""
    if not isinstance(note, str):
        raise UserError(f"A note must be text, got {type(note).__name__}.")
    note = note.strip()
    if len(note) > NOTE_MAX:
        raise UserError(f"A note holds at most {NOTE_MAX:,} characters; this one has {len(note):,}. Shorten it and "
                        "save again.")
    return note


def clean_tags(tags: str | Iterable[object]) -> list[str]:
    """Tags as stored: text split at commas (so "a, b" is two tags), Unicode-normalised (NFKC), invisible characters
    (controls, zero-width) removed, runs of whitespace made one space; empty ones dropped and repeats (ignoring case)
    kept once, in their first spelling. A tag over TAG_MAX characters or more than TAGS_MAX tags is refused."""
    items = [tags] if isinstance(tags, str) else list(tags)
    odd = [t for t in items if not isinstance(t, str)]
    if odd:
        raise UserError(f"Tags must be text, got {type(odd[0]).__name__} {shorten(odd[0])}.")
    cleaned: dict[str, str] = {}
    for part in (p for item in items for p in item.split(",")):
        text = "".join(" " if c.isspace() else c for c in unicodedata.normalize("NFKC", part)
                       if c.isspace() or unicodedata.category(c) not in _INVISIBLE)
        tag = " ".join(text.split())
        if len(tag) > TAG_MAX:
            raise UserError(f"The tag '{shorten(tag, TAG_MAX)}' has {len(tag)} characters; a tag holds at most "
                            f"{TAG_MAX}. Put longer text in the note.")
        if tag:
            cleaned.setdefault(tag.casefold(), tag)
    if len(cleaned) > TAGS_MAX:
        raise UserError(f"A run takes at most {TAGS_MAX} tags; got {len(cleaned)}.")
    return list(cleaned.values())


def _new_id() -> str:
    """UTC time to the millisecond (so ids sort by creation) plus a random suffix (so two tabs never collide)."""
    now = time.time()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"{stamp}-{int(now * 1000) % 1000:03d}-{secrets.token_hex(3)}"


def _db_error(exc: sqlite3.Error, db: Path) -> UserError | None:
    """SQLite's errors that the user can act on as one line naming the file; None for anything else (a bug)."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary in (_BUSY, _LOCKED):
        return UserError(f"The runs database {db} is busy: another process has held it for over {BUSY_TIMEOUT_S:g} s "
                         f"({_lock_holders(db)}); let it finish or stop it, then try again.")
    if primary == _FULL or (primary == _IOERR and _free_bytes(db.parent) < _LOW_SPACE):
        return UserError(f"Could not write the runs database {db}: the disk is full; free some space and try again.")
    if primary in (_CORRUPT, _NOTADB):
        return UserError(f"The runs database {db} is damaged ({exc}); move it aside (with any {db.name}-wal and "
                         f"{db.name}-shm beside it) and a new, empty one is started; the run folders are kept.")
    if primary in (_PERM, _READONLY, _CANTOPEN, _IOERR):
        return UserError(f"Could not open or write the runs database {db} ({exc}); check that the disk is "
                         "working and the folder and file are writable.")
    return None


def _lock_holders(db: Path) -> str:
    """The processes holding a write lock on the database (Linux's /proc/locks, one cheap read), else how to find
    them. In WAL mode the writer's lock is on the -shm file."""
    try:
        inodes = {str(os.stat(path).st_ino) for path in (db, Path(f"{db}-shm")) if path.exists()}
        pids = sorted({int(f[4]) for f in (line.split() for line in Path("/proc/locks").read_text().splitlines())
                       if len(f) > 5 and f[3] == "WRITE" and f[5].rpartition(":")[2] in inodes} - {os.getpid()})
    except (OSError, ValueError):  # no procfs (macOS, Windows), or a line in another format
        pids = []
    shown = [f"process {pid}: {_command(pid)}" for pid in pids if pid > 0][:3]
    return "held by " + "; ".join(shown) if shown else f"find it with: fuser {db} {db}-shm"


def _command(pid: int) -> str:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "command unknown"
    return shorten(b" ".join(words).decode(errors="replace").strip(), 60)


def _free_bytes(folder: Path) -> int:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return _LOW_SPACE


def _loss_point(row: sqlite3.Row) -> dict:
    # SQLite stores NaN as NULL; a diverged loss must still show up as NaN, not vanish.
    return {"step": row["step"], "loss": math.nan if row["loss"] is None else row["loss"]}


class RunStore:
    """The runs database and the artefact folders next to it."""

    def __init__(self, root: Path | str | None = None) -> None:
        self.root = Path(root if root is not None else home()).expanduser().resolve()
        self.db_path = self.root / DB_NAME
        self._init_db()

    # -- plumbing ---------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        """A connection that waits for a busy database: SQLite's busy handler retries with back-off (1 ms growing to
        100 ms) for up to BUSY_TIMEOUT_S before the error _db_error turns into one line naming the holder."""
        con = sqlite3.connect(self.db_path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            con.row_factory = sqlite3.Row
            con.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            con.execute("PRAGMA foreign_keys = ON")
            con.execute("PRAGMA synchronous = NORMAL")  # safe with WAL; a commit costs no fsync
        except BaseException:
            con.close()
            raise
        return con

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """A busy, full, damaged or unwritable database as one UserError naming the file; the file itself is never
        replaced or rewritten to 'repair' it."""
        try:
            yield
        except sqlite3.Error as exc:
            error = _db_error(exc, self.db_path)
            if error is None:
                raise
            raise error from exc

    def _init_db(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise os_error(exc, self.root, "create the runs folder") from exc
        with self._errors():
            con = self._connect()
            try:
                con.execute("PRAGMA journal_mode = WAL")  # persistent: stored in the file itself
            finally:
                con.close()
        with self._tx() as con:  # executescript would commit first, so one statement at a time
            for statement in filter(str.strip, _SCHEMA.split(";")):
                con.execute(statement)
            have = {row["name"] for row in con.execute("PRAGMA table_info(runs)")}
            for name, spec in _ADDED_COLUMNS.items():
                if name not in have:
                    con.execute(f"ALTER TABLE runs ADD COLUMN {name} {spec}")

    @contextmanager
    def _tx(self, write: bool = True) -> Iterator[sqlite3.Connection]:
        """One connection, one transaction. Writes take the write lock up front (BEGIN IMMEDIATE)
        so a read-modify-write can never interleave with another process's write."""
        with self._errors():
            con = self._connect()
            try:
                con.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield con
                except BaseException:
                    if con.in_transaction:  # SQLite may have rolled back already (a full disk)
                        con.execute("ROLLBACK")
                    raise
                con.execute("COMMIT")
            finally:
                con.close()

    @staticmethod
    def _row(con: sqlite3.Connection, run_id: str) -> sqlite3.Row:
        row = con.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise UserError(f"No run with id '{run_id}'; it may have been deleted — pick one from the runs list.")
        return row

    def _update_json(self, run_id: str, column: str, updates: dict, merge: bool = True) -> None:
        with self._tx() as con:
            current = _loads(self._row(con, run_id)[column]) if merge else None
            value = {**(current or {}), **updates}
            con.execute(f"UPDATE runs SET {column} = ? WHERE id = ?", (_dumps(value), run_id))

    # -- create / read / delete ---------------------------------------------------------------

    def create(self, kind: str, config: dict, sweep_id: str | None = None, corpus_name: str | None = None) -> str:
        """A new queued run; its folder exists from the start so a worker can log into it (and is removed again
        when the row cannot be written: a busy or full database leaves no stray folder). `corpus_name` is the
        corpus as the user knows it, where the config names only a saved copy (an upload's content-hash file)."""
        run_id = _new_id()
        folder = self.run_dir(run_id)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise os_error(exc, folder, "create the run folder") from exc
        try:
            with self._tx() as con:
                con.execute(
                    "INSERT INTO runs (id, kind, status, created, config, sweep_id, corpus_name) "
                    "VALUES (?, ?, 'queued', ?, ?, ?, ?)",
                    (run_id, kind, time.time(), _dumps(config), sweep_id, corpus_name or None),
                )
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return run_id

    def get(self, run_id: str) -> Run:
        with self._tx(write=False) as con:
            row = self._row(con, run_id)
            return self._build([row], con, "id = ?", (run_id,), with_losses=True)[0]

    def list(self, kind: str | None = None, sweep_id: str | None = None, *, with_losses: bool = True) -> list[Run]:
        """Newest first. `with_losses=False` skips the (long) loss curves for a quick overview table."""
        clauses, params = ["1"], []
        if kind is not None:
            clauses.append("kind = ?")
            params.append(kind)
        if sweep_id is not None:
            clauses.append("sweep_id = ?")
            params.append(sweep_id)
        where = " AND ".join(clauses)
        with self._tx(write=False) as con:
            rows = con.execute(f"SELECT * FROM runs WHERE {where} ORDER BY created DESC, id DESC", params).fetchall()
            return self._build(rows, con, where, tuple(params), with_losses)

    @staticmethod
    def _build(rows: list[sqlite3.Row], con: sqlite3.Connection, where: str, params: tuple,
               with_losses: bool) -> list[Run]:
        """Attach curves with one query per table (not one per run), filtered like the runs."""
        subquery = f"SELECT id FROM runs WHERE {where}"
        losses: dict[str, list[dict]] = {}
        if with_losses:
            for r in con.execute(f"SELECT * FROM losses WHERE run_id IN ({subquery}) ORDER BY step, rowid", params):
                losses.setdefault(r["run_id"], []).append(_loss_point(r))
        history: dict[str, list[dict]] = {}
        damaged: dict[str, list[str]] = {}
        for r in con.execute(f"SELECT * FROM history WHERE run_id IN ({subquery}) ORDER BY rowid", params):
            bad = damaged.setdefault(r["run_id"], [])
            known = len(bad)
            point = _read(r["point"], "point", bad)
            if len(bad) == known:  # a point that cannot be read is left out of the curve
                history.setdefault(r["run_id"], []).append(point)
        return [RunStore._run(row, history.get(row["id"], []), losses.get(row["id"], []),
                              damaged.get(row["id"], [])) for row in rows]

    @staticmethod
    def _run(row: sqlite3.Row, history: list[dict], losses: list[dict], damaged: list[str]) -> Run:
        """A row as a Run; JSON that cannot be read leaves its field empty and says so in `error` (DAMAGED)."""
        values = {column: _read(row[column], column, damaged)
                  for column in ("config", "progress", "metrics_before", "metrics_after", "artefacts", "tags")}
        error = row["error"]
        fields = list(dict.fromkeys("history" if column == "point" else column for column in damaged))
        if fields:
            error = f"{DAMAGED}: its stored {', '.join(fields)} could not be read" + (f"; {error}" if error else "")
        return Run(id=row["id"], kind=row["kind"], status=row["status"], created=row["created"],
                   started=row["started"], finished=row["finished"], history=history, losses=losses, error=error,
                   pid=row["pid"], sweep_id=row["sweep_id"], cancel_requested=bool(row["cancel_requested"]),
                   note=row["note"], corpus_name=row["corpus_name"], damaged=fields, **values)

    def finished(self, corpus_fingerprint: str) -> list[Run]:
        """Done train runs trained on this corpus (by content fingerprint) whose model is still on disk,
        newest first: only these can be compared with the reference on this corpus."""
        return [
            run for run in self.list(kind="train", with_losses=False)
            if run.status == "done"
            and run.progress.get("summary", {}).get("corpus", {}).get("fingerprint") == corpus_fingerprint
            and bool(run.artefacts.get("model")) and Path(run.artefacts["model"]).is_dir()
        ]

    def annotate(self, run_id: str, note: object = None, tags: str | Iterable[object] | None = None) -> None:
        """Set a run's note and/or tags (None leaves one as it is), checked and cleaned by clean_note / clean_tags;
        any run, finished or not, can be annotated."""
        updates = {}
        if note is not None:
            updates["note"] = clean_note(note)
        if tags is not None:
            updates["tags"] = _dumps(clean_tags(tags))
        if not updates:
            return
        with self._tx() as con:
            self._row(con, run_id)  # a deleted run is named, not silently skipped
            con.execute(f"UPDATE runs SET {', '.join(f'{k} = ?' for k in updates)} WHERE id = ?",
                        (*updates.values(), run_id))

    def any_active(self) -> bool:
        """True while some run is queued or running (one cheap query, for per-rerun checks)."""
        with self._tx(write=False) as con:
            return con.execute(f"SELECT 1 FROM runs WHERE {_ACTIVE_SQL} LIMIT 1").fetchone() is not None

    def run_dir(self, run_id: str) -> Path:
        """Artefact folder; the id is checked so a crafted id can never point outside the root."""
        if not _ID_RE.fullmatch(run_id):
            raise UserError(f"'{run_id}' is not a valid run id; pick a run from the runs list.")
        return self.root / run_id

    def delete(self, run_id: str) -> None:
        """Remove the row, its curves and its folder; a live run must be cancelled first."""
        run = self.get(run_id)
        if run.active and run.pid is not None and pid_alive(run.pid):
            raise UserError(f"Run {run_id} is still {run.status}; cancel it and wait for it to stop before deleting it.")
        with self._tx() as con:
            con.execute("DELETE FROM runs WHERE id = ?", (run_id,))
        shutil.rmtree(self.run_dir(run_id), ignore_errors=True)

    # -- lifecycle ------------------------------------------------------------------------------

    def claim(self, run_id: str, pid: int) -> bool:
        """Record the process that will execute a queued run, so the reaper watches that process
        (and not the grace period). False if another process already claimed it."""
        with self._tx() as con:
            cur = con.execute("UPDATE runs SET pid = ? WHERE id = ? AND (pid IS NULL OR pid = ?)", (pid, run_id, pid))
            return cur.rowcount == 1

    def mark_running(self, run_id: str, pid: int) -> bool:
        """queued -> running. False (nothing changed) if the run was cancelled, finished, or
        claimed by another process meanwhile: the caller must then not execute it."""
        with self._tx() as con:
            cur = con.execute(
                "UPDATE runs SET status = 'running', pid = ?, started = ? "
                "WHERE id = ? AND status = 'queued' AND (pid IS NULL OR pid = ?)",
                (pid, time.time(), run_id, pid),
            )
            return cur.rowcount == 1

    def _finish(self, run_id: str, status: str, *, error: str | None = None, metrics_after: dict | None = None,
                artefacts: dict | None = None, if_pid: int | None | object = _ANY_PID) -> bool:
        """Move an active run to a final status. Final statuses are sticky, so a late reaper or a
        late worker can never overwrite the other's verdict. The run's staged files (TMP_NAME) are removed first,
        whoever records the verdict (worker, launcher, reaper): whoever reads a final status finds none left."""
        with self._tx() as con:
            row = self._row(con, run_id)
            if row["status"] not in ACTIVE or (if_pid is not _ANY_PID and row["pid"] != if_pid):
                return False
            shutil.rmtree(self.run_dir(run_id) / TMP_NAME, ignore_errors=True)
            con.execute(
                "UPDATE runs SET status = ?, finished = ?, error = ?, "
                "metrics_after = COALESCE(?, metrics_after), artefacts = ? WHERE id = ?",
                (status, time.time(), error, _dumps(metrics_after),
                 _dumps({**_loads(row["artefacts"]), **(artefacts or {})}), run_id),
            )
            return True

    def mark_done(self, run_id: str, metrics_after: dict | None = None, artefacts: dict | None = None) -> bool:
        return self._finish(run_id, "done", metrics_after=metrics_after, artefacts=artefacts)

    def mark_failed(self, run_id: str, error: str) -> bool:
        return self._finish(run_id, "failed", error=error)

    def mark_cancelled(self, run_id: str) -> bool:
        return self._finish(run_id, "cancelled")

    def request_cancel(self, run_id: str) -> None:
        """Ask the worker to stop; a queued run no process has claimed is cancelled right away."""
        with self._tx() as con:
            row = self._row(con, run_id)
            if row["status"] == "queued" and row["pid"] is None:
                con.execute("UPDATE runs SET status = 'cancelled', finished = ?, cancel_requested = 1 WHERE id = ?",
                            (time.time(), run_id))
            elif row["status"] in ACTIVE:
                con.execute("UPDATE runs SET cancel_requested = 1 WHERE id = ?", (run_id,))

    def cancel_requested(self, run_id: str) -> bool:
        with self._tx(write=False) as con:
            return bool(self._row(con, run_id)["cancel_requested"])

    def record_exit(self, pid: int, status: int) -> None:
        """Note how a worker process ended (its parent calls this), if it left a run active: the reaper then says
        how it died. Exits that left nothing unreported (the usual case) are not kept."""
        if status == 0:
            return
        with self._tx() as con:
            con.execute(f"INSERT INTO exits (pid, status, at) SELECT ?, ?, ? WHERE EXISTS "
                        f"(SELECT 1 FROM runs WHERE pid = ? AND {_ACTIVE_SQL})", (pid, status, time.time(), pid))

    def reap_orphans(self, grace_s: float = ORPHAN_GRACE_S) -> list[str]:
        """Fail active runs whose process is gone (killed, out of memory, machine rebooted), or
        that sat queued and unclaimed for longer than `grace_s`, and remove their staged artefacts.
        Call it when the app (re)starts, whenever the runs list is shown and while following a run.
        Returns the ids it marked failed."""
        with self._tx(write=False) as con:  # an exit recorded before the run was created belongs to a reused pid
            rows = con.execute(
                "SELECT id, pid, created, (SELECT status FROM exits WHERE exits.pid = runs.pid AND at >= created "
                f"ORDER BY at DESC LIMIT 1) AS exit_status FROM runs WHERE {_ACTIVE_SQL}").fetchall()
        reaped, served = [], []
        for row in rows:
            error = self._orphan_error(row["pid"], row["created"], row["exit_status"], grace_s)
            if error and self._finish(row["id"], "failed", error=error, if_pid=row["pid"]):  # removes .tmp too
                reaped.append(row["id"])
                served.append((row["pid"],))
        if served:
            with self._tx() as con:
                con.executemany("DELETE FROM exits WHERE pid = ?", served)
        return reaped

    @staticmethod
    def _orphan_error(pid: int | None, created: float, exit_status: int | None, grace_s: float) -> str | None:
        if pid is not None:
            if pid_alive(pid):
                return None
            if exit_status is not None and exit_status < 0:
                return (f"The worker process (pid {pid}) was killed by signal {-exit_status} "
                        f"({_signal_name(-exit_status)}) before it reported a result — by the system when memory ran "
                        "out, or by a user; see worker.log in the run folder.")
            if exit_status is not None:
                return (f"The worker process (pid {pid}) exited with status {exit_status} without reporting a "
                        "result; see worker.log in the run folder.")
            return (f"The worker process (pid {pid}) stopped without reporting a result — it was killed, "
                    "ran out of memory or the machine restarted; see worker.log in the run folder.")
        if time.time() - created > grace_s:
            return f"The run stayed queued for over {grace_s:.0f} s without a worker picking it up; start it again."
        return None

    # -- progress, curves, metrics, artefacts ---------------------------------------------------

    def set_progress(self, run_id: str, **progress: Any) -> None:
        """Merge fields (step, total, loss, examples_per_s, eta_s, phase, ...) into the progress."""
        self._update_json(run_id, "progress", progress)

    def add_loss(self, run_id: str, step: int, loss: float) -> None:
        self.add_losses(run_id, [(step, loss)])

    def add_losses(self, run_id: str, points: Iterable[tuple[int, float]]) -> None:
        """Append many loss points in one transaction (a worker buffers them between flushes)."""
        with self._tx() as con:
            con.executemany("INSERT INTO losses (run_id, step, loss) VALUES (?, ?, ?)",
                            [(run_id, int(step), float(loss)) for step, loss in points])

    def add_history(self, run_id: str, point: dict) -> None:
        """Append one evaluation point, e.g. {"step": 100, "knn_acc": 0.8}."""
        with self._tx() as con:
            con.execute("INSERT INTO history (run_id, point) VALUES (?, ?)", (run_id, _dumps(point)))

    def set_metrics_before(self, run_id: str, metrics: dict) -> None:
        self._update_json(run_id, "metrics_before", metrics, merge=False)
