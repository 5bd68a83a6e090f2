"""A tiny random-weights BERT saved as a sentence-transformers directory, for fast offline tests.

Tests cannot download weights, so they build a model from a config instead. The vocabulary is
written here (common English words, letters and word pieces) so that ordinary English text
tokenizes into real word pieces rather than [UNK], which keeps attention and pooling meaningful.
"""

from __future__ import annotations

from pathlib import Path

import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
from transformers import BertConfig, BertModel, BertTokenizerFast

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# Two forward passes of the same model over the same batches may differ in the last bit: most likely MKL's kernels,
# whose paths depend on the buffers' alignment (6e-8 to 2.4e-7 in a few rows, on fresh-clone CI at load 7-9). Tests
# compare separate passes within this; what a cache or the same call gives back, bit for bit.
SECOND_PASS_ATOL = 1e-6

_WORDS = """
the of and to a in is it you that he was for on are with as i his they be at one have this from
or had by not word but what some we can out other were all there when up use your how said an each
she which do their time if will way about many then them write would like so these her long make
thing see him two has look more day could go come did number sound no most people my over know water
than call first who may down side been now find any new work part take get place made live where after
back little only round man year came show every good me give our under name very through just form
sentence great think say help low line differ turn cause much mean before move right boy old too same
tell does set three want air well also play small end put home read hand port large spell add even land
here must big high such follow act why ask men change went light kind off need house picture try us
again animal point mother world near build self earth father head stand own page should country found
answer school grow study still learn plant cover food sun four between state keep eye never last let
thought city tree cross farm hard start might story saw far sea draw left late run while press close
night real life few north open seem together next white children begin got walk example ease paper
group always music those both mark often letter until mile river car feet care second book carry took
science eat room friend began idea fish mountain stop once base hear horse cut sure watch color face
wood main enough plain girl usual young ready above ever red list though feel talk bird soon body dog
family direct pose leave song measure door product black short numeral class wind question happen
complete ship area half rock order fire south problem piece told knew pass since top whole king space
heard best hour better true during hundred five remember step early hold west ground interest reach
fast verb sing listen six table travel less morning ten simple several vowel toward war lay against
pattern slow center love person money serve appear road map rain rule govern pull cold notice voice
film movie news sport market profit sales firm bank game team win lost minister government election
""".split()

_PUNCTUATION = list(".,!?;:'\"()-$%&")
_LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]
_DIGITS = [str(d) for d in range(10)]
_SUFFIXES = ["##s", "##es", "##ed", "##ing", "##ly", "##er", "##est", "##ion", "##al", "##y", "##n", "##'s"]


def vocabulary() -> list[str]:
    """Specials, then words, punctuation, letters, digits and word pieces, without duplicates.

    Letters, digits and their ``##`` continuations make every lowercase word tokenizable.
    """
    pieces = _LETTERS + _DIGITS
    tokens = SPECIAL_TOKENS + _WORDS + _PUNCTUATION + pieces + _SUFFIXES + [f"##{p}" for p in pieces]
    return list(dict.fromkeys(tokens))


def build_tiny_model(
    path: Path, *, layers: int = 2, hidden: int = 32, heads: int = 2, pooling: str = "mean"
) -> Path:
    """Write a tiny BERT + Pooling + Normalize sentence-transformers model to ``path`` and return it.

    Deterministic: the weights come from ``torch.manual_seed(0)``, so two calls give equal models.
    Load it with ``SentenceTransformer(str(path), device="cpu")``.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    vocab = vocabulary()
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab={token: i for i, token in enumerate(vocab)}, model_max_length=128)
    tokenizer.save_pretrained(str(path))

    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=2 * hidden,
        max_position_embeddings=128,
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(str(path))

    transformer = Transformer(str(path))
    modules = [transformer, Pooling(transformer.get_embedding_dimension(), pooling_mode=pooling), Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(path))
    return path


CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} [SEP] {% endfor %}"
                 "{% if add_generation_prompt %}assistant :{% endif %}")


def build_tiny_causal_lm(path: Path, *, layers: int = 2, hidden: int = 32, heads: int = 2,
                         stop_bias: float = 0.0) -> Path:
    """Write a tiny random-weights Llama with this file's word-piece vocabulary and a chat template to ``path``:
    a causal LM folder as the generation engines load one. [SEP] ends a sequence; `stop_bias` raises its logit
    so that greedy answers end on their own after a few tokens (a random model otherwise runs to the limit)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    vocab = vocabulary()
    tokenizer = BertTokenizerFast(vocab={token: i for i, token in enumerate(vocab)}, model_max_length=512)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.eos_token = "[SEP]"
    tokenizer.save_pretrained(str(path))
    sep, pad = vocab.index("[SEP]"), vocab.index("[PAD]")
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=heads, intermediate_size=2 * hidden,
                         max_position_embeddings=512, eos_token_id=sep, bos_token_id=vocab.index("[CLS]"),
                         pad_token_id=pad, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    if stop_bias:
        with torch.no_grad():
            model.lm_head.weight[sep] += stop_bias * model.model.norm.weight.sign()
    model.generation_config.eos_token_id = sep
    model.generation_config.pad_token_id = pad
    model.save_pretrained(str(path))
    return path
