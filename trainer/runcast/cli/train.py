"""``runcast train``: the reference trainer from the command line (flags map onto TrainConfig)."""

from __future__ import annotations

import typer

from runcast.cli.exits import EXIT_REFUSED
from runcast.handshake import InitError

MODEL, DATA, OPTIM, EVAL, FAULTS, BROADCAST = "Model", "Data", "Optimisation", "Evaluation and checkpoints", "Fault injection", "Broadcast"


def train_command(
    n_layer: int = typer.Option(2, min=1, help="Transformer blocks.", rich_help_panel=MODEL),
    n_head: int = typer.Option(4, min=1, help="Attention heads (must divide --n-embd).", rich_help_panel=MODEL),
    n_embd: int = typer.Option(128, min=8, help="Model width.", rich_help_panel=MODEL),
    block_size: int = typer.Option(64, min=8, help="Context length in tokens (bytes).", rich_help_panel=MODEL),
    dropout: float = typer.Option(0.0, min=0.0, max=1.0, help="Dropout probability.", rich_help_panel=MODEL),
    mix: str = typer.Option(
        "0:code=0.7,prose=0.3",
        help='Data-mix schedule: "STEP:code=W,prose=W;STEP:...", e.g. "0:code=0.7,prose=0.3;200:code=0.5,prose=0.5". '
        "Each change is broadcast as a data-mix event.",
        rich_help_panel=DATA,
    ),
    val_fraction: float = typer.Option(0.05, min=0.0, max=0.5, help="Share of documents held out for validation.", rich_help_panel=DATA),
    data_limit: int | None = typer.Option(None, min=1, help="Read at most this many files per source (quick runs).", rich_help_panel=DATA),
    batch_size: int = typer.Option(8, min=1, help="Sequences per micro-batch.", rich_help_panel=DATA),
    gradient_accumulation_steps: int = typer.Option(1, min=1, help="Micro-batches per optimizer step.", rich_help_panel=OPTIM),
    max_steps: int = typer.Option(300, min=1, help="Optimizer steps to train for.", rich_help_panel=OPTIM),
    learning_rate: float = typer.Option(2e-3, help="Peak learning rate (after warmup).", rich_help_panel=OPTIM),
    min_lr: float = typer.Option(2e-4, help="Learning rate at the end of the cosine decay.", rich_help_panel=OPTIM),
    warmup_steps: int = typer.Option(20, min=0, help="Linear learning-rate warmup steps.", rich_help_panel=OPTIM),
    weight_decay: float = typer.Option(0.1, help="AdamW weight decay (not on biases and norms).", rich_help_panel=OPTIM),
    grad_clip: float = typer.Option(1.0, min=0.0, help="Clip the gradient norm to this (0: no clipping).", rich_help_panel=OPTIM),
    seed: int = typer.Option(1337, help="Seed for python, numpy, torch and the data sampler.", rich_help_panel=OPTIM),
    eval_interval: int = typer.Option(50, min=1, help="Validation loss every this many steps.", rich_help_panel=EVAL),
    eval_iters: int = typer.Option(4, min=1, help="Validation batches per source.", rich_help_panel=EVAL),
    ckpt_interval: int = typer.Option(100, min=1, help="Checkpoint every this many steps (and at the end).", rich_help_panel=EVAL),
    sample_tokens: int = typer.Option(48, min=0, help="At each checkpoint, log the model's continuations of fixed "
                                      "prompts, this many bytes long (0: none), its scores and a weight histogram.",
                                      rich_help_panel=EVAL),
    keep_last: int = typer.Option(2, min=0, help="Retention: keep the newest N checkpoints ...", rich_help_panel=EVAL),
    keep_best: int = typer.Option(1, min=0, help="... and the best M by validation loss; the rest are pruned.", rich_help_panel=EVAL),
    out_dir: str = typer.Option("out-runcast", help="Where checkpoints go.", rich_help_panel=EVAL),
    resume: str | None = typer.Option(
        None, help="Resume from this checkpoint exactly (model, optimizer, schedule, RNG, data position); "
        "the broadcast continues the same run in a new segment.", rich_help_panel=EVAL,
    ),
    deepspeed: str | None = typer.Option(
        None, help="Train through DeepSpeed with this ds_config.json (ZeRO stage, accumulation, bf16, offload).",
        rich_help_panel=OPTIM,
    ),
    inject_spike_at: int | None = typer.Option(None, min=0, help="Multiply the learning rate at this step ...", rich_help_panel=FAULTS),
    spike_factor: float = typer.Option(100.0, help="... by this factor ...", rich_help_panel=FAULTS),
    spike_steps: int = typer.Option(3, min=1, help="... for this many steps: the loss really spikes.", rich_help_panel=FAULTS),
    crash_at: int | None = typer.Option(None, min=1, help="Exit uncleanly (status 1, run not finished) after this step.", rich_help_panel=FAULTS),
    server: str | None = typer.Option(None, envvar="RUNCAST_SERVER", help="Runcast server URL. Without one, training runs offline.", rich_help_panel=BROADCAST),
    token: str | None = typer.Option(None, envvar="RUNCAST_TOKEN", help="Project ingest token.", rich_help_panel=BROADCAST, show_default=False),
    project: str | None = typer.Option(None, envvar="RUNCAST_PROJECT", help="Project the run belongs to (default: "
                                       "the token's).", rich_help_panel=BROADCAST),
    name: str | None = typer.Option(None, help="Run name (default tinygpt-<layers>x<width>).", rich_help_panel=BROADCAST),
    visibility: str = typer.Option("public", help="public, unlisted or private.", rich_help_panel=BROADCAST),
    public_paths: bool = typer.Option(
        False, "--public-paths", help="Show this run's paths, host name and pid to every reader "
        "(by default only readers with the project's token see them).", rich_help_panel=BROADCAST,
    ),
) -> None:
    """Train the reference tiny GPT on local data (stdlib code + prose) and broadcast it live.

    Runs on the CPU in minutes and sends what a pretraining run publishes: per-step loss, lr, grad norm, throughput and memory; validation loss; a data-mix schedule; a dataset manifest; checkpoints with retention, each with the model's samples for fixed prompts, its validation scores and a weight histogram. --crash-at and --inject-spike-at make a crash or a spike to show; --resume continues bit for bit in a new segment of the same run. Without --server (or RUNCAST_SERVER) it trains offline and says so.
    """
    flags = dict(locals())
    from runcast.train import TrainConfig, train

    cfg = TrainConfig(**flags)
    try:
        train(cfg, log=typer.echo)
    except InitError as exc:  # the server refused the token or the project: not a bad flag
        typer.echo(f"runcast train: {exc}", err=True)
        raise typer.Exit(EXIT_REFUSED) from None
    except ValueError as exc:  # bad flags found late (mix schedule, data too small, head count)
        raise typer.BadParameter(str(exc)) from exc
