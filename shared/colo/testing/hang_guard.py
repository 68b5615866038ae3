"""pytest plugin: a hung test prints what every asyncio task was waiting on, then pytest-timeout fails it.

pytest-timeout (``timeout`` in ``pyproject.toml``, 600 s per test) turns a hang into one failed test instead of
a CI run that never ends, but its stack dump of the main thread shows only the event loop's ``select``. This
plugin starts a watchdog thread per test (through pytest-timeout's own timer hooks, so with the timeout it
resolved) that fires ``DUMP_MARGIN_S`` before that timeout and writes, to the
test's captured stderr (shown with the failure), the stack of every task of the event loop the main thread is
running. Enable with ``pytest_plugins = ["colo.testing.hang_guard"]`` (tests/conftest.py does).
"""

from __future__ import annotations

import asyncio
import io
import sys
import threading
from typing import Any

import pytest

#: seconds before pytest-timeout's deadline at which the tasks are dumped
DUMP_MARGIN_S = 15.0


def _main_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop the main thread is running, found on its stack (``self`` of ``_run_once``)."""
    frame = sys._current_frames().get(threading.main_thread().ident or -1)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if isinstance(owner, asyncio.AbstractEventLoop):
            return owner
        frame = frame.f_back
    return None


def dump_tasks(reason: str) -> str:
    """Text with the stack of every task of the main thread's running loop (empty when none runs)."""
    loop = _main_loop()
    if loop is None:
        return ""
    out = io.StringIO()
    out.write(f"\n===== {reason}: asyncio tasks of the main thread's loop =====\n")
    for _ in range(3):  # the task set may change under us: it is read from another thread
        try:
            tasks = list(asyncio.all_tasks(loop))
            break
        except RuntimeError:
            continue
    else:
        return out.getvalue() + "(the task set kept changing)\n"
    for task in tasks:
        out.write(f"--- {task!r}\n")
        try:  # the await chain, outermost first: where each coroutine of the task is suspended
            coro: object = task.get_coro()
            for _ in range(40):
                frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
                if frame is not None:
                    out.write(f"    {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}\n")
                nxt = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
                if nxt is None:
                    if coro is not task.get_coro():
                        out.write(f"    awaiting {coro!r}\n")
                    break
                coro = nxt
        except Exception as exc:  # a diagnostic must never raise
            out.write(f"    (no stack: {exc!r})\n")
    return out.getvalue()


_TIMER = pytest.StashKey[threading.Timer]()


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> None:
    """pytest-timeout's hook, with the timeout it resolved (ini, ``--timeout``, marker): start the watchdog,
    then return None so that pytest-timeout's own timer is set as well."""
    timeout = float(settings.timeout or 0)
    if timeout <= DUMP_MARGIN_S:
        return

    def fire() -> None:
        sys.stderr.write(dump_tasks(f"{item.nodeid} still running after {timeout - DUMP_MARGIN_S:.0f} s"))
        sys.stderr.flush()

    timer = threading.Timer(timeout - DUMP_MARGIN_S, fire)
    timer.daemon = True
    timer.start()
    item.stash[_TIMER] = timer


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_cancel_timer(item: pytest.Item) -> None:
    timer = item.stash.get(_TIMER, None)
    if timer is not None:
        timer.cancel()
        del item.stash[_TIMER]
