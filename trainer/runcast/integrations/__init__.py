"""Integrations that make existing training code broadcast with a line or two.

Each module imports its library lazily and says what to install when it is missing:

* ``runcast.integrations.transformers`` -- ``RuncastCallback`` for the HF ``Trainer``
* ``runcast.integrations.lightning``    -- ``RuncastLogger`` for PyTorch Lightning
* ``runcast.integrations.deepspeed``    -- ``engine_metrics(engine)`` and CPU set-up helpers
"""
