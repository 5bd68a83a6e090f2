"""ONNX Runtime for the passes that do not train: a model's transformer exported once per weights fingerprint and run
by ONNX Runtime wherever the graph reproduces torch's outputs.

Why: on a CPU that other work shares, torch's intra-op threads wait for each other at every operation, and a
busy laptop lost 2.6x to that on a 3,000-text encode (issue 32: 305.6 s against ONNX Runtime's 117.6 s at load
7.4; quiet 12.2 s against 10.3-11.1 s). bench throughput measures both arms, quiet and busy.

What runs where: only the Hugging Face transformer is exported (the masked mean of every layer's hidden state is
computed inside the graph, so a batch's layer curves cost no extra copy); the modules after it (pooling, Dense,
Normalize) still run in torch on the graph's last hidden state, so every pooling the library offers works
unchanged. Each graph is checked once against torch on probe texts, and used only when every output is within
TOLERANCE; the verdict is cached beside the graph, so a graph that differs (or cannot be exported) is never tried
again and that model is encoded with torch, with the reason in the log. Models on a GPU, models whose first module
is not a plain Hugging Face model (ATA pooling asks for attentions; the quick point's TopLayers reads cached
states), and encodes that ask for attentions stay on torch.

CONTRASTLAB_ENGINE picks: `auto` (default: ONNX Runtime for an encode of at least MIN_TEXTS texts, since an export
costs a few seconds, or one whose caller has the fingerprint of a model with a graph on disk, when other work holds
a core as it starts, since on an idle machine torch was as fast; the quick point's frozen layers' pass too),
`onnx` (every encode it applies to), `torch` (never).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from core.errors import UserError, shorten
from core.models.loading import model_fingerprint
from core.models.threads import free_cores, usable_cores
from core.storage import cache_dir, write_atomic

ENV = "CONTRASTLAB_ENGINE"
CHOICES = ("auto", "onnx", "torch")
TOLERANCE = 1e-5  # largest |onnx - torch| over every output of the probe texts for a graph to be used
MIN_TEXTS = 1024  # `auto` exports a model's graph only for an encode this long: an export takes 2-5 s
# Why `auto` leaves an idle machine's encodes to torch (2 cores, all-MiniLM-L6-v2, SST-2 texts, quiet, load 1.3-1.9):
# 3,000 texts through the transformer took torch 6.1-6.5 s, ONNX Runtime 6.5-7.4 s spinning, 7.8-8.6 s with
# attention fused; a 20,000-text after-evaluation 30.1 s on torch, 43.1 s on ONNX Runtime (its export included).
OPSET = 17
KEPT_SESSIONS = 3  # sessions held in memory (one per graph and thread count): each holds its model's weights
KEPT_GRAPHS = 6  # graphs kept on disk, the most recently used
_log = logging.getLogger("contrastlab.engine")

Verify = Callable[["Graph"], float]  # graph -> the largest |onnx - torch| over its probe texts
Run = Callable[[Mapping[str, torch.Tensor]], list[np.ndarray]]  # a tokenized batch -> the graph's outputs


def choice() -> str:
    """CONTRASTLAB_ENGINE, checked: one of CHOICES (empty or unset: auto)."""
    value = os.environ.get(ENV, "").strip().lower() or "auto"
    if value not in CHOICES:
        raise UserError(f"{ENV} must be one of {', '.join(CHOICES)}, got {shorten(os.environ.get(ENV, ''))}.")
    return value


def applies(model, attentions: bool = False) -> bool:
    """Whether this model's encode can run on ONNX Runtime at all (see the module's docstring)."""
    if choice() == "torch":  # read first: a bad value is reported whatever the model
        return False
    from transformers import PreTrainedModel  # here: it loads torch._dynamo, 4 s of a CLI `quick` call

    hf = getattr(model[0], "auto_model", None)
    return not attentions and model.device.type == "cpu" and isinstance(hf, PreTrainedModel)


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Masked mean of (b, s, h) hidden states over the tokens: a layer's point on the layer-wise curves."""
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)


