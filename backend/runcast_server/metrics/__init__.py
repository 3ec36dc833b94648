"""Metric points once stored: rollups, the windowed reads behind /metrics, and the CSV/Parquet export."""
