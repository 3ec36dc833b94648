"""Runcast SDK: broadcast a training run.

    import runcast
    run = runcast.init(project="tinygpt", name="baseline", config=cfg, server="http://host:8000", token=TOKEN)
    run.log({"train/loss": loss, "lr": lr}, step=step)
    run.finish()

Importing this package needs only the standard library and httpx (torch and numpy
are used only when present and needed). See docs/sdk.md.
"""

from .run import Run, RunStats, init

__version__ = "0.1.0"

__all__ = ["Run", "RunStats", "__version__", "init"]
