"""Where generated text comes from: a local causal language model folder through transformers, or any
OpenAI-compatible chat endpoint (vLLM's server, llama.cpp's server, Ollama, a hosted API) through the official
`openai` client. Both lists (seed 003) and negatives (seed 004) ask an Engine; only the local one has the
log-probabilities directional control needs (guided)."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from core.errors import UserError, shorten

API_KEY_ENV = "OPENAI_API_KEY"  # the only place an endpoint's key is read from; it is never written anywhere
SMALL_FILE_BYTES = 1 << 20  # files up to this size (configs, tokenizers) are hashed whole for the fingerprint
EDGE_BYTES = 1 << 20  # of a larger file (the weights), its first and last MiB, with its size
REQUEST_TIMEOUT_S = 120.0  # one endpoint request; a server that accepts and never answers fails after this
REQUEST_RETRIES = 4  # the openai client's own retries, with exponential backoff, on 408/409/429/5xx and lost links
PLAIN_TEMPLATE = "plain text (the folder's tokenizer has no chat template)"

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Reply:
    """One generated answer: its text, how many tokens it took, and whether it ended on its own (an end-of-sequence
    token or the server's stop) rather than at the token limit, which the lists' verification calls incomplete."""

    text: str
    tokens: int
    finished: bool


class Engine(Protocol):
    kind: str  # "local" or "endpoint"
    model_id: str  # what a cached item is keyed by: the folder's fingerprint, or the endpoint and its model name
    guided: bool  # has the log-probabilities directional control needs

    def chat(self, messages: Messages, max_tokens: int, seed: int) -> Reply: ...

    def describe(self) -> dict: ...


def folder_fingerprint(folder: Path) -> str:
    """A model folder's content as 16 hex digits, without loading it: every file's name and size, small files
    whole, large ones by their first and last MiB, so a new save or another model gives another fingerprint and a
    copy of the folder the same."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        size = path.stat().st_size
        digest.update(f"{path.relative_to(folder).as_posix()}\x00{size}\x00".encode())
        with path.open("rb") as f:
            if size <= SMALL_FILE_BYTES:
                digest.update(f.read())
            else:
                digest.update(f.read(EDGE_BYTES))
                f.seek(size - EDGE_BYTES)
                digest.update(f.read(EDGE_BYTES))
    return digest.hexdigest()[:16]


class LocalEngine:
    """A causal LM folder (config.json, weights, tokenizer) through AutoModelForCausalLM, greedy. On CUDA in bf16
    where the GPU supports it, else fp16 (training's choice); fp32 on the CPU. trust_remote_code stays off, so a
    folder that needs its own code is refused in one line."""

    kind = "local"
    guided = True

    def __init__(self, folder: str | Path, device: str | None = None) -> None:
        path = Path(folder).expanduser()
        if not (path / "config.json").is_file():
            raise UserError(f"--model {path} is not a language model folder (it needs a config.json beside its "
                            "weights and tokenizer); give a local folder, or --endpoint URL with --model NAME.")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from core.models.loading import pick_device

        self.device = pick_device(device)
        dtype = torch.float32
        if self.device.startswith("cuda"):
            dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(path), trust_remote_code=False)
            self.model = AutoModelForCausalLM.from_pretrained(str(path), trust_remote_code=False, dtype=dtype)
        except (OSError, ValueError, KeyError) as exc:
            raise UserError(f"Could not load the language model in {path}: {' '.join(str(exc).split())[:300]}"
                            ) from exc
        self.model.to(self.device).eval()
        self.path, self.dtype = path, str(dtype).removeprefix("torch.")
        self.model_id = f"local:{folder_fingerprint(path)}"
        self.templated = bool(getattr(self.tokenizer, "chat_template", None))
        self.stop_ids = sorted({i for i in (self.tokenizer.eos_token_id, self.model.generation_config.eos_token_id)
                                for i in (i if isinstance(i, list) else [i]) if i is not None})

    def describe(self) -> dict:
        return {"engine": "local", "model": self.path.name, "fingerprint": self.model_id.split(":", 1)[1],
                "device": self.device, "dtype": self.dtype,
                "template": "the folder's chat template" if self.templated else PLAIN_TEMPLATE}

    def prompt_ids(self, messages: Messages):
        """The messages as the model reads them: its chat template with the assistant's turn opened; a folder
        without one reads each message's text on its own line (said in describe())."""
        if self.templated:
            ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                                     return_dict=True)["input_ids"]
        else:
            text = "\n\n".join(m["content"] for m in messages) + "\n\n"
            ids = self.tokenizer(text, return_tensors="pt")["input_ids"]
        return ids.to(self.device)

    def _generate(self, messages: Messages, max_tokens: int, **guidance) -> Reply:
        import torch

        ids = self.prompt_ids(messages)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else (self.stop_ids or [0])[0]
        with torch.inference_mode():
            out = self.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                      max_new_tokens=max_tokens, eos_token_id=self.stop_ids or None,
                                      pad_token_id=pad, **guidance)
        new = out[0, ids.shape[1]:].tolist()
        finished = bool(new) and new[-1] in self.stop_ids
        return Reply(self.tokenizer.decode(new, skip_special_tokens=True).strip(), len(new), finished)

    def chat(self, messages: Messages, max_tokens: int, seed: int = 0) -> Reply:
        """Greedy decoding (seed unused: greedy has no randomness)."""
        return self._generate(messages, max_tokens)

    def directional(self, messages: Messages, negative: Messages, scale: float, max_tokens: int) -> Reply:
        """Greedy decoding on scale·log p(·|messages) − (scale − 1)·log p(·|negative): transformers' classifier-free
        guidance with the negative prompt as its unconditional branch (seed 003's Eq. 4 with scale = 1 + λ)."""
        if scale == 1:
            return self._generate(messages, max_tokens)
        return self._generate(messages, max_tokens, guidance_scale=scale,
                              negative_prompt_ids=self.prompt_ids(negative))


