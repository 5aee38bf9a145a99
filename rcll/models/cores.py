"""Core leases: one token per core, shared by the pool processes of one worker, so an
embedding pass can run on the cores no other pool process is using.

A worker runs one pool process per core, each pass on one intra-op thread
(:mod:`rcll.models.threads`): the cores are used well while every process has work, but at
the end of an ingest (or behind one large document) a single job embeds on one core while
the others idle. With core leases each pool process holds a token while it runs a task
(:meth:`CoreLeases.hold`, from the worker's task signals), and the embedder takes the free
tokens for one group of forward passes at a time (:meth:`CoreLeases.spare`), running one
more pass at once per token (:class:`rcll.models.onnx_runtime.OnnxEmbedder`). A process that
starts a task meanwhile finds its token taken only until that group ends.

A core is lent only when its process has been without a task for :data:`IDLE_S` (the token
file's mtime is set when a task ends): while the queue has work every process is busy and
passes run on their own thread, and a pass on two threads costs more CPU per text than two
passes on one each.

A token is an exclusive ``flock`` on ``<folder>/core-<i>.lock`` (one per core). The kernel
drops it when its holder exits, so a killed pool process leaks nothing; files are opened
once per process (a forked child opens its own: a lock on a descriptor inherited across
``fork`` would be shared with the parent). Never blocks: with no token free, a task runs
without one and a pass on its base threads.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

# A core is lent only once its process has had no task for this long: a busy process starts
# its next task within milliseconds of the last one's end (prefetched), so a pass never
# borrows a core that is about to be wanted, only one with nothing queued for it.
IDLE_S = 0.2


class CoreLeases:
    """``cores`` tokens under ``folder`` (created if missing). Thread-safe within a process.
    Raises ``OSError`` at construction when the folder cannot be created."""

    def __init__(self, folder: Path | str, cores: int):
        self.folder = Path(folder)
        self.cores = max(1, int(cores))
        self.folder.mkdir(parents=True, exist_ok=True)
        for i in range(self.cores):  # made now: a new token's "last task" is its creation
            os.close(self._open(i))
        self._pid: int | None = None
        self._fds: list[int] = []
        self._held: set[int] = set()
        self._lock = threading.Lock()

    def _open(self, i: int) -> int:
        """A descriptor of token ``i``'s lock file (created if missing)."""
        return os.open(self.folder / f"core-{i}.lock", os.O_RDWR | os.O_CREAT, 0o600)

    def _files(self) -> list[int]:
        if self._pid != os.getpid():  # new process (or first use): descriptors of its own
            self._fds = [self._open(i) for i in range(self.cores)]
            self._held = set()
            self._pid = os.getpid()
        return self._fds

    def _take(self, most: int, idle_s: float = 0.0) -> list[int]:
        """Up to ``most`` free tokens (indices), taken without waiting; with ``idle_s`` > 0
        only tokens whose last task ended at least that long ago."""
        got: list[int] = []
        now = time.time()
        with self._lock:
            fds = self._files()
            for i, fd in enumerate(fds):
                if len(got) >= most:
                    break
                if i in self._held:
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                if idle_s > 0 and now - os.fstat(fd).st_mtime < idle_s:
                    fcntl.flock(fd, fcntl.LOCK_UN)  # between two tasks of a busy process
                    continue
                self._held.add(i)
                got.append(i)
        return got

    def _give(self, tokens: list[int], ended: bool = False) -> None:
        with self._lock:
            for i in tokens:
                if i in self._held:
                    if ended:  # the file's mtime says when this core's last task ended
                        os.utime(self._fds[i])
                    fcntl.flock(self._fds[i], fcntl.LOCK_UN)
                    self._held.discard(i)

    def acquire(self) -> list[int]:
        """Take one token for a task (``[]`` when every core is taken); give it back with
        :meth:`release`. Raises nothing: a lock file that cannot be opened means no token."""
        try:
            return self._take(1)
        except OSError as exc:
            log.warning("core lease under %s unavailable: %s", self.folder, exc)
            return []

    def release(self, tokens: list[int]) -> None:
        """Give back what :meth:`acquire` took, marking the task's end (the token is lent
        only :data:`IDLE_S` after it)."""
        self._give(tokens, ended=True)

    @contextmanager
    def hold(self):
        """A task's token for the ``with`` block: yields how many were taken (0 or 1)."""
        tokens = self.acquire()
        try:
            yield len(tokens)
        finally:
            self.release(tokens)

    @contextmanager
    def spare(self, most: int, idle_s: float | None = None):
        """Up to ``most`` free tokens beyond the caller's own for the ``with`` block (one
        group of forward passes run at once), each of a core whose last task ended ``idle_s`` (default
        :data:`IDLE_S`) ago or more: yields how many were taken (0 when every other core is
        busy, or only between two tasks)."""
        try:
            tokens = self._take(max(0, most), IDLE_S if idle_s is None else idle_s)
        except OSError:
            tokens = []
        try:
            yield len(tokens)
        finally:
            self._give(tokens)
