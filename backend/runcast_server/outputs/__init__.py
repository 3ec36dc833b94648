"""What the model says and scores along a run (docs/samples.md): samples, evaluations and
media, stored like points by (run, segment, key, step) and published like timeline events."""
