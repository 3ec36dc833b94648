"""Every domain's tables on the one ``MetaData``: core's (projects and tokens), the run record's
(``record.models``: the run, segment, series, point, event and version tables every domain reads),
and each domain's own ``models``; and the run delete over all of them.

Importing this module registers them all; the run delete walks them (children before
parents) and the migrations compare against them. Core never imports a domain, so the
domains' tables are gathered here rather than in ``core.models``; and no domain imports
this module, so the run delete (``runs.manage.delete_run``) is handed them by ``delete_run``.
"""

from __future__ import annotations

from sqlalchemy import MetaData
from sqlalchemy.orm import Session

from runcast_server.alerts import models as _alert_models  # (alerts tables, migration 0003)
from runcast_server.artifacts import models as _artifact_models  # noqa: F401  (checkpoint uploads, migration 0008)
from runcast_server.commands import models as _command_models  # noqa: F401  (commands to trainers, migration 0022)
from runcast_server.comments import models as _comment_models  # (comments, migration 0023)
from runcast_server.core.models import Base
from runcast_server.inbox import models as _inbox_models  # noqa: F401  (ingest inbox, migration 0006)
from runcast_server.metrics import models as _metric_models  # noqa: F401  (rollups)
from runcast_server.outputs import models as _output_models  # noqa: F401  (samples, evals, media, blobs: 0016)
from runcast_server.people import models as _people_models  # noqa: F401  (users, roles: migration 0020)
from runcast_server.policy import models as _policy_models  # noqa: F401  (publication policies, migration 0011)
from runcast_server.record.models import Run
from runcast_server.reports import models as _report_models  # (training reports, migration 0024)
from runcast_server.runs import manage
from runcast_server.runs import models as _run_models  # noqa: F401  (run tags, run updates)
from runcast_server.sessions import models as _session_models  # noqa: F401  (dashboard sign-in, migration 0010)

METADATA: MetaData = Base.metadata


def delete_run(session: Session, run: Run) -> manage.Deleted:
    """Delete ``run`` and every row of every domain that belongs to it, in the caller's transaction
    (``runs.manage.delete_run``; then ``manage.drop_detached`` after the commit)."""
    return manage.delete_run(session, run, METADATA.sorted_tables, dependents=(_alert_models.delete_run_deliveries,
                                                                                 _comment_models.delete_run_comment_rows,
                                                                                 _report_models.delete_run_report_rows))
