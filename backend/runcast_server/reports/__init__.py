"""Training reports of a run (docs/reports.md): Markdown with live blocks, versions kept, a draft
generated from the period's record, published under the run's publication policy."""
