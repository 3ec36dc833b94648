"""What the integrations share: numbers from framework values, structured config, summaries."""

from __future__ import annotations

import hashlib
import logging
import math
from argparse import Namespace
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("runcast")

_HASH_CHUNK = 1 << 20


def to_number(value: Any) -> float | None:
    """A float from a number or a one-element tensor / array; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    numel = getattr(value, "numel", None) or getattr(value, "size", None)
    try:
        if (numel() if callable(numel) else numel) == 1:
            return float(value.item())
    except (TypeError, ValueError, AttributeError):
        pass
    return None


def plain(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON the run's config accepts, keeping its structure.

    Mappings (and ``Namespace``) stay objects, lists and tuples stay lists, numbers,
    strings, booleans and None stay themselves; a non-finite float or anything else
    (a dtype, a class, a path) becomes its string.
    """
    if isinstance(value, Namespace):
        value = vars(value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth < 32 and isinstance(value, Mapping):
        return {str(k): plain(v, depth + 1) for k, v in value.items()}
    if depth < 32 and isinstance(value, (list, tuple)):
        return [plain(v, depth + 1) for v in value]
    number = to_number(value) if hasattr(value, "item") else None
    return number if number is not None and math.isfinite(number) else str(value)


def parameter_count(model: Any) -> int | None:
    """The number of parameters of a torch module (None when it has no ``parameters()``)."""
    try:
        return int(sum(p.numel() for p in model.parameters()))
    except (AttributeError, TypeError):
        return None


def set_summary(run: Any, figures: Mapping[str, float]) -> None:
    """Put end-of-run figures in the run's summary, not in one-point series."""
    if figures:
        run.summary.update(figures)


def sha256_now(path: str) -> str | None:
    """The file's sha256 as it is now (for a file the framework rewrites in place of the old one)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(_HASH_CHUNK):
                digest.update(chunk)
    except OSError as exc:
        log.warning("runcast: could not hash checkpoint %s (%s)", path, exc)
        return None
    return digest.hexdigest()
