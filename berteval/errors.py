"""One exception type for mistakes a user can fix (bad option, missing data, unknown
model). The CLI prints its message without a traceback and exits 2; anything else is
a bug and keeps its traceback."""


class BertevalError(Exception):
    """A problem with the user's input or environment, with a message that says what to do."""
