"""Training data that exists on every machine: no download.

Two sources make the mix:

* ``code``  -- the ``.py`` files of the running interpreter's standard library
  (``sysconfig.get_paths()["stdlib"]``, without ``site-packages``).
* ``prose`` -- the licence texts in ``/usr/share/common-licenses`` (Debian and its
  derivatives ship them on every install) plus the module docstrings of those same
  standard-library files. Where ``/usr/share/common-licenses`` is missing (macOS, other
  distributions) the prose source is the docstrings alone.

Tokenizer: byte level. A document is its UTF-8 bytes, one token per byte (vocabulary
of 256); documents are joined with the byte 0 (NUL) as end-of-document marker, which
is why documents containing NUL are dropped while cleaning.

Cleaning, in order (``CLEANING_RULES``): decode as UTF-8 (undecodable files are
dropped), turn CRLF/CR line ends into LF, drop documents containing NUL, drop empty or
whitespace-only documents. Then exact duplicates are removed: documents whose cleaned
bytes have the same SHA-256 are kept once (first in sorted path order, code before
prose). The validation split is chosen per document from its hash, so it does not
change when files are added or removed elsewhere.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import io
import os
import sysconfig
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from runcast.wire.scrub import RULE_DESCRIPTIONS, scrub

T = TypeVar("T")

SOURCES = ("code", "prose")
LICENSES_DIR = Path("/usr/share/common-licenses")
EOD = 0  # end-of-document token (the NUL byte)
CLEANING_RULES = [
    "decode as UTF-8; files that are not valid UTF-8 are dropped",
    "normalise line ends: CRLF and CR become LF",
    "drop documents containing NUL (byte 0 is the end-of-document token)",
    "drop empty and whitespace-only documents",
    "module docstrings are dedented with inspect.cleandoc",
]
DEDUP_RULE = "exact duplicates: documents with the same SHA-256 of their cleaned UTF-8 bytes are kept once"
TOKENIZER = {"type": "bytes", "vocab_size": 256, "eod_token": EOD, "description": "one token per UTF-8 byte"}


@dataclass
class Document:
    source: str
    name: str  # file path (relative to its root) or "docstring:<module path>"
    raw_size: int  # bytes of the file as read (of the docstring for docstrings)
    raw_sha256: str
    text: str | None  # cleaned text, None when dropped
    dropped: str | None = None  # reason for dropping, if dropped

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest() if self.text is not None else ""


@dataclass
class SourceData:
    name: str
    root: str
    train: np.ndarray  # uint8 tokens
    val: np.ndarray
    documents: list[Document] = field(default_factory=list)
    duplicates: int = 0
    train_docs: int = 0
    val_docs: int = 0


@dataclass
class Corpus:
    sources: dict[str, SourceData]
    version: str
    duplicates_removed: int

    def manifest(self, previews_per_source: int = 3, preview_chars: int = 400) -> dict[str, Any]:
        """The dataset manifest as sent with ``run.manifest``: sources, files, counts, rules, previews."""
        out: dict[str, Any] = {
            "version": self.version,
            "tokenizer": TOKENIZER,
            "cleaning_rules": CLEANING_RULES,
            "dedup": {"rule": DEDUP_RULE, "removed": self.duplicates_removed},
            "scrubbing": {"applies_to": "sample previews", "rules": RULE_DESCRIPTIONS},
            "sources": {},
        }
        for name, src in self.sources.items():
            kept = [(d.name, d.text) for d in src.documents if d.text is not None and not d.dropped]
            previews = [
                {"name": name, "text": scrub(text[:preview_chars])}
                for name, text in _spread(kept, previews_per_source)
            ]
            out["sources"][name] = {
                "root": src.root,
                "documents": len(src.documents),
                "kept": len(kept),
                "duplicates_removed": src.duplicates,
                "dropped": sum(1 for d in src.documents if d.dropped and d.dropped != "duplicate"),
                "train_documents": src.train_docs,
                "val_documents": src.val_docs,
                "train_tokens": int(src.train.size),
                "val_tokens": int(src.val.size),
                # [name, size in bytes, sha256 of the bytes as read, status]
                "files_columns": ["name", "size", "sha256", "status"],
                "files": [[d.name, d.raw_size, d.raw_sha256, d.dropped or "kept"] for d in src.documents],
                "previews": previews,
            }
        return out


def _spread(items: list[T], n: int) -> list[T]:
    if len(items) <= n:
        return items
    return [items[i * len(items) // n] for i in range(n)]


def _clean(raw: bytes) -> tuple[str | None, str | None]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not UTF-8"
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "\x00" in text:
        return None, "contains NUL"
    if not text.strip():
        return None, "empty"
    return text, None


def _module_docstring(raw: bytes) -> str | None:
    """The module docstring, read from the first tokens (no parse of the whole file: 100x faster)."""
    skip = {tokenize.ENCODING, tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE}
    try:
        for tok in tokenize.tokenize(io.BytesIO(raw).readline):
            if tok.type in skip:
                continue
            if tok.type == tokenize.STRING:
                value = ast.literal_eval(tok.string)
                return inspect.cleandoc(value) if isinstance(value, str) else None
            return None
    except (tokenize.TokenError, SyntaxError, ValueError, UnicodeDecodeError):
        return None
    return None


def _stdlib_files(limit: int | None) -> tuple[Path, list[Path]]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in ("site-packages", "dist-packages", "__pycache__")]
        files.extend(Path(dirpath, f) for f in filenames if f.endswith(".py"))
    files.sort()
    return root, files[:limit] if limit else files


def load_documents(limit: int | None = None) -> dict[str, tuple[str, list[Document]]]:
    """Read both sources: {source: (root description, documents in sorted order)}.

    ``limit`` caps the number of files read per source (for tests and quick demos).
    """
    root, files = _stdlib_files(limit)
    code, docstrings = [], []
    for path in files:
        raw = path.read_bytes()
        rel = str(path.relative_to(root))
        text, why = _clean(raw)
        code.append(Document("code", rel, len(raw), hashlib.sha256(raw).hexdigest(), text, why))
        doc = _module_docstring(raw)
        if doc is not None:
            doc_raw = doc.encode("utf-8", "surrogatepass")
            text, why = _clean(doc_raw)
            docstrings.append(
                Document("prose", f"docstring:{rel}", len(doc_raw), hashlib.sha256(doc_raw).hexdigest(), text, why)
            )
    licenses = []
    if LICENSES_DIR.is_dir():
        for path in sorted(p for p in LICENSES_DIR.iterdir() if p.is_file())[:limit]:
            raw = path.read_bytes()
            text, why = _clean(raw)
            licenses.append(Document("prose", str(path), len(raw), hashlib.sha256(raw).hexdigest(), text, why))
        prose_root = f"{LICENSES_DIR} + module docstrings of {root}"
    else:
        prose_root = f"module docstrings of {root} ({LICENSES_DIR} not found)"
    return {"code": (str(root), code), "prose": (prose_root, licenses + docstrings)}


def _is_val(sha: str, val_fraction: float) -> bool:
    return int(sha[:8], 16) % 10_000 < val_fraction * 10_000


def _join(texts: list[str]) -> np.ndarray:
    if not texts:
        return np.zeros(0, dtype=np.uint8)
    blob = b"".join(t.encode() + bytes([EOD]) for t in texts)
    return np.frombuffer(blob, dtype=np.uint8).copy()


def build_corpus(val_fraction: float = 0.05, limit: int | None = None, min_tokens: int = 0) -> Corpus:
    """Clean, deduplicate and split both sources into train/val token arrays."""
    seen: set[str] = set()
    sources: dict[str, SourceData] = {}
    removed = 0
    digest = hashlib.sha256(repr((CLEANING_RULES, DEDUP_RULE, val_fraction)).encode())
    for name, (root, docs) in load_documents(limit).items():
        train_texts: list[str] = []
        val_texts: list[str] = []
        dups = 0
        for doc in docs:
            if doc.text is None:
                continue
            sha = doc.sha256
            if sha in seen:
                doc.dropped = "duplicate"
                dups += 1
                continue
            seen.add(sha)
            digest.update(name.encode() + sha.encode())
            (val_texts if _is_val(sha, val_fraction) else train_texts).append(doc.text)
        if not val_texts and len(train_texts) > 1:  # a tiny source still gets a validation document
            val_texts.append(train_texts.pop())
        src = SourceData(name, root, _join(train_texts), _join(val_texts), docs, dups, len(train_texts), len(val_texts))
        for split, arr in (("train", src.train), ("val", src.val)):
            if arr.size < min_tokens:
                raise ValueError(
                    f"source {name!r} has {arr.size} {split} tokens, fewer than the {min_tokens} a batch row needs"
                )
        sources[name] = src
        removed += dups
    return Corpus(sources, "corpus-" + digest.hexdigest()[:12], removed)


# --- the data-mix schedule -------------------------------------------------------------


def parse_mix(spec: str) -> list[tuple[int, dict[str, float]]]:
    """Parse ``"0:code=0.7,prose=0.3;200:code=0.5,prose=0.5"`` into [(step, weights)], sorted.

    Weights are normalised to sum to 1; a schedule must start at step 0 and name only
    known sources.
    """
    schedule: list[tuple[int, dict[str, float]]] = []
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        step_s, sep, rest = part.partition(":")
        if not sep:
            raise ValueError(f"mix entry {part!r} must look like STEP:source=weight,...")
        weights: dict[str, float] = {}
        for item in rest.split(","):
            src, eq, w = item.strip().partition("=")
            if not eq or src not in SOURCES:
                raise ValueError(f"mix entry {item!r}: expected source=weight with source in {SOURCES}")
            weights[src] = float(w)
            if weights[src] < 0:
                raise ValueError(f"mix weight for {src!r} must not be negative")
        total = sum(weights.values())
        if total <= 0:
            raise ValueError(f"mix at step {step_s}: weights must not all be zero")
        schedule.append((int(step_s), {s: weights.get(s, 0.0) / total for s in SOURCES}))
    schedule.sort(key=lambda e: e[0])
    if not schedule or schedule[0][0] != 0:
        raise ValueError("the mix schedule must start at step 0")
    return schedule


def mix_at(schedule: list[tuple[int, dict[str, float]]], step: int) -> dict[str, float]:
    """The weights in force at ``step``."""
    current = schedule[0][1]
    for start, weights in schedule:
        if start <= step:
            current = weights
    return current


# --- batches ---------------------------------------------------------------------------


class Sampler:
    """Random training windows drawn by the mix weights; its state is the data position.

    All randomness comes from one numpy Generator, so saving ``state()`` in a checkpoint
    and ``load_state()`` on resume replays exactly the batches an uninterrupted run sees.
    """

    def __init__(self, corpus: Corpus, batch_size: int, block_size: int, seed: int) -> None:
        self.corpus, self.batch_size, self.block_size = corpus, batch_size, block_size
        self.rng = np.random.default_rng(seed)

    def state(self) -> dict[str, Any]:
        return dict(self.rng.bit_generator.state)

    def load_state(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state

    def batch(self, weights: dict[str, float]) -> tuple[torch.Tensor, torch.Tensor]:
        names = list(weights)
        picks = self.rng.choice(len(names), size=self.batch_size, p=[weights[n] for n in names])
        rows = []
        for pick in picks:
            tokens = self.corpus.sources[names[pick]].train
            start = int(self.rng.integers(0, tokens.size - self.block_size - 1))
            rows.append(tokens[start : start + self.block_size + 1])
        return _xy(np.stack(rows))


def val_batches(
    corpus: Corpus, source: str, n: int, batch_size: int, block_size: int, seed: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """A fixed set of validation batches for one source (same on every call: comparable losses)."""
    rng = np.random.default_rng(seed)
    tokens = corpus.sources[source].val
    for _ in range(n):
        starts = rng.integers(0, tokens.size - block_size - 1, size=batch_size)
        yield _xy(np.stack([tokens[s : s + block_size + 1] for s in starts]))


def _xy(rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    t = torch.from_numpy(rows.astype(np.int64))
    return t[:, :-1], t[:, 1:]
