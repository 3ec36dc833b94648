"""Comments on a run, anchored to the curve (docs/comments.md): threads, the team's moderation,
reports, hold-for-approval, Markdown rendered and sanitized on the server."""
