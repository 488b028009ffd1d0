"""WAL checkpoints of a SQLite store, on a thread of their own rather than in the event
sink's commits.

A checkpoint copies the pages committed to the write-ahead log back into the database file.
SQLite runs one in whichever commit finds the log past 1,000 pages, so the event sink, the
store's heaviest writer, spent about a fifth of its time copying pages (bench/RESULTS.md,
"profiled again"). Here the sink's batches skip that (`sink_writes`) and nudge a thread that
checkpoints the file; SQLite releases the GIL while it copies, so the copying runs beside
the sink's next batch instead of in it.

Durability: with `synchronous=NORMAL` a commit reaches the disk when the log is synced, which
SQLite does in a checkpoint that has pages to copy. Left to itself it checkpoints every 1,000
pages, which at the pace of real trials can be minutes of commits; the thread checkpoints
within `INTERVAL_S` of an event batch or a trial's result (`committed`), so what a power loss
can take is bounded by time instead, for any store not written at tens of megabytes a second,
as long as no reader pins the log (a checkpoint copies, and syncs, nothing that a reader's
older snapshot still needs: such commits wait for the reader to finish, as they would without
the thread). Other commits (claims, heartbeats) are synced by the next checkpoint of either
kind. A log the thread lets grow
past `RESTART_PAGES` (it starts again from its beginning only when a writer finds it all
copied, which a sink writing without a pause never does) is restarted: a brief wait for the
writer and the readers of the moment, after which its file is emptied. The sink's own
connection keeps a backstop: its commits checkpoint as SQLite's would once the log passes
`BACKSTOP_PAGES`, should the thread not keep up.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

from sqlalchemy import Engine

log = logging.getLogger(__name__)

# At most one checkpoint this often: each syncs the log and the database file, so one per
# batch would sync twice a batch for no gain in what a power loss can take.
INTERVAL_S = 0.1
# 64 MiB of 4 KiB pages: a log that large is restarted rather than left to grow.
RESTART_PAGES = 16_384
RESTART_WAIT_S = 0.05
# The sink's commits checkpoint themselves past this (SQLite's own default is 1,000).
BACKSTOP_PAGES = 2 * RESTART_PAGES
SQLITE_DEFAULT_PAGES = 1_000
# A thread nobody nudged for this long ends (and closes its connection); the next batch
# starts another. No engine needs to know to stop it.
IDLE_S = 5.0


class Checkpointer:
    """The checkpoints of one database file: a thread, started by the first nudge."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.checkpoints = 0  # done, for tests and benchmarks
        self.restarts = 0

    def nudge(self) -> None:
        """Pages were committed: checkpoint them soon. Never raises: the commit is made, and
        a thread that cannot start leaves the writers' backstop to checkpoint."""
        with self._lock:
            self._wake.set()
            if self._thread is not None:
                return
            thread = threading.Thread(target=self._run, name=f"checkpoints {self.path}")
            thread.daemon = True
            try:
                thread.start()
            except RuntimeError as exc:  # no thread to be had: the next nudge tries again
                log.warning("No checkpoint thread for %s (%s).", self.path, exc)
                return
            self._thread = thread

    @property
    def running(self) -> bool:
        with self._lock:
            return self._thread is not None

    def _run(self) -> None:
        try:
            # The file itself (mode=rw): never a new empty database, should the path be gone.
            # A restart holds new writers back while it waits for the current writer and the
            # readers, so it waits briefly, and is tried again later if still busy.
            connection = sqlite3.connect(
                f"file:{quote(self.path)}?mode=rw",
                uri=True,
                timeout=RESTART_WAIT_S,
                check_same_thread=False,
            )
            try:
                while self._next():
                    self._checkpoint(connection)
                    # Nudges during the pause are served by the next checkpoint.
                    time.sleep(INTERVAL_S)
            finally:
                connection.close()
        except Exception:
            log.exception("Checkpoints of %s stopped; its writers checkpoint.", self.path)
        finally:
            with self._lock:
                if self._thread is threading.current_thread():
                    self._thread = None

    def _next(self) -> bool:
        """Wait for a nudge; False (and the thread is done) after IDLE_S without one."""
        if self._wake.wait(IDLE_S):
            self._wake.clear()
            return True
        with self._lock:
            if self._wake.is_set():  # nudged just now, as the wait ended
                self._wake.clear()
                return True
            self._thread = None
            return False

    def _checkpoint(self, connection: sqlite3.Connection) -> None:
        try:
            busy, pages, copied = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            if busy:  # another connection's checkpoint is running: it does the work
                return
            self.checkpoints += 1
            # Only once all is copied: a reader that pins older pages would make the restart
            # hold the writers back for its whole wait.
            if pages >= RESTART_PAGES and copied == pages:
                busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                self.restarts += 0 if busy else 1
        except sqlite3.Error as exc:
            # The writers' backstop still bounds the log; the next nudge tries again.
            log.warning("Checkpoint of %s failed (%s).", self.path, exc)


_CHECKPOINTERS: dict[str, Checkpointer] = {}
_REGISTRY = threading.Lock()


def checkpointer(path: str) -> Checkpointer:
    """The one Checkpointer of this process for the database file at `path`."""
    with _REGISTRY:
        found = _CHECKPOINTERS.get(path)
        if found is None:
            found = _CHECKPOINTERS[path] = Checkpointer(path)
        return found


def database_file(engine: Engine) -> str | None:
    """The absolute path of a SQLite engine's database file, or None: another database,
    SQLite's memory (no log), or a URI (`?uri=true`), whose file this does not read."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        return None
    if engine.url.query.get("uri") or database.startswith("file:"):
        return None
    return os.path.abspath(database)


def committed(engine: Engine) -> None:
    """A commit the store wants on the disk soon (a trial's result) has been made."""
    path = database_file(engine)
    if path is not None:
        checkpointer(path).nudge()


@contextmanager
def sink_writes(connection: sqlite3.Connection, path: str) -> Iterator[None]:
    """A batch written on `connection` commits without checkpointing (but for the backstop),
    and nudges the file's checkpointer once it has."""
    connection.execute(f"PRAGMA wal_autocheckpoint = {BACKSTOP_PAGES}")
    try:
        yield
    finally:
        # The connection goes back to the pool, where others' commits checkpoint as usual
        # (the engine never sets another value). A failure here must not hide the batch's.
        try:
            connection.execute(f"PRAGMA wal_autocheckpoint = {SQLITE_DEFAULT_PAGES}")
        except sqlite3.Error as exc:
            log.warning("Could not restore wal_autocheckpoint on %s (%s).", path, exc)
    checkpointer(path).nudge()
