"""The reference trainer: a tiny GPT trained on local data, broadcast with Runcast.

Torch is imported only when this package is; ``import runcast`` stays light.
"""

from runcast.train.config import TrainConfig, get_lr
from runcast.train.trainer import train

__all__ = ["TrainConfig", "get_lr", "train"]
