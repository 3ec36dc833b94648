"""The commands API's bodies (docs/commands.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from runcast.wire.events import MAX_NAME_CHARS, check_text
from runcast.wire.limits import NOT_BLANK

CommandKind = Literal["stop", "checkpoint", "pause", "resume", "set"]
CommandState = Literal["pending", "delivered", "acknowledged", "expired"]
MAX_REASON_CHARS = 2000


class CommandRequest(BaseModel):
    """A command for the run's trainer; ``name`` and ``value`` only with ``set``."""

    model_config = ConfigDict(extra="forbid")
    kind: CommandKind
    reason: str = Field(min_length=1, max_length=MAX_REASON_CHARS, pattern=NOT_BLANK,
                        description="Why: shown with the command on the run's public record.")
    name: str | None = Field(None, min_length=1, max_length=MAX_NAME_CHARS,
                             description="For set: a tunable the run declared (runcast.tunable).")
    value: float | None = Field(None, description="For set: the new value, within the tunable's bounds.")

    @field_validator("reason", "name")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        return None if value is None else check_text(value, "reason")


class DeliveredCommand(BaseModel):
    """A command as the trainer receives it (in the ingest answer)."""

    id: str
    run: str
    kind: CommandKind
    name: str | None
    value: Any
    reason: str
    sender: str
    created_at: float
    expires_at: float


class CommandOut(BaseModel):
    """A command and what became of it."""

    command: str = Field(description="Its id (cmd_...): what the trainer acknowledges.")
    kind: CommandKind
    name: str | None
    value: Any
    reason: str
    sender: str = Field(description="The person's display name, or the token's label.")
    state: CommandState
    step: int | None = Field(description="Where the trainer applied or refused it.")
    outcome: Literal["applied", "refused"] | None
    message: str | None
    created_at: float
    expires_at: float
    acked_at: float | None


class CommandList(BaseModel):
    run: str
    commands: list[CommandOut]