class _Encoder(torch.nn.Module):
    """What the encode graph computes: the last hidden state and every layer's masked mean (0 = embeddings)."""

    def __init__(self, hf: torch.nn.Module, names: Sequence[str]) -> None:
        super().__init__()
        self.hf, self.names = hf, list(names)

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = dict(zip(self.names, inputs))
        out = self.hf(**features, output_hidden_states=True, return_dict=True)
        mask = features["attention_mask"]
        return out.last_hidden_state, torch.stack([mean_pool(h, mask) for h in out.hidden_states])


class _Below(torch.nn.Module):
    """What a frozen-layers graph computes: the hidden state entering layer `split` (the exporter drops the rest)."""

    def __init__(self, hf: torch.nn.Module, names: Sequence[str], split: int) -> None:
        super().__init__()
        self.hf, self.names, self.split = hf, list(names), split

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        out = self.hf(**dict(zip(self.names, inputs)), output_hidden_states=True, return_dict=True)
        return out.hidden_states[self.split]


@dataclass
class Graph:
    """One exported graph: its file, the tokenizer outputs it takes, in order, and the names of its outputs."""

    path: Path
    inputs: list[str]
    outputs: list[str]

    def runner(self) -> Run:
        """A function giving the graph's outputs for one tokenized batch, on a session sized now to the cores free
        (asked once per encode: sampling them takes 0.1 s)."""
        allowed = torch.get_num_threads()  # never more: a Ray task, a DDP rank or OMP_NUM_THREADS may have set fewer
        threads = min(allowed, free_cores()) if allowed > 1 else 1
        session = _session(self.path, threads, spin=threads > 1 and threads >= usable_cores())

        def run(features: Mapping[str, torch.Tensor]) -> list[np.ndarray]:
            feed = {name: features[name].cpu().numpy().astype(np.int64) for name in self.inputs}
            return session.run(self.outputs, feed)

        return run


_sessions: dict[tuple[str, int, bool], object] = {}
_sessions_lock = threading.Lock()


def _session(path: Path, threads: int, spin: bool):
    """An ONNX Runtime session for the graph at `path` on `threads` threads, made once and kept (KEPT_SESSIONS).
    Waiting threads spin only with every core free: on an idle machine spinning saves each operation a wake-up, but
    beside other work a spinning thread takes a core the others need (2,000 SST-2 texts at load 2.5: 5.1-6.2 s
    sleeping, 13.7-14.0 s spinning)."""
    key = (str(path), threads, spin)
    with _sessions_lock:
        found = _sessions.pop(key, None)
        if found is None:
            import onnxruntime as ort  # here: the CLI's quick commands never load it

            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
            options.log_severity_level = 3
            found = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        _sessions[key] = found  # re-inserted: the most recently used is last
        while len(_sessions) > KEPT_SESSIONS:
            _sessions.pop(next(iter(_sessions)))
        return found


def _input_names(model) -> list[str]:
    """The tokenizer outputs the transformer takes (token_type_ids only for models that have them)."""
    probe = model.preprocess(["a"])
    return [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in probe]


def _export(module: torch.nn.Module, model, names: list[str], outputs: list[str], path: Path) -> None:
    """Trace `module` on a two-text batch, batch and sequence axes left free, into `path` (atomically)."""
    example = model.preprocess(["an example sentence to trace the graph with", "a shorter one"])
    args = tuple(example[name].to(model.device) for name in names)
    axes = {name: {0: "batch", 1: "tokens"} for name in names}
    hf = model[0].auto_model
    previous = hf.config._attn_implementation
    hf.set_attn_implementation("eager")  # sdpa's masking does not trace with free axes
    was_training = hf.training
    hf.eval()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on shapes it records as constants
            write_atomic(path, lambda tmp: torch.onnx.export(
                module, args, str(tmp), input_names=names, output_names=outputs, dynamic_axes=axes,
                opset_version=OPSET, dynamo=False))
    finally:
        hf.set_attn_implementation(previous)
        hf.train(was_training)


