import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

out = Path(sys.argv[1])
tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
words = ["the", "a", "cat", "dog", "sat", "on", "mat", "is", "capital", "of", "france", "paris", "london", "berlin", "answer", "question", "yes", "no", "what", "color", "sky", "blue", "red", "green", "two", "plus", "equals", "four", "three", "five"]
trainer = trainers.WordLevelTrainer(special_tokens=["<unk>", "<eos>", "<pad>"])
tok.train_from_iterator([" ".join(words)] * 3, trainer)
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<eos>", pad_token="<pad>", bos_token="<eos>")
fast.save_pretrained(out)
torch.manual_seed(0)
cfg = GPT2Config(vocab_size=len(fast), n_positions=128, n_embd=16, n_layer=2, n_head=2, bos_token_id=fast.eos_token_id, eos_token_id=fast.eos_token_id)
GPT2LMHeadModel(cfg).save_pretrained(out)
print("ok", len(fast))
