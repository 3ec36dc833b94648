"""The metrics domain's own table: the rollups of each series. The series and their points are
the run record's (``record.models``): the publication policy and the read helpers below this domain
read them."""

from __future__ import annotations

from sqlalchemy import BigInteger, Float, SmallInteger
from sqlalchemy.orm import Mapped, mapped_column

from runcast_server.core.models import Base


class Rollup(Base):
    """Aggregates of a series over the aligned bucket ``[bucket * 2**level, (bucket+1) * 2**level)``.

    ``min``/``max`` cover every non-NaN value (+-Inf included, so divergence shows);
    ``sum``/``count`` cover finite values only; ``nan_count`` counts NaNs;
    ``last`` is the value at ``last_step``, the highest step in the bucket.
    """

    __tablename__ = "rollups"
    __table_args__ = {"sqlite_with_rowid": False}  # as points

    series_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    level: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    bucket: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    min: Mapped[float | None] = mapped_column(Float)
    max: Mapped[float | None] = mapped_column(Float)
    sum: Mapped[float] = mapped_column(Float, default=0.0)
    count: Mapped[int] = mapped_column(BigInteger, default=0)
    nan_count: Mapped[int] = mapped_column(BigInteger, default=0)
    last: Mapped[float | None] = mapped_column(Float)
    last_step: Mapped[int] = mapped_column(BigInteger)
