"""``runcast.init``'s options as one typed object (``runcast.InitOptions``), its keywords kept:
every keyword of earlier releases still accepted and listed by ``help``; an unknown one a
TypeError naming it; ``options=`` gives them whole, keywords beside it win; the environment
fills only what the caller left out."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import runcast
from runcast import InitOptions

# init's keywords as the 0.1 releases spelled them (docs/sdk.md#runcastinit-options)
KEYWORDS = ("project name config server transport token mode on_error id resume resume_step tags group job_type "
            "notes visibility seed dir spool_dir start_timeout flush_interval batch_size max_queue finish_timeout "
            "all_ranks capture_code rank heartbeat_interval retry_initial retry_max alerts checkpoint_dir "
            "public_paths system_metrics upload upload_bandwidth policy").split()


def test_every_keyword_is_an_option_and_is_listed_by_help():
    assert [f.name for f in dataclasses.fields(InitOptions)] == KEYWORDS
    listed = inspect.signature(runcast.init).parameters
    assert set(KEYWORDS) <= set(listed)
    assert [p for p in listed if listed[p].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD] == [
        "project", "name", "config"]
    assert listed["batch_size"].default == 20_000 and listed["visibility"].default == "public"


def test_an_unknown_keyword_is_a_type_error_naming_it(tmp_path):
    with pytest.raises(TypeError, match="'spool_directory'"):
        runcast.init(project="p", mode="disabled", spool_directory=str(tmp_path))


def test_options_object_whole_and_keywords_beside_it_win(tmp_path, monkeypatch):
    monkeypatch.delenv("RUNCAST_SERVER", raising=False)
    base = InitOptions(project="from-options", name="base", mode="offline", dir=str(tmp_path), capture_code=False,
                       system_metrics=False, tags=["a"])
    run = runcast.init(options=base, name="from-keyword")
    try:
        assert (run.project, run.name) == ("from-options", "from-keyword")
        assert runcast.run is run
    finally:
        runcast.finish()
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.name = "changed"  # type: ignore[misc]


def test_environment_fills_only_what_was_left_out(tmp_path, monkeypatch):
    monkeypatch.delenv("RUNCAST_SERVER", raising=False)
    monkeypatch.setenv("RUNCAST_PROJECT", "env-project")
    monkeypatch.setenv("RUNCAST_NAME", "env-name")
    run = runcast.init(name="mine", mode="offline", dir=str(tmp_path), capture_code=False, system_metrics=False)
    try:
        assert (run.project, run.name) == ("env-project", "mine")
    finally:
        runcast.finish()


def test_a_bad_option_is_refused_before_the_server_is_asked(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("the server was asked")

    monkeypatch.setattr("runcast.start.whoami", never)
    with pytest.raises(ValueError, match="tags must be a list"):
        runcast.init(project="p", server="http://127.0.0.1:9", token="t", tags="a,b")
