"""colo.testing.hang_guard: the dump names where each task of the main thread's loop is suspended."""

import asyncio

from colo.testing.hang_guard import dump_tasks


async def _waits_on_an_event_nobody_sets(event: asyncio.Event) -> None:
    await event.wait()


async def test_the_dump_shows_the_await_chain_of_a_stuck_task() -> None:
    event = asyncio.Event()
    task = asyncio.create_task(_waits_on_an_event_nobody_sets(event), name="stuck-one")
    await asyncio.sleep(0)
    text = await asyncio.to_thread(dump_tasks, "probe")  # from another thread, as the watchdog does
    event.set()
    await task
    assert "probe: asyncio tasks" in text
    assert "name='stuck-one'" in text
    assert "in _waits_on_an_event_nobody_sets" in text and "locks.py" in text


def test_without_a_running_loop_the_dump_is_empty() -> None:
    assert dump_tasks("probe") == ""
