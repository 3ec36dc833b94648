"""What the model says and scores (docs/samples.md): a run's samples, evaluations and media.

Public reads: whoever may read the run, under its publication policy (the kinds ``samples``,
``evals``, ``media``: a withheld kind lists nothing, with ``withheld`` true, and one sample of it
is as unknown) and its broadcast delay (rows of the versions due), as ``outputs.access`` says.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query

from runcast_server.api.deps import SessionDep
from runcast_server.api.one_hop import RunReadDep
from runcast_server.api.read_deps import RUN_ERRORS, ReadableRunDep, ViewDep
from runcast_server.outputs import evals, media, samples
from runcast_server.outputs.schemas import EvalList, MediaKeys, MediaList, PromptList, SampleDetail, SampleList
from runcast_server.reads.cursor import STEP_CURSOR, decode_step_cursor

router = APIRouter(tags=["outputs"])

KeyQuery = Annotated[str | None, Query(min_length=1, max_length=200, description="Only this key.")]


def step_after(
    after: Annotated[str | None, Query(pattern=STEP_CURSOR, description="next_cursor of the previous page.")] = None,
) -> tuple[int, int] | None:
    """``?after=``: the (step, id) a page continues after."""
    return None if after is None else decode_step_cursor(after)


StepAfterDep = Annotated[tuple[int, int] | None, Depends(step_after)]


@router.get("/runs/{run_id}/samples/prompts", response_model=PromptList, responses=RUN_ERRORS)
async def get_prompts(read: RunReadDep, key: KeyQuery = None) -> dict[str, Any]:
    """The prompts the run wrote samples for: the first 500 characters of each, its length, how
    many samples and over which steps; by key, in the order the run first wrote for them."""
    return await read(lambda r: samples.list_prompts(r.session, r.run, r.view(), key))


@router.get("/runs/{run_id}/samples", response_model=SampleList, responses=RUN_ERRORS)
async def get_samples(
    read: RunReadDep,
    after: StepAfterDep,
    key: KeyQuery = None,
    prompt: Annotated[str | None, Query(min_length=1, max_length=200, description="Only this prompt id.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="Samples per page.")] = 100,
) -> dict[str, Any]:
    """Samples oldest step first: each output (and reference) clipped to 2,000 characters, with its
    whole length; ``GET .../samples/{sample_id}`` gives one whole."""
    return await read(lambda r: samples.list_samples(r.session, r.run, r.view(), key=key, prompt=prompt, after=after,
                                                     limit=limit))


@router.get("/runs/{run_id}/samples/{sample_id}", response_model=SampleDetail, responses=RUN_ERRORS)
def get_sample(
    session: SessionDep,
    found: ReadableRunDep,
    view: ViewDep,
    sample_id: Annotated[int, Path(ge=1, le=2**53 - 1, description="The sample id (from the list).")],
) -> dict[str, Any]:
    """One sample with its whole prompt, output and reference."""
    return samples.one_sample(session, found[0], view, sample_id)


@router.get("/runs/{run_id}/evals", response_model=EvalList, responses=RUN_ERRORS)
async def get_evals(
    read: RunReadDep,
    suite: Annotated[str | None, Query(min_length=1, max_length=100, description="Only this suite.")] = None,
    task: Annotated[str | None, Query(min_length=1, max_length=200, description="Only this task.")] = None,
) -> dict[str, Any]:
    """Evaluation scores, one entry per task, suite and step (``checkpoint``: the step of the
    checkpoint they score, when tied to one)."""
    return await read(lambda r: evals.list_evals(r.session, r.run, r.view(), suite=suite, task=task))


@router.get("/runs/{run_id}/media/keys", response_model=MediaKeys, responses=RUN_ERRORS)
async def get_media_keys(read: RunReadDep) -> dict[str, Any]:
    """The run's media keys: each one's kind, how many rows and over which steps."""
    return await read(lambda r: media.list_keys(r.session, r.run, r.view()))


@router.get("/runs/{run_id}/media", response_model=MediaList, responses=RUN_ERRORS)
async def get_media(
    read: RunReadDep,
    after: StepAfterDep,
    key: KeyQuery = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="Rows per page.")] = 100,
) -> dict[str, Any]:
    """Images, tables and histograms oldest step first, each with its kind's fields (an image's
    bytes at ``image_url``)."""
    return await read(lambda r: media.list_media(r.session, r.run, r.view(), key=key, after=after, limit=limit))