class EndpointEngine:
    """A chat-completions endpoint through the openai client: temperature 0, the key from OPENAI_API_KEY only, each
    request bounded by REQUEST_TIMEOUT_S and retried REQUEST_RETRIES times by the client's own backoff. Nothing is
    contacted until the first request."""

    kind = "endpoint"
    guided = False

    def __init__(self, url: str, model: str, timeout_s: float = REQUEST_TIMEOUT_S,
                 retries: int = REQUEST_RETRIES) -> None:
        if not (isinstance(url, str) and url.lower().startswith(("http://", "https://"))):
            raise UserError(f"--endpoint must be an http(s) URL such as http://localhost:8000/v1, got {shorten(url)}.")
        if not (isinstance(model, str) and model.strip()):
            raise UserError("--endpoint needs --model NAME: the model the server serves (its --served-model-name).")
        from openai import OpenAI

        self.url, self.model = url.rstrip("/"), model.strip()
        self.model_id = f"endpoint:{self.url}|{self.model}"
        # a local server needs no key, but the client insists on one: a placeholder that is never stored
        self.client = OpenAI(base_url=self.url, api_key=os.environ.get(API_KEY_ENV) or "none", timeout=timeout_s,
                             max_retries=retries)

    def describe(self) -> dict:
        return {"engine": "endpoint", "endpoint": self.url, "model": self.model}

    def chat(self, messages: Messages, max_tokens: int, seed: int = 0) -> Reply:
        import openai

        try:
            answer = self.client.chat.completions.create(model=self.model, messages=messages, temperature=0,
                                                         max_tokens=max_tokens, seed=seed)
        except openai.APITimeoutError as exc:
            raise UserError(f"The endpoint {self.url} did not answer within {self.client.timeout:g} s "
                            f"({self.client.max_retries} retries); check that the server is up.") from exc
        except openai.APIConnectionError as exc:
            raise UserError(f"Could not reach the endpoint {self.url}: {exc.__cause__ or exc}.") from exc
        except openai.APIStatusError as exc:
            raise UserError(f"The endpoint {self.url} answered {exc.status_code} for model {self.model!r}: "
                            f"{shorten(exc.message, 200)}") from exc
        choice = answer.choices[0] if answer.choices else None
        text = (choice.message.content or "") if choice is not None else ""
        tokens = answer.usage.completion_tokens if answer.usage is not None else 0
        return Reply(text.strip(), int(tokens or 0), choice is not None and choice.finish_reason == "stop")


def served_models(url: str, timeout_s: float = REQUEST_TIMEOUT_S) -> list[str]:
    """The model names an OpenAI-compatible server lists at GET /models (vLLM, llama.cpp and Ollama list theirs),
    so a caller that gave only the URL can use the one it serves; UserError in one line where it cannot be asked."""
    import openai
    from openai import OpenAI

    client = OpenAI(base_url=url.rstrip("/"), api_key=os.environ.get(API_KEY_ENV) or "none", timeout=timeout_s,
                    max_retries=REQUEST_RETRIES)
    try:
        return [model.id for model in client.models.list()]
    except openai.APIConnectionError as exc:
        raise UserError(f"Could not reach the endpoint {url}: {exc.__cause__ or exc}.") from exc
    except openai.APIStatusError as exc:
        raise UserError(f"The endpoint {url} answered {exc.status_code} when asked which models it serves: "
                        f"{shorten(exc.message, 200)}") from exc


def engine_for(model: str | None, endpoint: str | None, device: str | None = None) -> Engine:
    """The engine the command line names: --endpoint URL --model NAME, or --model FOLDER."""
    if not model:
        raise UserError("Name the language model: --model FOLDER (a local causal LM) or --endpoint URL --model NAME.")
    if endpoint:
        return EndpointEngine(endpoint, model)
    return LocalEngine(model, device)
