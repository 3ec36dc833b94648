"""Runcast SDK: broadcast a training run.

    import runcast
    run = runcast.init(project="tinygpt", name="baseline", config=cfg, server="http://host:8000", token=TOKEN)
    run.log({"train/loss": loss, "lr": lr}, step=step)
    run.finish()
"""

__version__ = "0.1.0"
