"""The local corpus: sources, cleaning, dedup, split, manifest and the mix schedule."""

from __future__ import annotations

import json

import numpy as np
import pytest

from runcast.wire.events import MAX_MANIFEST_BYTES
from runcast.train import data
from runcast.train.data import Sampler, build_corpus, mix_at, parse_mix


@pytest.fixture(scope="module")
def corpus():
    return build_corpus(0.05, limit=60, min_tokens=34)


def test_both_sources_have_train_and_val_tokens(corpus):
    assert set(corpus.sources) == {"code", "prose"}
    for src in corpus.sources.values():
        assert src.train.size > 1000 and src.val.size > 34 and src.val_docs >= 1
        assert src.train.dtype == np.uint8
        assert src.train[-1] == data.EOD
        assert (src.train == data.EOD).sum() == src.train_docs


def test_exact_duplicates_are_removed_and_counted(corpus):
    kept = [d.sha256 for s in corpus.sources.values() for d in s.documents if d.text is not None and not d.dropped]
    assert len(kept) == len(set(kept))
    dups = sum(1 for s in corpus.sources.values() for d in s.documents if d.dropped == "duplicate")
    assert dups == corpus.duplicates_removed
    # stdlib ships several byte-identical files (empty __init__.py files, vendored copies)
    full = build_corpus(0.05, min_tokens=34)
    assert full.duplicates_removed > 0


def test_cleaning_rules():
    assert data._clean(b"a\r\nb\rc\n") == ("a\nb\nc\n", None)
    assert data._clean(b"\xff\xfe bad") == (None, "not UTF-8")
    assert data._clean(b"x\x00y") == (None, "contains NUL")
    assert data._clean(b"  \n\t") == (None, "empty")


def test_prose_falls_back_to_docstrings_without_common_licenses(monkeypatch, tmp_path):
    monkeypatch.setattr(data, "LICENSES_DIR", tmp_path / "missing")
    docs = data.load_documents(limit=30)
    root, prose = docs["prose"]
    assert "not found" in root
    assert prose and all(d.name.startswith("docstring:") for d in prose)


def test_manifest_lists_files_counts_rules_and_scrubbed_previews(corpus):
    m = corpus.manifest()
    encoded = json.dumps(m, allow_nan=False)
    assert len(encoded.encode()) < MAX_MANIFEST_BYTES
    assert m["version"] == corpus.version and m["dedup"]["removed"] == corpus.duplicates_removed
    assert m["tokenizer"]["vocab_size"] == 256
    code = m["sources"]["code"]
    assert code["train_tokens"] == corpus.sources["code"].train.size
    name, size, sha, status = code["files"][0]
    assert len(sha) == 64 and size > 0 and status in ("kept", "duplicate", "not UTF-8", "contains NUL", "empty")
    assert len(code["previews"]) == 3
    assert "@" not in json.dumps(m["sources"]["prose"]["previews"])  # author e-mails in docstrings are scrubbed


def test_full_manifest_fits_the_event_limit():
    m = build_corpus(0.05, min_tokens=34).manifest()
    assert len(json.dumps(m).encode()) < MAX_MANIFEST_BYTES


def test_mix_schedule_parsing_and_lookup():
    schedule = parse_mix("200:code=1,prose=1; 0:code=0.7,prose=0.3")
    assert schedule == [(0, {"code": 0.7, "prose": 0.3}), (200, {"code": 0.5, "prose": 0.5})]
    assert mix_at(schedule, 199) == {"code": 0.7, "prose": 0.3}
    assert mix_at(schedule, 200) == {"code": 0.5, "prose": 0.5}
    assert parse_mix("0:code=2") == [(0, {"code": 1.0, "prose": 0.0})]
    for bad in ("code=1", "0:web=1", "0:code=0,prose=0", "0:code=-1", "10:code=1"):
        with pytest.raises(ValueError):
            parse_mix(bad)


def test_sampler_follows_weights_and_replays_from_state(corpus):
    sampler = Sampler(corpus, batch_size=4, block_size=32, seed=1)
    state = sampler.state()
    x1, y1 = sampler.batch({"code": 1.0, "prose": 0.0})
    assert x1.shape == (4, 32) and (x1[:, 1:] == y1[:, :-1]).all()
    sampler.load_state(state)
    x2, _ = sampler.batch({"code": 1.0, "prose": 0.0})
    assert (x1 == x2).all()
