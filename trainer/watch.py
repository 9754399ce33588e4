"""Watch mode: re-check on every save, with single-key commands.

The loop is independent of the console: it calls ``on_change`` when the file
is saved (bursts of save events are debounced into one), then ``prompt``, and
``on_key`` for each key typed while no check runs. Keys typed during a check
are dropped; keys typed once the prompt shows are all kept.
"""

from __future__ import annotations

import contextlib
import os
import queue
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import watchfiles

DEBOUNCE_MS = 150  # editors write a file in several events; one check per save
TICK_MS = 100  # how often keys are looked at while nothing changes
# Quiet time that ends a save: the events of one save come within a ms or two (an
# editor that takes longer between its writes gets a second check, of the whole file).
STEP_MS = 10


def watch_loop(
    path: Callable[[], Path],
    on_change: Callable[[], None],
    on_key: Callable[[str], bool],
    keys: queue.Queue[str],
    stop: threading.Event,
    poll: bool = False,
    prompt: Callable[[], None] = lambda: None,
) -> None:
    """Run ``on_change`` now and after every save of ``path()``; stop when ``on_key`` says so.

    ``path`` is a function because a key (next exercise) may change the file watched.
    ``prompt`` shows the keys; it runs after the keys typed during the check are
    dropped, so that a key typed as soon as it shows is never lost.
    """
    on_change()
    drain(keys)
    prompt()
    while not stop.is_set():
        watched = path()

        def is_watched(_change: watchfiles.Change, changed: str, watched: Path = watched) -> bool:
            return Path(changed) == watched

        for changes in watchfiles.watch(
            watched.parent,
            watch_filter=is_watched,
            debounce=DEBOUNCE_MS,
            step=STEP_MS,
            stop_event=stop,
            rust_timeout=TICK_MS,
            yield_on_timeout=True,
            force_polling=poll,
            poll_delay_ms=200,
            raise_interrupt=True,  # Ctrl-C is the caller's: exit 130, no log line
            recursive=False,
        ):
            if changes:
                on_change()
                drain(keys)  # keys typed during a check are ignored
                prompt()
            while True:
                try:
                    key = keys.get_nowait()
                except queue.Empty:
                    break
                if not on_key(key):
                    stop.set()
                    return
            if path() != watched:
                break  # watch the new file
        else:
            return  # the watcher ended (stop)


def drain(keys: queue.Queue[str]) -> None:
    """Forget the keys typed so far."""
    with contextlib.suppress(queue.Empty):
        while True:
            keys.get_nowait()


@contextlib.contextmanager
def keyboard(keys: queue.Queue[str], stop: threading.Event) -> Iterator[bool]:
    """Feed single key presses into ``keys`` while the block runs; yields False without a terminal."""
    if not sys.stdin.isatty():
        yield False
        return
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)

    def read() -> None:
        import select

        while not stop.is_set():
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                data = os.read(fd, 1)
                if not data:
                    return
                keys.put(data.decode(errors="ignore").lower())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield True
    finally:
        stop.set()
        reader.join(timeout=0.5)
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
