"""usage: python launch_make_tiny.py OUT_DIR  (the tiny random Llama of oracles.md §1; no hub)."""
import os
import random
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: E402

out = sys.argv[1]
torch.manual_seed(0)
special = ["<unk>", "<s>", "</s>", "<pad>", "<|im_start|>", "<|im_end|>"]
tok = Tokenizer(models.BPE(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
corpus = ["The quick brown fox jumps over the lazy dog.",
          "Hello, how are you today? I am fine, thank you.",
          "user assistant system You are a helpful assistant.",
          "Quantization reduces the precision of weights to 4 or 8 bits.",
          "OpenAI compatible servers answer chat completions with streaming."] * 50
_r = random.Random(0)
_letters = "abcdefghijklmnopqrstuvwxyz"
corpus += [" ".join("".join(_r.choice(_letters) for _ in range(_r.randint(2, 8))) for _ in range(12))
           for _ in range(3000)]
trainer = trainers.BpeTrainer(vocab_size=1024, special_tokens=special,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
tok.train_from_iterator(corpus, trainer=trainer)
hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="<|im_end|>",
                                 unk_token="<unk>", pad_token="<pad>", model_max_length=2048)
hf_tok.chat_template = ("{% for message in messages %}"
                        "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
                        "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
assert len(hf_tok) == 1024
cfg = LlamaConfig(vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=2048,
                  bos_token_id=hf_tok.bos_token_id, eos_token_id=hf_tok.eos_token_id, pad_token_id=hf_tok.pad_token_id,
                  tie_word_embeddings=False, torch_dtype="bfloat16")
model = LlamaForCausalLM(cfg).to(torch.bfloat16)
model.generation_config = GenerationConfig(bos_token_id=cfg.bos_token_id, eos_token_id=cfg.eos_token_id,
                                           pad_token_id=cfg.pad_token_id, max_new_tokens=16, do_sample=False)
model.save_pretrained(out, safe_serialization=True)
hf_tok.save_pretrained(out)
