"""``init(checkpoint_dir=...)``: checkpoints saved elsewhere are copied into the storage directory
by the sender thread (hashed while copying), and the event reports the copy."""

from __future__ import annotations

import hashlib
import logging
import threading

import pytest


P = "sdk-tests"  # make_run's project: copies go under <checkpoint_dir>/<project>/


def _files(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def test_file_is_copied_off_the_training_thread_and_the_copy_reported(make_run, receiver, tmp_path, monkeypatch):
    from runcast import checkpoint_files

    threads = []
    real_copy = checkpoint_files.copy_checkpoint

    def spy(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return real_copy(*args, **kwargs)

    monkeypatch.setattr(checkpoint_files, "copy_checkpoint", spy)
    storage = tmp_path / "storage"
    ckpt = tmp_path / "work" / "last.pt"
    ckpt.parent.mkdir()
    data = b"weights" * 300_000  # > one hash chunk
    ckpt.write_bytes(data)
    run = make_run(checkpoint_dir=storage)
    run.checkpoint(ckpt, step=5, metrics={"val/loss": 1.5})
    run.finish()

    [event] = receiver.of_type("checkpoint")
    copy = storage / P / run.id / "step-5" / "last.pt"
    assert event["path"] == str(copy)
    assert event["sha256"] == hashlib.sha256(data).hexdigest() and event["size"] == len(data)
    assert copy.read_bytes() == data and ckpt.read_bytes() == data  # the original stays
    assert _files(storage) == [P, f"{P}/{run.id}", f"{P}/{run.id}/step-5", f"{P}/{run.id}/step-5/last.pt"]  # no temp file
    assert threads and threads[0].startswith("runcast-sender") and threads[0] != threading.current_thread().name


def test_same_file_name_at_each_step_keeps_every_copy(make_run, receiver, tmp_path):
    storage = tmp_path / "storage"
    ckpt = tmp_path / "last.pt"
    run = make_run(checkpoint_dir=storage)
    for step in (1, 2):
        ckpt.write_bytes(b"%d" % step * 100)
        run.checkpoint(ckpt, step=step)
        run.flush()  # the trainer overwrites last.pt next: the copy must be made by then
    run.finish()
    first, second = receiver.of_type("checkpoint")
    assert (storage / P / run.id / "step-1" / "last.pt").read_bytes() == b"1" * 100
    assert (storage / P / run.id / "step-2" / "last.pt").read_bytes() == b"2" * 100
    assert first["sha256"] == hashlib.sha256(b"1" * 100).hexdigest()
    assert second["path"].endswith("step-2/last.pt")


def test_checkpoint_already_in_the_projects_storage_dir_is_reported_in_place(make_run, receiver, tmp_path):
    storage = tmp_path / "storage"
    inside = storage / P / "run" / "a.pt"
    inside.parent.mkdir(parents=True)
    inside.write_bytes(b"abc")
    run = make_run(checkpoint_dir=storage)
    run.checkpoint(inside, step=1)
    run.finish()
    [event] = receiver.of_type("checkpoint")
    assert event["path"] == str(inside) and event["sha256"] == hashlib.sha256(b"abc").hexdigest()
    assert _files(storage) == [P, f"{P}/run", f"{P}/run/a.pt"]


def test_checkpoint_in_the_storage_dir_outside_the_projects_is_copied_into_it(make_run, receiver, tmp_path):
    """The server serves only <root>/<project>/: a file elsewhere under the root is copied there."""
    storage = tmp_path / "storage"
    elsewhere = storage / "run" / "a.pt"
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_bytes(b"abc")
    run = make_run(checkpoint_dir=storage)
    run.checkpoint(elsewhere, step=1)
    run.finish()
    [event] = receiver.of_type("checkpoint")
    assert event["path"] == str(storage / P / run.id / "step-1" / "a.pt")
    assert elsewhere.read_bytes() == b"abc"


def test_directory_checkpoint_is_copied_and_pruning_deletes_the_copy(make_run, receiver, tmp_path):
    storage = tmp_path / "storage"
    tag = tmp_path / "ds" / "global_step7"
    (tag / "sub").mkdir(parents=True)
    (tag / "model.bin").write_bytes(b"m" * 10)
    (tag / "sub" / "optim.bin").write_bytes(b"o" * 5)
    single = tmp_path / "s.pt"
    single.write_bytes(b"s")
    run = make_run(checkpoint_dir=storage)
    run.checkpoint(tag, step=7)
    run.checkpoint(single, step=8)
    run.flush()
    copy = storage / P / run.id / "step-7" / "global_step7"
    assert (copy / "sub" / "optim.bin").read_bytes() == b"o" * 5
    single.unlink()  # the trainer's retention deletes its file and says so
    run.checkpoint(single, step=8, status="pruned")
    run.checkpoint(tag, step=7, status="pruned")
    run.finish()
    dir_event, file_event, pruned_file, pruned_dir = receiver.of_type("checkpoint")
    assert (dir_event["path"], dir_event["size"], dir_event["sha256"]) == (str(copy), 15, None)
    assert file_event["path"] == str(storage / P / run.id / "step-8" / "s.pt")
    assert pruned_file["path"] == file_event["path"] and pruned_file["status"] == "pruned"
    assert pruned_dir["path"] == dir_event["path"]
    assert _files(storage) == [P, f"{P}/{run.id}"]  # both copies (and their step folders) deleted
    assert (tag / "model.bin").exists()  # the trainer's own files are never touched


def test_failed_copy_reports_the_original(make_run, receiver, tmp_path, caplog):
    blocker = tmp_path / "storage"
    blocker.write_text("a file where the directory should be")
    ckpt = tmp_path / "c.pt"
    ckpt.write_bytes(b"c" * 10)
    run = make_run(checkpoint_dir=blocker)
    with caplog.at_level(logging.WARNING, logger="runcast"):
        run.checkpoint(ckpt, step=1)
        run.finish()
    [event] = receiver.of_type("checkpoint")
    assert event["path"] == str(ckpt) and event["sha256"] == hashlib.sha256(b"c" * 10).hexdigest()
    assert any("could not copy checkpoint" in r.getMessage() for r in caplog.records)


def test_checkpoint_dir_from_the_environment(make_run, receiver, tmp_path, monkeypatch):
    storage = tmp_path / "env-storage"
    monkeypatch.setenv("RUNCAST_CHECKPOINT_DIR", str(storage))
    ckpt = tmp_path / "e.pt"
    ckpt.write_bytes(b"e")
    run = make_run()
    assert run.checkpoint_dir == storage
    run.checkpoint(ckpt, step=3)
    run.finish()
    assert receiver.of_type("checkpoint")[0]["path"] == str(storage / P / run.id / "step-3" / "e.pt")


def test_without_checkpoint_dir_nothing_is_copied(make_run, receiver, tmp_path, monkeypatch):
    monkeypatch.delenv("RUNCAST_CHECKPOINT_DIR", raising=False)
    ckpt = tmp_path / "n.pt"
    ckpt.write_bytes(b"n")
    run = make_run()
    run.checkpoint(ckpt, step=1)
    run.finish()
    assert receiver.of_type("checkpoint")[0]["path"] == str(ckpt)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "spool") == ["n.pt"]


def test_bad_step_still_raises_at_the_call_site(make_run, tmp_path):
    ckpt = tmp_path / "b.pt"
    ckpt.write_bytes(b"b")
    run = make_run(checkpoint_dir=tmp_path / "storage")
    with pytest.raises(ValueError):
        run.checkpoint(ckpt, step=-1)
