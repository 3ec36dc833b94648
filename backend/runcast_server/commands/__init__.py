"""Commands from the team to a live trainer (docs/commands.md): sent through the API, delivered in
the answers the trainer's ingest requests already get, acknowledged by a ``command_ack`` event, and
kept on the run's public record as ``command`` timeline events."""
