"""Response models of the policy API (docs/api.md#publication-policy).

``policy`` is every setting in force (``runcast.wire.policy.effective``); ``*_settings`` the
settings a layer sets itself.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model
from runcast.wire.policy import CHOICES, DELAY, FIELDS, LISTS, MAX_DELAY_S, MAX_PATTERN_CHARS, MAX_PATTERNS


class RunPolicyView(BaseModel):
    """A run's policy in force, its own overrides and its project's default."""

    model_config = ConfigDict(extra="forbid")

    run: str
    policy: dict[str, Any]
    run_settings: dict[str, Any]
    project_settings: dict[str, Any]


class ProjectPolicyView(BaseModel):
    """A project's default policy in force and the settings it sets."""

    model_config = ConfigDict(extra="forbid")

    project: str
    policy: dict[str, Any]
    project_settings: dict[str, Any]


_PATTERN = Annotated[str, Field(min_length=1, max_length=MAX_PATTERN_CHARS, pattern=r"^[^\x00-\x1f]*$")]
_PATTERNS = Annotated[list[_PATTERN], Field(min_length=1, max_length=MAX_PATTERNS)]


def _setting(name: str) -> Any:
    """One setting as the wire carries it (``check_policy(text=False)``); null: the layer below decides."""
    if name in LISTS:
        return Literal["all", "none"] | _PATTERNS | None
    if name == DELAY:
        return Annotated[float, Field(ge=0, le=MAX_DELAY_S)] | None
    return Literal[CHOICES[name]] | None  # runcast.wire.policy's values, read at runtime


_SETTINGS: dict[str, Any] = {name: (_setting(name), None) for name in FIELDS}
PolicyChange = create_model(
    "PolicyChange",
    __config__=ConfigDict(extra="forbid"),
    __doc__="Settings to change (docs/api.md#publication-policy); a setting left out stays as it is.",
    **_SETTINGS,
)
"""The body of a policy PUT and ``run_started.policy``, for the OpenAPI document: runcast.wire.policy's
settings, one field each (``check_policy`` checks the body itself and names the setting at fault)."""
