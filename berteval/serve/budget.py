"""The work one request may cause, counted in what the model runs (tokens and windows), not in characters.

Characters were a poor bound: a context of 10,000 "!" is 10,000 tokens and 40-50 windows of 384 tokens
(17 s of CPU), where 10,000 characters of English prose are about 2,100 tokens and 9 windows (2.3 s). So
every tab's work is bounded in model units here, before any forward pass:

- Classify, Next sentence, Inside BERT read at most `max_length` tokens per encoder (128 for the served
  heads): longer input is cut, and the page says so (`reading`). Their character limits only bound the
  tokenizer's own pass.
- Answer reads at most `MAX_WINDOWS` windows: a context that needs more is refused before the model runs,
  with its token and window count in the message.

And a long context must not starve a short one: a request of more than `LIGHT_WINDOWS` windows runs in the
heavy lane, `HEAVY_RUNNING` at a time (one per core), with at most `HEAVY_ADMITTED` admitted at once
(running or waiting); beyond that it is refused at once with a visitor's sentence. Short answers never wait
for the heavy lane, so with the page's per-event queue (app.py) they keep answering while the long ones run.
"""

from __future__ import annotations

import contextlib
import os
import threading

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


class Lane:
    """At most `running` callers inside at once and at most `admitted` inside or waiting; the next is refused."""

    def __init__(self, running: int, admitted: int):
        self._run = threading.BoundedSemaphore(running)
        self._admit = threading.BoundedSemaphore(max(admitted, running))

    @contextlib.contextmanager
    def enter(self):
        if not self._admit.acquire(blocking=False):
            raise BertevalError(BUSY)
        try:
            with self._run:
                yield
        finally:
            self._admit.release()


HEAVY = Lane(HEAVY_RUNNING, HEAVY_ADMITTED)


def lane(n_windows: int):
    """The context manager a request of `n_windows` windows runs under: none for a short one, the heavy lane
    for a long one."""
    return HEAVY.enter() if n_windows > LIGHT_WINDOWS else contextlib.nullcontext()
