"""Commands from the team to this training script (docs/commands.md).

The server delivers them in the answers the sender already gets (no extra port, no poll); the
script opts in with ``run.on_command(handler)`` or by polling ``run.commands()`` at step
boundaries, and answers each with ``cmd.ack(step=..., message=...)`` or ``cmd.refuse(message)``.
A script that never opts in has every command refused for it ("this run does not take commands").
Each command id is acted on once, whatever the number of times it is delivered.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

log = logging.getLogger("runcast")

NOT_TAKEN: Final = "this run does not take commands"
TUNABLES_KEY: Final = "_tunables"  # the run's config key the server reads the tunables and their bounds from
Ack = Callable[[str, "int | None", str, str], None]  # (command id, step, outcome, message)


@dataclass
class Tunable:
    """A value the team may change while the run trains (``run.tunable``): read ``.value`` each step."""

    name: str
    value: float
    min: float | None = None
    max: float | None = None


@dataclass
class Command:
    """One command: ``kind`` (stop, checkpoint, pause, resume, set), ``name`` and ``value`` (set),
    who sent it and why. Answer it once with ``ack`` or ``refuse``."""

    id: str
    kind: str
    reason: str
    sender: str
    name: str | None = None
    value: Any = None
    expires_at: float = math.inf
    _answer: Callable[[Command, int | None, str, str], None] | None = field(default=None, repr=False)
    answered: bool = False

    def ack(self, step: int | None = None, message: str = "") -> None:
        """Applied at ``step`` (``message``: what was done); a ``set`` changes its tunable's value now."""
        self._reply(step, "applied", message)

    def refuse(self, message: str, step: int | None = None) -> None:
        """Not applied, and why."""
        self._reply(step, "refused", message)

    def _reply(self, step: int | None, outcome: str, message: str) -> None:
        if self.answered:
            raise RuntimeError(f"command {self.id} was already answered")
        self.answered = True
        if self._answer is not None:
            self._answer(self, step, outcome, message)


class Inbox:
    """The commands delivered to this run and not yet taken by the script (thread-safe: the sender
    thread puts, the training thread takes)."""

    def __init__(self, ack: Ack, step: Callable[[], int]) -> None:
        self._ack = ack
        self._step = step
        self._lock = threading.Lock()
        self._waiting: deque[Command] = deque()
        self._seen: set[str] = set()
        self.opted_in = False
        self.tunables: dict[str, Tunable] = {}

    def receive(self, delivered: list[dict[str, Any]]) -> None:
        """Commands from an ingest answer: each new id once; refused at once when the script did not opt in."""
        for raw in delivered:
            uid = raw.get("id")
            if not isinstance(uid, str):
                continue
            with self._lock:
                if uid in self._seen:
                    continue
                self._seen.add(uid)
            command = Command(id=uid, kind=str(raw.get("kind")), reason=str(raw.get("reason") or ""),
                              sender=str(raw.get("sender") or ""), name=raw.get("name"), value=raw.get("value"),
                              expires_at=float(raw.get("expires_at") or math.inf), _answer=self._answered)
            if not self.opted_in:
                log.warning("runcast: %s asked this run to %s (%s); it does not take commands (run.on_command)",
                            command.sender, command.kind, command.reason)
                command.refuse(NOT_TAKEN, self.current())
                continue
            with self._lock:
                self._waiting.append(command)

    def take(self) -> list[Command]:
        """The commands waiting (oldest first), still live; taking opts the script in."""
        self.opted_in = True
        now = time.time()
        with self._lock:
            taken, self._waiting = list(self._waiting), deque()
        return [c for c in taken if c.expires_at > now]

    def assign(self, values: dict[str, float]) -> None:
        """Declared tunables take these values (on a rank other than 0, as rank 0 acknowledged them)."""
        for name, value in values.items():
            if name in self.tunables:
                self.tunables[name].value = float(value)

    def current(self) -> int | None:
        """The run's step (None before the first)."""
        step = self._step()
        return step if step >= 0 else None

    def _answered(self, command: Command, step: int | None, outcome: str, message: str) -> None:
        if outcome == "applied" and command.kind == "set" and command.name in self.tunables:
            self.tunables[command.name].value = float(command.value)
        self._ack(command.id, step if step is not None else self.current(), outcome, message)


class Commanded:
    """``Run``'s command verbs; ``Run`` provides ``_inbox``, ``config``, ``step``, ``flush`` and ``finish``."""

    _inbox: Inbox
    config: Any

    def flush(self, timeout: float | None = 10.0) -> bool:
        raise NotImplementedError

    def finish(self, status: str = "finished", timeout: float | None = None) -> None:
        raise NotImplementedError

    _handler: Callable[[Command], object] | None = None
    _stop_checkpoint: Callable[[int], object] | None = None

    def tunable(self, name: str, default: float, *, min: float | None = None,  # noqa: A002 - the user's words
                max: float | None = None) -> Tunable:  # noqa: A002
        """Declare ``name`` as a value the team may ``set`` (within ``min``..``max``); returns the
        ``Tunable`` whose ``.value`` a ``set`` command changes when acknowledged. Opts the script in."""
        if min is not None and max is not None and min > max:
            raise ValueError(f"tunable {name}: min {min} is above max {max}")
        value = float(default)
        tunable = Tunable(name, value, min, max)
        self._inbox.tunables[name] = tunable
        self._inbox.opted_in = True
        declared = dict(self.config.get(TUNABLES_KEY) or {})
        declared[name] = {"default": value, "min": min, "max": max}
        self.config[TUNABLES_KEY] = declared
        return tunable

    def commands(self) -> list[Command]:
        """The commands delivered since the last call (poll it at step boundaries); opts the script in."""
        return self._inbox.take()

    def on_command(self, handler: Callable[[Command], object] | None = None, *,
                   checkpoint: Callable[[int], object] | None = None) -> None:
        """Take commands: ``handler(cmd)`` is called on the training thread at the next ``run.log``
        of a new step (it should ``ack`` or ``refuse``; one it leaves unanswered is acknowledged).
        Without a handler for it, ``stop`` calls ``checkpoint(step)`` (if given), finishes the run
        and exits 0; other kinds are refused."""
        self._inbox.opted_in = True
        self._handler = handler
        self._stop_checkpoint = checkpoint

    def _dispatch(self) -> None:
        """Hand the waiting commands to the handler (``run.log`` calls it once per step)."""
        if self._handler is None and self._stop_checkpoint is None:
            return  # the plain loop (run.commands()), or not opted in
        for command in self._inbox.take():
            if self._handler is not None:
                self._handler(command)
                if not command.answered:
                    command.ack(self._inbox.current())
            elif command.kind == "stop":
                self._stop(command)
            else:
                command.refuse(f"this script has no handler for {command.kind!r}", self._inbox.current())

    def _stop(self, command: Command) -> None:
        step = self._inbox.current() or 0
        if self._stop_checkpoint is not None:
            self._stop_checkpoint(step)
        command.ack(step, f"stopped at step {step}" + (" after a checkpoint" if self._stop_checkpoint else ""))
        self.finish()
        raise SystemExit(0)