def _graph(model, fingerprint: str, purpose: str, module: torch.nn.Module, outputs: list[str],
           verify: Verify) -> Graph | None:
    """The graph `purpose` for this model's weights: exported and checked on first use (again if a usable graph was
    pruned since), None where it is unusable."""
    names = _input_names(model)
    path = cache_dir("onnx") / f"{fingerprint}-{purpose}.onnx"
    verdict_path = path.with_suffix(".json")
    graph = Graph(path, names, outputs)
    verdict = _read_verdict(verdict_path)
    if verdict is None or (verdict["usable"] and not path.exists()):
        try:
            _export(module, model, names, outputs, path)
            difference = float(verify(graph))
            verdict = {"usable": bool(difference <= TOLERANCE), "max_difference": difference}
        except Exception as exc:  # noqa: BLE001 - any exporter or runtime failure means: encode with torch
            verdict = {"usable": False, "error": shorten(f"{type(exc).__name__}: {exc}", 300)}
        write_atomic(verdict_path, lambda tmp: tmp.write_text(json.dumps(verdict)))
        if not verdict["usable"]:
            path.unlink(missing_ok=True)
            reason = verdict.get("error") or f"its outputs differ from torch's by {verdict['max_difference']:.2g}"
            _log.warning("Encoding %s with torch: its ONNX graph (%s) is not used, %s.", fingerprint, purpose,
                         reason)
        _prune(path)
    if not (verdict["usable"] and path.exists()):
        return None
    os.utime(path)  # recently used: pruned last
    return graph


def _prune(keep: Path) -> None:
    """Delete all but the KEPT_GRAPHS most recently used graphs (each trained model exports its own, ~90 MB for
    MiniLM); a pruned graph's verdict stays, and the graph is exported again if its model encodes again."""
    def used(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:  # pruned by another process meanwhile
            return 0.0

    for old in sorted(keep.parent.glob("*.onnx"), key=used)[:-KEPT_GRAPHS]:
        if old != keep:
            old.unlink(missing_ok=True)


def _read_verdict(path: Path) -> dict | None:
    try:
        verdict = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return verdict if isinstance(verdict, dict) and isinstance(verdict.get("usable"), bool) else None


def _wanted(fingerprint: str | None, purpose: str, texts: int) -> bool:
    """Whether an encode of `texts` texts should use (and so, the first time, export) this graph. A short encode
    whose caller has no fingerprint at hand stays on torch: fingerprinting the weights costs more than it saves."""
    if choice() == "onnx" or texts >= MIN_TEXTS:
        return True
    return fingerprint is not None and _read_verdict(cache_dir("onnx") / f"{fingerprint}-{purpose}.json") is not None


def _idle_for_auto() -> bool:
    """Under `auto`, whether every core is free as a pass starts: torch then runs the pass, as fast or faster (the
    note at MIN_TEXTS; the quick point's frozen layers for 10,872 SST-2 texts: 18.9 s in torch, 23.4 s with the
    graph's export)."""
    return choice() == "auto" and free_cores() >= usable_cores()


def encoder_graph(model, fingerprint: str | None, texts: int, verify: Verify) -> Graph | None:
    """The graph giving (last hidden state, every layer's mean) for an encode of `texts` texts, or None: torch
    (also on an idle machine under `auto`)."""
    if not applies(model) or not _wanted(fingerprint, "encode", texts) or _idle_for_auto():
        return None
    return _graph(model, fingerprint or model_fingerprint(model), "encode",
                  _Encoder(model[0].auto_model, _input_names(model)), ["token_embeddings", "layer_means"], verify)


def below_graph(model, fingerprint: str, split: int, texts: int, verify: Verify) -> Graph | None:
    """The graph giving the hidden state entering layer `split` for `texts` texts, or None: torch (also on an idle
    machine under `auto`)."""
    purpose = f"below-{split}"
    if not applies(model) or not _wanted(fingerprint, purpose, texts) or _idle_for_auto():
        return None
    return _graph(model, fingerprint, purpose, _Below(model[0].auto_model, _input_names(model), split), ["hidden"],
                  verify)
