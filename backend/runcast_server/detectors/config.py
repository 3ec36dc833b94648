"""Detector parameters: documented defaults, per-run overrides, validation.

A run's effective configuration is ``DEFAULTS`` deep-merged with its overrides
(the ``alerts`` object of its run_started event, or ``PUT /runs/{id}/alerts/config``).
Every parameter is described in ``PARAMS`` and in docs/alerts.md.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from runcast.wire.limits import MAX_INT

# Which metric names feed which role: the first names a run logs are used.
DEFAULT_KEYS: Final[dict[str, list[str]]] = {
    "loss": ["loss", "train/loss", "train_loss", "lm_loss", "train/lm_loss"],
    "val_loss": ["val/loss", "eval/loss", "val_loss", "eval_loss", "valid/loss"],
    "grad_norm": ["grad_norm", "train/grad_norm", "gradient_norm"],
    "throughput": ["tokens_per_s", "throughput", "train/tokens_per_s", "samples_per_s"],
}

DEFAULTS: Final[dict[str, Any]] = {
    "enabled": True,
    "keys": DEFAULT_KEYS,
    # A loss point far above the recent median: open on the jump, close on recovery.
    "spike": {
        "enabled": True,
        "window": 50,  # points in the moving median / MAD
        "warmup": 1,  # points needed before the first test
        "k": 8.0,  # robust sigmas (1.4826 * MAD) above the median
        "min_rel": 0.2,  # ... and at least this fraction of the median above it
        "confirm_points": 2,  # consecutive points above the recovery level that open (1: open on the jump)
        "recover_points": 3,  # consecutive points back under the recovery level close it
        "max_open_points": 500,  # a "spike" longer than this is closed as a new level
    },
    # NaN or +-Inf in the loss or gradient norm.
    "nonfinite": {"enabled": True},
    # Gradient norm far above its recent median.
    "grad_norm": {
        "enabled": True,
        "window": 50,
        "warmup": 5,
        "k": 10.0,
        "min_rel": 4.0,  # at least (1 + min_rel) x the median
        "confirm_points": 1,  # a single exploding step is worth an alert
        "recover_points": 3,
        "max_open_points": 500,
    },
    # The smoothed loss stopped improving: over the last w = min(window_steps, step / 4)
    # steps it fell by less than ratio x what it fell over the w steps before (which must
    # be >= min_rel x w / window_steps of its level), and by z standard errors less than
    # half of that, the series' noise deciding what a sampled log can show.
    "plateau": {
        "enabled": True,
        "smooth": 50,  # points per block; a mark is the mean of the block medians since the last
        "window_steps": 10000,  # the longest window compared
        "ratio": 0.1,
        "min_rel": 0.01,
        "warmup_steps": 1000,
        "min_points": 20,  # points a mark holds at least (a sparse log's marks lie further apart)
        "z": 3.0,  # standard errors by which "recent" must lie below half of "before"
    },
    # Smoothed train loss trending up, or validation loss rising while train loss falls.
    "divergence": {
        "enabled": True,
        "smooth": 200,  # points in the moving median of the train loss
        "rise": 0.05,  # the smoothed loss this fraction above its best opens
        "confirm": 20,  # ... for this many consecutive points
        "val_rising_evals": 3,  # consecutive rising validation evaluations
        "val_min_rel": 0.02,  # validation loss this fraction above its best
    },
    # A sustained throughput drop: `confirm` blocks of `block` points in a row whose medians
    # are below the baseline (median of the last `window` block medians) by more than
    # max(drop x baseline, k x robust sigma of those medians).
    "throughput": {
        "enabled": True,
        "block": 10,  # points per block; a block counts by its median
        "window": 50,  # blocks in the baseline (500 points)
        "warmup": 20,  # blocks seen before the first test (200 points)
        "drop": 0.3,  # at least this fraction below the baseline ...
        "k": 4.0,  # ... and at least k robust sigmas of the block medians
        "confirm": 10,  # consecutive low blocks that open an alert (100 points)
        "recover": 3,  # consecutive blocks back above half the margin close it
        "max_open_points": 1000,  # a drop longer than this is closed as a new level
    },
    # No step or heartbeat for after_s seconds (periodic check).
    "stall": {"enabled": True, "after_s": 600.0},
    # count resumes within span_s seconds.
    "restart_loop": {"enabled": True, "count": 3, "span_s": 3600.0},
}

DETECTORS: Final = ("spike", "nonfinite", "grad_norm", "plateau", "divergence", "throughput", "stall", "restart_loop")
ROLES: Final = tuple(DEFAULT_KEYS)
MAX_KEY_NAMES: Final = 20  # metric names one role may list
MAX_INT_PARAM: Final = {"window": 1000, "smooth": 1000, "block": 100}  # integer parameters with a ceiling
MAX_NUMBER_PARAM: Final = 1e12  # the ceiling of every other numeric parameter


class ConfigError(ValueError):
    """An override names an unknown detector or parameter, or gives a bad value."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def validate_overrides(overrides: Any) -> dict[str, Any]:
    """Check an ``alerts`` override object against ``DEFAULTS``; returns it (a copy)."""
    if overrides is None:
        return {}
    if not isinstance(overrides, dict):
        raise ConfigError("alerts", "must be a JSON object")
    out: dict[str, Any] = {}
    for name, value in overrides.items():
        if name == "enabled":
            if not isinstance(value, bool):
                raise ConfigError("alerts.enabled", "must be true or false")
            out[name] = value
        elif name == "keys":
            out[name] = _checked_keys(value)
        elif name in DETECTORS:
            out[name] = _checked_detector(name, value)
        else:
            raise ConfigError(f"alerts.{name}", f"unknown detector; one of {', '.join(DETECTORS)}")
    return out


