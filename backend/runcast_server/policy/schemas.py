"""Response models of the policy API (docs/api.md#publication-policy).

``policy`` is every setting in force (``runcast.policy.effective``); ``*_settings`` the
settings a layer sets itself.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


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
