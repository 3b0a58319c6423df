"""Errors the engine raises at its boundary, each with one clear message.

Callers (CLI, web worker) catch `EngineError` and show `str(err)`; nothing here
wraps a traceback from deep inside torch.
"""


class EngineError(Exception):
    """Base class: a problem the user can fix, described in one sentence."""


class CheckpointError(EngineError):
    """The model directory is missing files, is unsupported, or is corrupt."""


class PromptError(EngineError):
    """The prompt cannot be built or does not fit (too long, no FIM tokens, ...)."""


class ParamsError(EngineError, ValueError):
    """A sampling parameter is out of range."""
