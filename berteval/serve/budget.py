"""The work one request may cause, counted in what the model runs (tokens and windows), not in characters.

Characters were a poor bound: a context of 10,000 "!" is 10,000 tokens and 40 windows of 384 tokens, where
10,000 characters of English prose are about 2,100 tokens and 9 windows (2.3 s on one core here). So
every tab's work is bounded in model units here, before any forward pass:

- Classify, Next sentence, Inside BERT read at most `max_length` tokens per encoder (128 for the served
  heads): longer input is cut, and the page says so (`reading`). Their character limits only bound the
  tokenizer's own pass.
- Answer reads at most `MAX_WINDOWS` windows: a context that needs more is refused before the model runs,
  with its token and window count in the message.

And a long context must not starve a short one: a request of more than `LIGHT_WINDOWS` windows runs in the
heavy lane, `HEAVY_RUNNING` threads (one per core) whose OS priority is lowered once, when each starts (Linux
gives each thread its own nice value, and raising it needs no privilege), so the scheduler hands the cores to
short answers and classifications first; at most `HEAVY_ADMITTED` long ones are admitted at once (running or
waiting), the next is refused at once with a visitor's sentence. Short answers never wait for the heavy lane,
so with the page's per-event queue lanes (app.py) they keep answering while the long ones run.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

from ..errors import BertevalError

# 10 windows hold ~2,300 context tokens (about 10,000 characters of English prose, 9 windows) and take
# ~2.3 s of one core here; the worst a visitor can ask for.
MAX_WINDOWS = int(os.environ.get("BERTEVAL_APP_MAX_WINDOWS", "10"))
LIGHT_WINDOWS = 2  # at most this many windows (~600 context tokens): a short answer, never queued behind long ones
HEAVY_RUNNING = int(os.environ.get("BERTEVAL_APP_HEAVY_RUNNING", "2"))  # long answers computing at once
HEAVY_ADMITTED = int(os.environ.get("BERTEVAL_APP_HEAVY_ADMITTED", "8"))  # long answers running or waiting

BUSY = ("The server is busy reading other long contexts right now. Try again in a minute, or shorten the "
        "context (a context of a few paragraphs answers at once).")


def check_windows(n_windows: int, n_tokens: int, max_length: int) -> None:
    """Refuse a context that needs more than MAX_WINDOWS windows, in a visitor's words."""
    if n_windows > MAX_WINDOWS:
        raise BertevalError(f"This context is {n_tokens:,} tokens: {n_windows} windows of {max_length} tokens, and "
                            f"one question reads at most {MAX_WINDOWS} (about 2,000 tokens, some 10,000 characters of "
                            f"prose; symbols, digits and rare words take a token or more each). Shorten the context.")


HEAVY_NICE = 10  # how far below the request threads the heavy lane runs (nice values, 0-19 above the process's)


def _lower_priority(step: int) -> None:
    """Run this thread `step` nice values below the rest of the process (Linux: per thread; elsewhere a no-op)."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + step))
    except (AttributeError, OSError):  # no per-thread priority here: the lane still bounds how many run
        pass


class Lane:
    """Work run on `running` low-priority threads, at most `admitted` jobs inside (running or waiting); the next
    caller is refused at once (BertevalError(BUSY))."""

    def __init__(self, running: int, admitted: int, nice: int = HEAVY_NICE):
        self._admit = threading.BoundedSemaphore(max(admitted, running))
        self._pool = ThreadPoolExecutor(running, thread_name_prefix="heavy-lane", initializer=_lower_priority,
                                        initargs=(nice,))

    def run(self, fn, *args, **kwargs):
        """fn(*args, **kwargs) on one of the lane's threads; its result, or its exception, here."""
        if not self._admit.acquire(blocking=False):
            raise BertevalError(BUSY)
        try:
            return self._pool.submit(fn, *args, **kwargs).result()
        finally:
            self._admit.release()


HEAVY = Lane(HEAVY_RUNNING, HEAVY_ADMITTED)


def run(n_windows: int, fn, *args, **kwargs):
    """fn(*args, **kwargs) for a request of `n_windows` windows: here and now for a short one, in the heavy lane for
    a long one."""
    if n_windows > LIGHT_WINDOWS:
        return HEAVY.run(fn, *args, **kwargs)
    return fn(*args, **kwargs)
