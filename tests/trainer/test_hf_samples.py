"""The Hugging Face callback's ``sample_prompts``: a tiny GPT-2 (built from a config, a word-level tokenizer made
here, nothing downloaded) generates for the prompts at each evaluation, logged as samples on rank zero only."""

from __future__ import annotations

import hashlib

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "is", "capital", "of", "france", "paris", "once", "upon", "time", "there", "was"]
PROMPTS = ["the cat sat on the", "once upon a time there was"]


def tokenizer() -> object:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([" ".join(WORDS)], trainers.WordLevelTrainer(special_tokens=["<unk>", "<eos>", "<pad>"]))
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<eos>",
                                                pad_token="<pad>")


class Words(torch.utils.data.Dataset):
    def __init__(self, n: int, seed: int, vocab: int) -> None:
        self.ids = torch.randint(0, vocab, (n, 12), generator=torch.Generator().manual_seed(seed))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def test_samples_at_each_evaluation_equal_what_the_model_generates(receiver, tmp_path):
    from runcast.integrations.transformers import RuncastCallback

    tok = tokenizer()
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=len(tok),
                                                                 n_positions=32))
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf"), max_steps=6, per_device_train_batch_size=4, logging_steps=1,
        eval_strategy="steps", eval_steps=3, save_strategy="no", report_to=[], use_cpu=True, learning_rate=1e-2,
        seed=7, disable_tqdm=True,
    )
    settings = {"max_new_tokens": 5, "do_sample": False}
    callback = RuncastCallback(project="hf", name="samples", server=receiver.url, token="t",
                               spool_dir=str(tmp_path / "spool"), sample_prompts=PROMPTS, generation_kwargs=settings)
    trainer = transformers.Trainer(model=model, args=args, processing_class=tok, callbacks=[callback],
                                   train_dataset=Words(32, 0, len(tok)), eval_dataset=Words(4, 1, len(tok)))
    trainer.train()
    trainer.evaluate()  # after training: the final model's generations, at step 6 again
    callback.finish()

    samples = receiver.of_type("sample")
    assert [(e["step"], e["key"], e["prompt"], e["prompt_id"], e["settings"]) for e in samples] == [
        (step, "samples", p, hashlib.sha256(p.encode()).hexdigest()[:16], settings) for step in (3, 6, 6) for p in PROMPTS]
    expected = []
    model.eval()
    with torch.no_grad():
        for p in PROMPTS:
            ids = tok(p, return_tensors="pt")
            out = model.generate(**ids, max_new_tokens=5, do_sample=False, pad_token_id=tok.pad_token_id)
            expected.append(tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True))
    assert [e["output"] for e in samples[-2:]] == expected
    assert all(e["output"] for e in samples)  # the model wrote something


def test_only_rank_zero_generates_and_without_a_tokenizer_it_warns_once(recording_run, caplog):
    from runcast.integrations.transformers import RuncastCallback

    tok = tokenizer()
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=len(tok),
                                                                 n_positions=16))
    model.train()

    class Rank:
        is_world_process_zero, global_step = False, 4

    cb = RuncastCallback(run=recording_run, sample_prompts=["the cat"], generation_kwargs={"max_new_tokens": 2})
    cb.on_evaluate(None, Rank(), None, model=model, processing_class=tok)
    assert recording_run.of("log_samples") == []

    Rank.is_world_process_zero = True
    cb.on_evaluate(None, Rank(), None, model=model, processing_class=tok)
    ((rows,), kwargs), = recording_run.of("log_samples")
    assert kwargs == {"step": 4, "key": "samples"} and [r["prompt"] for r in rows] == ["the cat"]
    assert model.training  # back in the mode it was in

    untokenized = RuncastCallback(run=recording_run, sample_prompts=["the cat"])
    untokenized.on_evaluate(None, Rank(), None, model=model)
    untokenized.on_evaluate(None, Rank(), None, model=model)
    assert [r.message for r in caplog.records if "sample_prompts" in r.message] == [
        "runcast: not generating samples for sample_prompts: no tokenizer: pass tokenizer= or the Trainer's "
        "processing_class"]
    assert len(recording_run.of("log_samples")) == 1
    with pytest.raises(TypeError, match="sample_prompts must be a list of strings"):
        RuncastCallback(run=recording_run, sample_prompts="the cat")
