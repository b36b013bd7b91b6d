"""Errors the CLI reports as one clear line instead of a traceback."""


class GuidebenchError(Exception):
    """A user-facing error: bad input, a missing file, an impossible request."""