def _checked_keys(value: Any) -> dict[str, list[str]]:
    """``alerts.keys``: each role to a metric name or a list of them."""
    if not isinstance(value, dict):
        raise ConfigError("alerts.keys", "must map a role to a list of metric names")
    keys: dict[str, list[str]] = {}
    for role, names in value.items():
        if role not in ROLES:
            raise ConfigError(f"alerts.keys.{role}", f"unknown role; one of {', '.join(ROLES)}")
        if isinstance(names, str):
            names = [names]
        if (not isinstance(names, list) or not all(isinstance(n, str) and n for n in names)
                or len(names) > MAX_KEY_NAMES):
            raise ConfigError(f"alerts.keys.{role}", f"must be a metric name or a list of up to {MAX_KEY_NAMES}")
        keys[role] = list(names)
    return keys


def _checked_detector(name: str, value: Any) -> dict[str, Any]:
    """``alerts.<detector>``: true/false, or an object of its parameters."""
    if isinstance(value, bool):  # "spike": false
        return {"enabled": value}
    if not isinstance(value, dict):
        raise ConfigError(f"alerts.{name}", "must be an object of parameters (or true/false)")
    params: dict[str, Any] = {}
    for param, raw in value.items():
        field = f"alerts.{name}.{param}"
        if param not in DEFAULTS[name]:
            raise ConfigError(field, f"unknown parameter; one of {', '.join(DEFAULTS[name])}")
        params[param] = _checked_param(field, param, DEFAULTS[name][param], raw)
    return params


def _checked_param(field: str, param: str, default: Any, raw: Any) -> Any:
    """One detector parameter, of the type of its default."""
    if isinstance(default, bool):
        if not isinstance(raw, bool):
            raise ConfigError(field, "must be true or false")
        return raw
    if isinstance(default, int):
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
            raise ConfigError(field, "must be a positive integer")
        if param in MAX_INT_PARAM and raw > MAX_INT_PARAM[param]:
            raise ConfigError(field, f"must be at most {MAX_INT_PARAM[param]}")
        return raw
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not raw >= 0 or raw > MAX_NUMBER_PARAM:
        raise ConfigError(field, "must be a non-negative number")
    return float(raw)


def overrides_schema() -> dict[str, Any]:
    """The JSON Schema of the overrides ``validate_overrides`` accepts, from ``DEFAULTS`` (the body of
    ``PUT /runs/{id}/alerts/config`` in the OpenAPI document), within what the route's JSON check
    (``runcast.wire.events.check_json``) lets through: no NUL character, integers up to ``MAX_INT``."""
    name = {"type": "string", "minLength": 1, "pattern": r"^[^\x00]*$"}
    keys = {role: {"anyOf": [name, {"type": "array", "items": name, "maxItems": MAX_KEY_NAMES}]} for role in ROLES}
    properties: dict[str, Any] = {
        "enabled": {"type": "boolean"},
        "keys": {"type": "object", "properties": keys, "additionalProperties": False},
    }
    for detector in DETECTORS:
        params = {param: _param_schema(param, default) for param, default in DEFAULTS[detector].items()}
        parameters = {"type": "object", "properties": params, "additionalProperties": False}
        properties[detector] = {"anyOf": [{"type": "boolean"}, parameters]}
    return {"type": "object", "properties": properties, "additionalProperties": False,
            "description": "Integers are written without a fraction (2, not 2.0)."}


def _param_schema(param: str, default: Any) -> dict[str, Any]:
    if isinstance(default, bool):
        return {"type": "boolean"}
    if isinstance(default, int):
        return {"type": "integer", "minimum": 1, "maximum": MAX_INT_PARAM.get(param, MAX_INT)}
    return {"type": "number", "minimum": 0, "maximum": MAX_NUMBER_PARAM}


def effective(overrides: dict[str, Any] | None, *, stall_after_s: float | None = None) -> dict[str, Any]:
    """DEFAULTS with ``overrides`` merged in (invalid overrides are ignored as a whole).

    ``stall_after_s``: the server's stall threshold (RUNCAST_STALL_AFTER_S), the default of
    ``stall.after_s`` in place of DEFAULTS' when given.
    """
    cfg = copy.deepcopy(DEFAULTS)
    if stall_after_s is not None:
        cfg["stall"]["after_s"] = float(stall_after_s)
    if not overrides:
        return cfg
    try:
        checked = validate_overrides(overrides)
    except ConfigError:
        return cfg
    for name, value in checked.items():
        if name == "enabled":
            cfg["enabled"] = value
        elif name == "keys":
            cfg["keys"].update(value)
        else:
            cfg[name].update(value)
    return cfg


def merge_overrides(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """``new`` overrides laid over ``old`` (both already validated)."""
    out = copy.deepcopy(old or {})
    for name, value in new.items():
        if isinstance(value, dict) and isinstance(out.get(name), dict):
            out[name].update(value)
        else:
            out[name] = value
    return out
