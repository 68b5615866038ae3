"""Hot reload of the slo-manager's configuration: the YAML file and a NATS key-value entry, watched.

:class:`ConfigWatcher` polls the file's content hash every ``config_reload.file_poll_s`` seconds
and watches the key ``config_reload.kv_key`` of the bucket ``config_reload.kv_bucket`` (nats-py
``KeyValue.watch``). On every change it composes the configuration anew from all its layers
(:mod:`colo_slo_manager.config`) and hands the result to ``on_applied`` — or, when any layer is
invalid, the complete list of problems to ``on_rejected``, and the configuration in force stays.
A change that composes to the settings already in force is neither applied nor announced.
Attempts run one at a time, in the order the changes were seen, and compose in a worker thread (a
large value takes seconds to parse and validate). A file change is taken when two polls in a row
read the same new content (1 to 2 poll periods after the write). The watch is reopened after every
reconnect and when its consumer is found gone (checked every :data:`KV_RESYNC_S`: a deleted and
recreated bucket leaves the old watch silent); the value then found is tried when it differs from
the last seen.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

import nats.errors
from nats.js.kv import KeyValue

from colo.settings import SettingsError
from colo_slo_manager.config import Composed, compose, load_base, version_of
from colo_slo_manager.settings import SloManagerSettings

if TYPE_CHECKING:
    from colo.bus import Bus

log = logging.getLogger("colo_slo_manager.reload")

KV_INIT_TIMEOUT_S = 5.0
"""How long :meth:`ConfigWatcher.start` waits for the key-value watch to deliver the current value."""
KV_POLL_S = 0.5
"""Longest wait for a key-value update before checking whether the watcher is stopping."""
KV_RESYNC_S = 30.0
"""Period of checking that the key-value watch's consumer still exists, reopening it when not (a
deleted and recreated bucket leaves the old watch silent without any error)."""
KV_RETRY_S = 1.0
"""Wait before trying again to reopen a watch that failed."""

Applied = Callable[[Composed, str], Awaitable[None]]
Rejected = Callable[[list[str], str], Awaitable[None]]


def _file_state(path: str) -> str:
    """sha256 of the file's content, or the reason it cannot be read (so a change of either is seen)."""
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"


