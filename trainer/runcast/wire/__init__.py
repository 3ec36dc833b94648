"""The wire protocol the SDK and the server share: the events and their limits (``events``, which
re-exports ``limits`` and the field ``checks``; the bodies of each event type in ``bodies`` and
``model_outputs``), the publication policy (``policy``) and the scrubbing of published text
(``scrub``). Standard library only; the server imports the SDK here and nowhere else but
``runcast.estimate``, ``runcast.image_codec`` and ``runcast.__version__`` (docs/CONTRACTS.md)."""
