"""Query runs from Python: ``runcast.Api`` (docs/sdk.md#querying-runs-from-python).

Standard library and httpx; pyarrow (Parquet) and pandas (DataFrames) are used when installed.
"""

from __future__ import annotations

from runcast.query.api import Api
from runcast.query.errors import ApiError
from runcast.query.records import Alert, Checkpoint, RunInfo, Segment
from runcast.query.run import RemoteRun

__all__ = ["Alert", "Api", "ApiError", "Checkpoint", "RemoteRun", "RunInfo", "Segment"]