class ConfigWatcher:
    """Watches the configuration sources of one running slo-manager (see the module docstring).

    ``path``: the YAML file (None = none); ``env``: the environment the base was loaded from;
    ``base``: the settings the service started with when there is no file (with a file, the base
    is re-read from file and environment on every change). ``current`` is the configuration in
    force, ``sources`` its layers, ``attempts`` the number of changes tried so far.
    """

    def __init__(self, running: SloManagerSettings, *, path: str | None, env: Mapping[str, str],
                 on_applied: Applied, on_rejected: Rejected) -> None:
        self.current = Composed(settings=running, version=version_of(running))
        self.path = path
        self.env = dict(env)
        self.reload = running.config_reload
        self._start_base = running
        self._on_applied = on_applied
        self._on_rejected = on_rejected
        self._file_state = _file_state(path) if path else ""
        self._in_force: tuple[str, bytes | None, int] = (self._file_state, None, 0)
        """File state, key-value value and revision of the configuration in force."""
        self._kv: KeyValue | None = None
        self._kv_value: bytes | None = None
        self._kv_revision = 0
        self._lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._watcher: KeyValue.KeyWatcher | None = None
        self._bus: Bus | None = None
        self._stopping = False
        self._reconnects = 0
        self._next_resync = 0.0
        self.attempts = 0
        self._attempted = asyncio.Condition()

    @property
    def kv_where(self) -> str:
        """``kv <bucket>/<key>``, how errors and sources name the key-value layer."""
        return f"kv {self.reload.kv_bucket}/{self.reload.kv_key}"

    @property
    def sources(self) -> dict[str, str]:
        """Each layer of the configuration in force and its identity: ``file`` (path and content hash),
        ``kv`` (bucket/key and revision; ``none`` when the key holds nothing), ``env`` (how many
        variables). A rejected change does not alter them."""
        file_state, kv_value, kv_revision = self._in_force
        out: dict[str, str] = {}
        if self.path:
            out["file"] = f"{self.path} sha256:{file_state[:16]}"
        env = sorted(k for k in self.env if k.startswith("COLO_SLO_MANAGER_") and k != "COLO_SLO_MANAGER_CONFIG")
        if env:
            out["env"] = f"{len(env)} COLO_SLO_MANAGER_* variables"
        if self.reload.kv_bucket:
            rev = f"revision {kv_revision}" if kv_value is not None else "none"
            out["kv"] = f"{self.reload.kv_bucket}/{self.reload.kv_key} {rev}"
        return out

    # ------------------------------------------------------------------ lifecycle

    async def start(self, bus: Bus | None) -> None:
        """Open the key-value bucket (created when missing) and read the key's current value; apply it
        when there is one (before the service handles anything); then start watching both sources.

        Raises nats errors when the bucket cannot be opened or created.
        """
        if bus is not None and self.reload.kv_bucket:
            self._bus = bus
            await self._open_watch()
            if self._kv_value is not None:
                await self._attempt("kv")
            self._tasks.append(asyncio.create_task(self._watch_kv(), name="config:kv"))
        if self.path and self.reload.file_poll_s > 0:
            self._tasks.append(asyncio.create_task(self._poll_file(), name="config:file"))

    async def stop(self) -> None:
        """Stop watching (idempotent)."""
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self._close_watch()

    async def wait_attempts(self, n: int, timeout_s: float = 30.0) -> None:
        """Return once ``n`` changes have been tried (applied, rejected or found unchanged).

        Raises TimeoutError after ``timeout_s`` seconds.
        """
        async with self._attempted:
            await asyncio.wait_for(self._attempted.wait_for(lambda: self.attempts >= n), timeout_s)

    # ------------------------------------------------------------------ sources

    def _take(self, entry: KeyValue.Entry) -> None:
        """Record a key-value entry: a value, or (delete/purge) no value."""
        if entry.operation in ("DEL", "PURGE"):
            self._kv_value = None
        else:
            self._kv_value = entry.value or b""
        self._kv_revision = int(entry.revision or 0)

    async def _open_watch(self) -> bool:
        """(Re)open the bucket (created when missing) and a watch of the key; record the key's current
        value (none when the key or the bucket is empty). False when the initial value did not come
        within :data:`KV_INIT_TIMEOUT_S` (the value recorded before is kept).

        Raises nats errors when the bucket cannot be opened or created.
        """
        assert self._bus is not None
        await self._close_watch()
        self._kv = await self._bus.key_value(self.reload.kv_bucket)
        self._watcher = await self._kv.watch(self.reload.kv_key)
        self._reconnects = self._bus.nc.stats["reconnects"]
        entries: list[KeyValue.Entry] = []
        while True:  # the current value (if any), then the end-of-initial-values marker
            try:
                entry = await self._watcher.updates(timeout=KV_INIT_TIMEOUT_S)  # type: ignore[no-untyped-call]
            except nats.errors.TimeoutError:
                log.warning("%s: no initial value from the key-value watch", self.kv_where)
                for e in entries:
                    self._take(e)
                return False
            if entry is None:
                break
            entries.append(entry)
        if not entries:
            self._kv_value, self._kv_revision = None, 0
        for e in entries:
            self._take(e)
        return True

    async def _close_watch(self) -> None:
        if self._watcher is not None:
            try:
                await self._watcher.stop()  # type: ignore[no-untyped-call]
            except Exception:  # connection closed, subscription gone with the server
                pass
            self._watcher = None

    async def _reopen(self, why: str) -> None:
        """Watch anew after a reconnect or when the watch's consumer is gone (an ordered consumer is
        slow to recover from a nats-server restart and stays silent after the bucket's deletion); try the value
        found when it differs from the one last seen. A failure is logged and retried after
        :data:`KV_RETRY_S`; the configuration in force stays."""
        before = (self._kv_value, self._kv_revision)
        try:
            complete = await self._open_watch()
        except Exception as exc:  # JetStream not back yet, bucket being recreated, ...
            log.warning("%s: cannot watch (%s): %s; retrying", self.kv_where, why, exc)
            self._next_resync = asyncio.get_running_loop().time() + KV_RETRY_S
            return
        self._next_resync = asyncio.get_running_loop().time() + (KV_RESYNC_S if complete else KV_RETRY_S)
        if (self._kv_value, self._kv_revision) != before:
            log.info("%s: watch reopened (%s), revision %d", self.kv_where, why, self._kv_revision)
            await self._attempt("kv")

    async def _watch_kv(self) -> None:
        assert self._bus is not None
        loop = asyncio.get_running_loop()
        self._next_resync = loop.time() + KV_RESYNC_S
        while not self._stopping:
            entry = None
            if self._watcher is not None:
                try:
                    entry = await self._watcher.updates(timeout=KV_POLL_S)  # type: ignore[no-untyped-call]
                except nats.errors.TimeoutError:
                    pass
            else:
                await asyncio.sleep(KV_POLL_S)
            if entry is not None and isinstance(entry, KeyValue.Entry):
                self._take(entry)
                await self._attempt("kv")
                continue
            if self._stopping:
                break
            if self._bus.nc.stats["reconnects"] != self._reconnects:
                await self._reopen("reconnected")
            elif loop.time() >= self._next_resync:
                if self._watcher is not None and await self._watch_alive():
                    self._next_resync = loop.time() + KV_RESYNC_S
                else:
                    await self._reopen("watch lost")

    async def _watch_alive(self) -> bool:
        """Whether the watch's consumer still exists on the server (deleting the bucket deletes it)."""
        sub = self._watcher._sub if self._watcher is not None else None
        if sub is None:
            return False
        try:
            await sub.consumer_info()  # nats-py's KeyValue.keys() asks its watcher's subscription the same way
        except Exception:
            return False
        return True

    async def _poll_file(self) -> None:
        """Take a changed file once two polls in a row read the same content, so that a file caught
        half-written by an editor is not tried."""
        assert self.path is not None
        seen = self._file_state
        while not self._stopping:
            await asyncio.sleep(self.reload.file_poll_s)
            state = await asyncio.to_thread(_file_state, self.path)
            if state != self._file_state and state == seen:
                self._file_state = state
                await self._attempt("file")
            seen = state

    # ------------------------------------------------------------------ compose and hand over

    async def _attempt(self, trigger: str) -> None:
        """Compose from every layer; hand over the result or the problems (one attempt at a time)."""
        async with self._lock:
            seen = (self._file_state, self._kv_value, self._kv_revision)
            try:
                # off the event loop: a large value takes seconds of YAML parsing and validation
                composed = await asyncio.to_thread(self._compose, seen[1], self.current.settings)
            except SettingsError as exc:
                await self._report(self._on_rejected(exc.errors, trigger))
            except Exception as exc:  # a loader defect must not end the watch: rejected like bad input
                log.exception("configuration change (%s) could not be composed", trigger)
                await self._report(self._on_rejected([f"{trigger}: cannot compose: {type(exc).__name__}: {exc}"],
                                                     trigger))
            else:
                self._in_force = seen
                if composed.version != self.current.version:
                    self.current = composed
                    await self._report(self._on_applied(composed, trigger))
                else:
                    log.info("configuration change (%s) leaves version %s in force", trigger, composed.version)
            async with self._attempted:
                self.attempts += 1
                self._attempted.notify_all()

    def _compose(self, kv_value: bytes | None, running: SloManagerSettings) -> Composed:
        base = load_base(self.path, self.env) if self.path else self._start_base
        return compose(base, kv_value, self.kv_where, running)

    async def _report(self, call: Awaitable[None]) -> None:
        try:
            await call
        except Exception:  # announcing failed (bus down): the configuration itself is already decided
            log.exception("could not announce a configuration change")
