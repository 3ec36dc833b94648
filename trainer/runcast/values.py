"""Turning a logged value into a float, at the call site, without forcing a GPU sync.

Accepted: ``int`` and ``float`` (and their subclasses), any other ``numbers.Real``
(numpy scalars register there, so numpy is never imported), and one-element torch
tensors. ``bool`` is rejected (as it is on the wire): ``True`` is a flag, not a
measurement; log ``float(flag)`` if you mean it. NaN and +-Inf are legal.

A one-element tensor on the CPU is read with ``.item()`` at once. A tensor on any
other device is kept as a detached reference (a ``Deferred``) and read by the
flusher thread, so ``log()`` never waits for the device.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import numbers
import sys
from collections.abc import Mapping
from itertools import chain
from typing import Any

from .wire.checks import check_key, encode_value
from .wire.limits import MAX_JSON_DEPTH

log = logging.getLogger("runcast")


class Deferred:
    """A one-element device tensor whose value is read later, off the training thread."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor

    def resolve(self) -> float:
        """Read the value (this waits for the device: call it only from the flusher)."""
        return float(self.tensor.item())


def any_deferred(bodies: list[dict[str, Any]]) -> bool:
    """Whether a value of these metrics bodies is a ``Deferred`` (one pass in C over every value)."""
    return Deferred in set(map(type, chain.from_iterable(map(dict.values, bodies))))


def read_deferred(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with every ``Deferred`` read; one the device cannot give is logged and left out."""
    if all(type(v) is not Deferred for v in values.values()):
        return values
    out: dict[str, Any] = {}
    for key, value in values.items():
        if type(value) is Deferred:
            try:
                value = value.resolve()
            except Exception as exc:  # noqa: BLE001 - a device error must not stop the run
                log.warning("runcast: could not read tensor %r (%s); value dropped", key, exc)
                continue
        out[key] = value
    return out


def coerce(key: str, value: Any) -> float | Deferred:
    """The float (or deferred tensor) ``value`` stands for; TypeError/ValueError naming ``key``.

    The caller handles exact ``float`` and ``int`` itself; this is the slower path.
    """
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise TypeError(f"metric {key!r}: booleans are not logged; pass float({key}) if you mean 0/1")
    if isinstance(value, float):
        return float(value)
    if isinstance(value, int):
        return int_to_float(key, value)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return _tensor(key, value, torch.bool)
    if isinstance(value, numbers.Real):
        try:
            return float(value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValueError(f"metric {key!r}: {value!r} cannot be read as a float ({exc})") from None
    size = getattr(value, "size", None)
    if type(value).__module__ == "numpy" and size == 1 and hasattr(value, "item"):
        return coerce(key, value.item())  # a one-element numpy array
    raise TypeError(
        f"metric {key!r}: expected a number or a one-element tensor, got {type(value).__name__}"
    )


def wire_numbers(raw: Mapping[str, Any], what: str) -> dict[str, float | str]:
    """A name -> number mapping of a rare event (checkpoint metrics, data mix weights) in wire
    form; a device tensor is read now. TypeError/ValueError (``EventError``) naming ``what``."""
    if not isinstance(raw, Mapping):
        raise TypeError(f"{what} must be a dict of name -> number, got {type(raw).__name__}")
    out: dict[str, float | str] = {}
    for key, value in raw.items():
        check_key(key, what)
        number = coerce(key, value)
        if isinstance(number, Deferred):
            number = number.resolve()  # rare events: reading the device here is fine
        out[key] = encode_value(number)
    return out


def int_to_float(key: str, value: int) -> float:
    """An int as a float; ValueError if it is too large to be one."""
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"metric {key!r}: integer {value} is too large for a float") from None


def _tensor(key: str, value: Any, bool_dtype: Any) -> float | Deferred:
    if value.numel() != 1:
        raise ValueError(
            f"metric {key!r}: a tensor must hold exactly one element, this one has shape {tuple(value.shape)}"
        )
    dtype = value.dtype
    if dtype is bool_dtype or dtype.is_complex:
        raise TypeError(f"metric {key!r}: tensor of dtype {dtype} is not a real number")
    if value.is_cpu:
        return float(value.item())
    return Deferred(value.detach())


def json_object(obj: Any, what: str) -> dict[str, Any]:
    """A config-like object (mapping, dataclass, namespace) as a strict-JSON-safe dict.

    Keys become strings; tuples and sets become lists; non-finite floats become
    "NaN"/"Infinity"/"-Infinity"; numpy scalars become numbers; anything else that
    JSON cannot hold (paths, dtypes, ...) becomes its ``str()``.
    """
    if obj is None:
        return {}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = dataclasses.asdict(obj)
    elif not isinstance(obj, Mapping) and hasattr(obj, "__dict__") and type(obj).__name__ == "Namespace":
        obj = vars(obj)
    if not isinstance(obj, Mapping):
        raise TypeError(f"{what} must be a dict (or a dataclass or argparse.Namespace), got {type(obj).__name__}")
    return {str(k): _jsonable(v, what, 1) for k, v in obj.items()}  # _jsonable's mapping case, typed


def _jsonable(obj: Any, what: str, depth: int) -> Any:
    if depth >= MAX_JSON_DEPTH and isinstance(obj, (Mapping, list, tuple, set, frozenset)):
        raise ValueError(f"{what} is nested more than {MAX_JSON_DEPTH} levels deep (a cycle?)")
    if obj is None or isinstance(obj, (str, bool)):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj) if math.isfinite(obj) else encode_value(obj)
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v, what, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_jsonable(v, what, depth + 1) for v in obj]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _jsonable(dataclasses.asdict(obj), what, depth + 1)
    if isinstance(obj, numbers.Integral) and type(obj).__name__ != "bool_":
        return int(obj)
    if isinstance(obj, numbers.Real):
        return _jsonable(float(obj), what, depth)
    if type(obj).__name__ == "bool_":
        return bool(obj)
    return str(obj)
