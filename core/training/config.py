"""A run's configuration: the general settings (corpus, models, budget, freezing, pooling, precision,
evaluation, device) and the chosen recipe's own, described once as Params and validated in one place for the
CLI, the Train page, config files and sweeps. Saved flat ({"corpus": ..., "recipe": "triplet", "margin": 0.1,
...}) as YAML / JSON next to every run."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from core.errors import UserError, shorten
from core.evaluation.headline import DISCOUNTS, HEADLINE, is_number
from core.models.loading import DEFAULT_MODEL, check_device, layer_count
from core.storage import ASSETS, corpora_dir
from core.training.params import Param
from core.training.raoe import TEACHER_WORDS
from core.training.recipe import Recipe
from core.training.recipes import get_recipe, recipe_params

if TYPE_CHECKING:  # reading a table's content needs pandas and scikit-learn, which the CLI's start-up does without
    from core.data.content import Content

POOLINGS = ("model", "mean", "cls", "max", "ata")
PRECISIONS = ("auto", "fp32", "fp16", "bf16")
LIST_SHAPES = {  # which rows of a list file have a known order (docs/definitions.md, ListMLE post-training)
    "chain": "Each member is more related to the next one than to any later one, so every member is an anchor "
             "whose members from it onward are in order (the paper's ranking sentences).",
    "star": "Only the first member's row is ordered: the others are ranked by relatedness to it, not to each "
            "other, so it is the one anchor (like NLI lists: premise, entailment, neutral, contradiction).",
}
MAX_NPROC = 64  # processes per node: more GPUs than any one machine holds
MAX_NNODES = 1024
TRACKERS = ("tensorboard", "mlflow")  # what report_to may name (core.runs.trackers sends runs to them)
SELECT_POINTS = 5  # select_every 0: checkpoints scored over a run after step 0, the last step's included

def checked_report_to(text: str) -> str:
    """A report_to setting normalised ('TensorBoard, mlflow' -> 'tensorboard,mlflow'), or a one-line UserError."""
    names = [name.strip().lower() for name in text.split(",")]
    if names == ["none"]:
        return "none"
    if "none" in names:
        raise UserError(f"report_to gives none beside trackers ({shorten(text)}); give none alone, or the trackers.")
    unknown = [name for name in names if name not in TRACKERS]
    if unknown:
        what = "an empty name" if "" in unknown else f"{shorten(unknown[0])}, which ContrastLab does not report to"
        raise UserError(f"report_to names {what}; use none, or a comma list of {', '.join(TRACKERS)}.")
    twice = next((name for name in names if names.count(name) > 1), None)
    if twice:
        raise UserError(f"report_to names {twice} twice; name each tracker once.")
    return ",".join(name for name in TRACKERS if name in names)


GENERAL: tuple[Param, ...] = (
    Param("corpus", str, None, "Corpus", "CSV / TSV / JSONL / Parquet file with a text and a label column."),
    Param("text_col", str, None, "Text column", "Detected when not given.", optional=True),
    Param("label_col", str, None, "Label column", "Detected when not given.", optional=True),
    Param("split_col", str, None, "Split column", "Detected when not given.", optional=True),
    Param("text1_col", str, None, "First text column", "A pair corpus's first text; detected when not given.",
          optional=True),
    Param("text2_col", str, None, "Second text column", "A pair corpus's second text; detected when not given.",
          optional=True),
    Param("score_col", str, None, "Score column", "A pair corpus's gold score; detected when not given.",
          optional=True),
    Param("list_col", str, None, "List id column", "A list corpus's list id; detected when not given.",
          optional=True),
    Param("rank_col", str, None, "Rank column", "A list corpus's rank within a list; detected when not given.",
          optional=True),
    Param("drop_duplicates", bool, False, "Drop duplicate texts", "Keep only the first row of each text a labelled "
          "corpus repeats, as the Corpus page's box does."),
    Param("drop_leaked", bool, False, "Drop leaked test texts", "Drop from the test split the items that are also "
          "training items (ignoring case, spacing and accents, as an uncased model reads them): of a labelled "
          "corpus its texts; of a pair corpus the pairs of the same two texts in either order, not the pairs that "
          "only share one text with a training pair "
          "(counted in a warning: dropping those could empty an STS test split); of a list corpus the lists with "
          "the same anchor and members in any order, not those that only share the anchor."),
    Param("list_shape", str, "chain", "List shape", "What a list file's order states: 'chain' (every member an "
          "anchor over the members after it) or 'star' (the first member the one anchor). Lists built from NLI pairs "
          "or a labelled corpus are always star lists.", choices=tuple(LIST_SHAPES)),
    Param("model", str, DEFAULT_MODEL, "Model", "Local directory, packaged name or hub id."),
    Param("reference", str, None, "Reference model", "Frozen model for mining and S@k (default: the base model).",
          optional=True),
    Param("recipe", str, "triplet", "Recipe", "The training objective (core.training.recipes)."),
    Param("examples", int, 2000, "Examples (N)", "Subsampled deterministically (seed) from all mined examples.",
          low=1, high=1_000_000, step=500),
    Param("epochs", float, 1.0, "Epochs", "Passes over the examples.", low=0.0, low_open=True, high=100.0, step=0.5),
    Param("max_steps", int, 0, "Max steps (0 = all)", "Stop after this many batches, e.g. to compare crops by "
          "batch count.", low=0, high=10**7),
    Param("batch_size", int, 32, "Batch size", "Examples per optimiser step (two or more, except a list recipe's).",
          low=1, high=4096),
    Param("lr", float, 3e-5, "Learning rate", "Peak learning rate after warm-up.", low=0.0, low_open=True, high=1.0,
          step=1e-5, widget={"format": "%.1e"}),
    Param("warmup_ratio", float, 0.1, "Warm-up ratio", "Share of the steps spent warming up the learning rate.",
          low=0.0, high=1.0, high_open=True, step=0.05),
    Param("seed", int, 0, "Seed", "Seeds the subsample, the data order and the initialisation.", low=0,
          high=2**31 - 1),
    Param("freeze_embeddings", bool, False, "Freeze embeddings", "Keep the token embedding layer fixed."),
    Param("freeze_layers", int, 0, "Freeze first n layers", "Keep the first n transformer layers fixed.", low=0,
          high=100),
    Param("top_layers", int, 0, "Train top n layers only (0 = all)", "Freeze everything below the top n "
          "transformer layers and train those from their cached input: several times faster, close to full "
          "fine-tuning; the quick margin point uses 2 (see docs/definitions.md, Quick margin point).", low=0,
          high=100),
    Param("pooling", str, "model", "Pooling", "'model' keeps the model's own pooling; 'ata' is anchor-token-aware "
          "pooling (see docs/definitions.md, ATA pooling).", choices=POOLINGS),
    Param("precision", str, "auto", "Precision", "fp16 / bf16 apply on a CUDA GPU only.", choices=PRECISIONS),
    Param("eval_every", int, 0, "Evaluate every n steps (0 = off)", "P@k, S@k and kNN during training: the "
          "evaluation curve. Each evaluation encodes the test and pool texts; the last step's point is the evaluation "
          "after training.", low=0, high=10**6),
    Param("eval_k", int, 16, "k", "Retrieval depth of P@k / S@k.", low=1, high=1000),
    Param("trade_off_only", bool, False, "Score P@k and S@k only", "Evaluate a labelled corpus by P@k and S@k alone, "
          "without kNN and linear-probe accuracy: the model then encodes the test texts and the P@k source pool, not "
          "the kNN reference set of up to 10,000 training texts as well (for 872 test texts and 20,000 training texts: "
          "5,232 texts instead of 10,872). The quick margin point does so."),
    Param("discount", str, "linear", "Rank discount", "How P@k / S@k weight the k neighbours: linear (seed 000's "
          "text) or none, each 1/k (its released code's default); see docs/definitions.md, P@k and S@k.",
          choices=DISCOUNTS),
    Param("sts_corpus", str, None, "STS corpus", "A pair corpus (text1, text2, score) whose STS Spearman is reported "
          "before and after as well, e.g. what a labelled run did to general similarity.", optional=True),
    Param("select_split", str, None, "Pick the checkpoint on split", "A split of the STS corpus (e.g. validation) on "
          "whose STS Spearman the run keeps its best checkpoint, step 0 (the model before training) included; the "
          "evaluation after training, the saved model and its card describe that checkpoint. Never the split the STS "
          "corpus reports (test). Unset: the last step is kept.", optional=True,
          check=lambda value: value.strip().lower()),
    Param("select_every", int, 0, "Score a checkpoint every n steps (0 = auto)", "How often select_split scores the "
          f"model while it trains, besides step 0 and the last step; 0: {SELECT_POINTS} times over the run.", low=0,
          high=10**6),
    Param("card_examples", bool, False, "Training texts in the model card", "Keep sentence-transformers' examples in "
          "the saved model's card: texts from the training data in its widget, usage snippet and samples table. Off, "
          "the card quotes no training or test text, so it can be shared without the data."),
    Param("report_to", str, "none", "Report to", "Also send the run to experiment trackers: none, or a comma list of "
          "tensorboard and mlflow (settings, loss curve, evaluations before and after with their 95% intervals, "
          "tags). TensorBoard writes under <home>/tensorboard/<run label>-<run id>; MLflow uses MLFLOW_TRACKING_URI "
          "when set, else <home>/mlflow.db.", check=checked_report_to),
    Param("device", str, None, "Device", "cuda, mps or cpu (default: best available).", optional=True,
          check=check_device),
    Param("nproc", int, 1, "Processes per node", "Train with this many processes per machine under PyTorch DDP "
          "(torchrun), one GPU each where there are GPUs; each trains on batch_size examples per step, so a step "
          "sees batch_size x nproc x nnodes examples.", low=1, high=MAX_NPROC, step=1),
    Param("nnodes", int, 1, "Nodes", "Machines the run trains on, each with nproc processes; more than one needs "
          "the rendezvous flags (--master-addr, --node-rank) of `python -m core train`.", low=1, high=MAX_NNODES,
          step=1),
)
GENERAL_PARAMS: dict[str, Param] = {p.name: p for p in GENERAL}


def nproc_choice(gpus: int) -> Param | None:
    """The Train page's process count on a machine showing `gpus` CUDA devices (core.models.loading.
    visible_gpus): the nproc setting, one process per GPU at most; None with fewer than two, where a run trains in
    one process."""
    if gpus < 2:
        return None
    return dataclasses.replace(GENERAL_PARAMS["nproc"], label="Processes (GPUs)", high=min(gpus, MAX_NPROC),
                               help=f"Train over this many processes, one GPU each (PyTorch DDP); each trains "
                                    f"batch_size examples a step. This machine shows {gpus} GPUs.")


def general_default(name: str, recipe: Recipe) -> object:
    """A general setting's default for this recipe (self-supervised recipes train with their own budget)."""
    return recipe.budget.get(name, GENERAL_PARAMS[name].default)


def for_recipe(data: dict, recipe: str) -> dict:
    """The settings of `data` that apply to `recipe`: the general ones and the recipe's own (for a sweep over
    recipes, or a config file whose recipe is overridden)."""
    own = {p.name for p in get_recipe(recipe).params}
    return {k: v for k, v in data.items() if k in GENERAL_PARAMS or k in own} | {"recipe": recipe}


def _checked(data: dict) -> dict:
    """Every setting parsed, defaults filled in, or a one-line UserError."""
    recipe = get_recipe(GENERAL_PARAMS["recipe"].parse(data.get("recipe", "triplet")))
    others = recipe_params()
    unknown = sorted(set(data) - set(GENERAL_PARAMS) - set(others))
    if unknown:
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise UserError(f"Unknown config keys: {', '.join(map(shorten, unknown[:5]))}{more}.")
    own = {p.name: p for p in recipe.params}
    data = dict(data)
    for key in [k for k in data if k not in GENERAL_PARAMS]:
        # Configs saved before held every recipe's settings, None meaning "the recipe's default": drop those.
        legacy = data[key] is None or (key not in own and any(data[key] == p.default for _r, p in others[key]))
        if legacy:
            del data[key]
        elif key not in own:
            raise UserError(f"{key} is not a setting of {recipe.name} (its settings: "
                            f"{', '.join(own) or 'none'}).")
    if data.get("corpus") is None:
        raise UserError("The config needs a 'corpus' path; add one, or give the corpus file on the command line: "
                        "python -m core train PATH --config FILE.")
    checked = {p.name: p.parse(data.get(p.name, general_default(p.name, recipe))) for p in GENERAL}
    checked["recipe"] = recipe.name
    checked["reference"] = checked["reference"] or checked["model"]  # stored resolved: see resolved()
    if checked["batch_size"] < recipe.min_batch_size:
        raise UserError(f"batch_size must be at least {recipe.min_batch_size} for {recipe.name}, whose loss compares "
                        f"the examples of a batch with each other; got {checked['batch_size']}.")
    _check_frozen(checked["freeze_layers"], checked["top_layers"], checked["model"])
    _check_selection(checked)
    _check_world(checked)
    return checked | {p.name: p.parse(data.get(p.name, p.default)) for p in recipe.params}


def _check_frozen(first_layers: int, top_layers: int, model: str) -> None:
    """Freezing more layers than the model has (or training more top layers than it has) is refused here, from the
    model's config, not by the worker after minutes of loading and mining."""
    if first_layers and top_layers:
        raise UserError(f"Set freeze_layers ({first_layers}) or top_layers ({top_layers}), not both: top_layers "
                        "freezes every layer below the top ones itself.")
    layers = layer_count(model) if first_layers or top_layers else None
    if layers is not None and first_layers > layers:
        raise UserError(f"freeze_layers must be at most {layers}, the number of layers of model {shorten(model, 80)}, "
                        f"got {first_layers}")
    if layers is not None and top_layers > layers:
        raise UserError(f"top_layers must be at most {layers}, the number of layers of model {shorten(model, 80)}, "
                        f"got {top_layers}")


def _check_selection(checked: dict) -> None:
    """Checkpoint selection scores a split of the STS corpus other than the one the run reports (core.training.
    selection). What needs no file is refused here; the splits the file has are checked when the run starts."""
    split, every = checked["select_split"], checked["select_every"]
    if split is None:
        if every:
            raise UserError(f"select_every ({every}) says how often select_split scores a checkpoint; set select_split "
                            "too (e.g. validation), or select_every to 0.")
        return
    if not checked["sts_corpus"]:
        raise UserError(f"select_split ({shorten(split)}) names a split of the STS corpus to pick the checkpoint on; "
                        "set sts_corpus to a pair file with that split (e.g. stsb.csv), or leave select_split unset.")
    if split == "test":
        raise UserError("select_split cannot be test: the run reports STS Spearman on the STS corpus's test pairs, and "
                        "picking the checkpoint on them would make that figure optimistic; name another split of it "
                        "(such as validation).")


def _check_world(checked: dict) -> None:
    """A run over several processes (DDP) trains every layer on its own device per process: top_layers trains from
    frozen states cached by one process, and a device naming one GPU (cuda:N) or an Apple GPU cannot be given to
    each process."""
    world = checked["nproc"] * checked["nnodes"]
    if world == 1:
        return
    if checked["top_layers"]:
        raise UserError(f"top_layers ({checked['top_layers']}) trains in one process from cached frozen states; set "
                        f"it to 0 to train over {world} processes, or nproc and nnodes to 1.")
    device = checked["device"]
    if device is not None and device not in ("auto", "cpu", "cuda"):
        raise UserError(f"device {device} names one device, but a run over {world} processes gives each process its "
                        "own (cuda:0, cuda:1, ... or the CPU); set device to cuda or cpu, or leave it unset.")


# --- files by name and content: a config that travels --------------------------------------------------------

SHA256 = re.compile(r"[0-9a-fA-F]{64}")
HEX = re.compile(r"[0-9a-f]+")
ENTRY_KEYS = ("name", "content", "rows", "columns", "rowset", "sha256")  # sha256: older exports named a file by its
# bytes; rowset: the rows as a multiset, so another order of the same rows is told apart (not in older exports)
CONTENT_KEYS = ("content", "rows", "columns")


def file_settings() -> tuple[str, ...]:
    """The settings that name a table file: the corpus, the STS corpus and a recipe's own (the crop recipes'
    documents)."""
    own = [name for name, owners in recipe_params().items() if any(param.file for _r, param in owners)]
    return ("corpus", "sts_corpus", *own)


def checkpoint_text(selection: dict, steps: object, sts_corpus: str | None,
                    code: Callable[[str], str] = str) -> str:
    """Which checkpoint a run that picked one on a split of its STS corpus saved, and why, in one clause (a result's
    "selection", core.training.selection; `code` formats the file's name): the model card, the CLI and the Train
    page say it, and that step 0 means the saved model is the base model."""
    sts = next(metric for metric in HEADLINE if metric.key == "sts_spearman")
    where = f"the {selection['split']} split of {code(Path(sts_corpus or '?').name)}"
    points, best = selection["points"], selection["best_step"]
    every = "every step" if selection["every"] == 1 else f"every {selection['every']} steps"
    how = f"{len(points)} checkpoints scored: step 0, {every} and the last"
    if best is None:
        return f"the last step, {steps}: no checkpoint had an STS Spearman on {where} ({how})"
    value = sts.text(selection["best"])
    if best == 0:
        later = [p for p in points if p["step"] > 0 and is_number(p["sts_spearman"])]
        rival = max(later, key=lambda p: p["sts_spearman"], default=None)  # max keeps the earliest of equals
        beaten = f"; the best later one, step {rival['step']}, {sts.text(rival['sts_spearman'])}" if rival else ""
        return (f"step 0 of {steps}, the model before training: no later checkpoint beat its STS Spearman on {where} "
                f"({value}{beaten}; {how}), so the saved model has the base model's weights")
    start = sts.shown_text(points[0]["sts_spearman"])
    return (f"step {best} of {steps}{' (the last)' if best == steps else ''}, the best STS Spearman on {where} "
            f"({value}; step 0, the model before training, {start}; {how})")


def absolute_path(value: str) -> str:
    """`value` made absolute where it names a file or folder from this process's folder, else as it is (a packaged
    model's name, a hub id, a file that is missing, which the checks then name as the user gave it)."""
    path = Path(value).expanduser()
    return os.path.abspath(path) if value and path.exists() else value


def absolute_paths(config: dict) -> dict:
    """The config with every path it gives (its files, model, reference and teacher folders) made absolute from this
    process's folder: a run executes in a worker whose folder is the repository's, where 'emotion tweets.csv' or
    'models/mpnet', given from the folder that holds them, name nothing."""
    out = dict(config)
    for name in (*file_settings(), "model", "reference"):
        if isinstance(out.get(name), str):
            out[name] = absolute_path(out[name])
    teacher = out.get("teacher")
    if isinstance(teacher, str) and teacher:
        whole = absolute_path(teacher)  # a folder whose name holds a comma, else each of a comma list
        out["teacher"] = whole if whole != teacher else ",".join(
            name if name in TEACHER_WORDS else absolute_path(name) for name in teacher.split(","))
    return out


# The settings that name a corpus file's columns, one per role of each corpus kind (core.data.kinds: their `roles`);
# every command that reads a corpus takes them as flags (--text1-col, ...).
COLUMN_SETTINGS = ("text_col", "label_col", "split_col", "text1_col", "text2_col", "score_col", "list_col", "rank_col")


def corpus_options(config: dict) -> dict:
    """core.data.kinds.load_any's arguments from a run config: which columns of its corpus file it reads and how;
    one home, so the run, its CLI checks and its export read the same corpus."""
    names = (*COLUMN_SETTINGS, "drop_duplicates", "drop_leaked", "list_shape")
    return {name: config.get(name, GENERAL_PARAMS[name].default) for name in names}


def file_sha256(path: str | Path) -> str:
    """The SHA-256 of a file's bytes, as `sha256sum` prints it (the checksum older exports name a file by)."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_entry(path: str | Path, name: str | None = None) -> dict:
    """A file as a portable config names it: {name, content, rows, columns} (core.data.content: what a run reads,
    the same for a CSV and its Parquet copy). `name`: the name the user gave the file (an upload's), else the file's
    own. Only the name when the file cannot be read any more (a corpus deleted since the run)."""
    from core.data.content import Content  # reads tables (pandas, scikit-learn): not at the CLI's start-up

    path = Path(path)
    name = name or path.name
    try:
        return {"name": name, **Content.of_file(path).entry()}
    except UserError:
        return {"name": name}


def portable(config: dict, names: dict[str, str] | None = None) -> dict:
    """A run config as an export writes it: each file setting named by its name and content instead of by where
    this machine keeps it (often the app's copy of an upload inside CONTRASTLAB_HOME), so it can be shared and
    trains on another machine, where TrainConfig.from_file finds the file again or asks for it. `names`: the file
    name the user gave a setting's file ({"corpus": "emotion.csv"} for an upload), where it is not the file's own."""
    files, names = file_settings(), names or {}
    return {key: file_entry(value, names.get(key)) if key in files and isinstance(value, str) and value else value
            for key, value in config.items()}


def _entry(key: str, value: object) -> tuple[str, Content | None, str | None]:
    """(file name, content or None, older exports' sha256 or None) of a file setting given as a mapping, or a
    one-line UserError."""
    if not isinstance(value, dict) or "name" not in value or set(value) - set(ENTRY_KEYS):
        raise UserError(f"{key} must be a file path or a mapping {{name: FILE, content: HEX, rows: N, columns: "
                        f"{{COLUMN: HEX}}}}, got {shorten(value)}.")
    name, sha = value["name"], value.get("sha256")
    if (not isinstance(name, str) or not name.strip() or not name.isprintable() or name in (".", "..")
            or name != Path(name).name or "\\" in name):
        raise UserError(f"{key}'s name must be a file name, without folders or control characters, got "
                        f"{shorten(name)}.")
    if sha is not None and not (isinstance(sha, str) and SHA256.fullmatch(sha)):
        raise UserError(f"{key}'s sha256 must be 64 hexadecimal digits, got {shorten(sha)}.")
    return name, _content(key, value), sha.lower() if sha else None


def _content(key: str, value: dict) -> Content | None:
    """The content an entry names, checked: all three of content, rows and columns, or none."""
    from core.data.content import COLUMN_DIGITS, Content

    given = [k for k in CONTENT_KEYS if k in value]
    if not given:
        return None
    if len(given) < len(CONTENT_KEYS):
        raise UserError(f"{key} names its content by {', '.join(CONTENT_KEYS)} together; it gives only "
                        f"{', '.join(given)}.")
    rows, columns = value["rows"], value["columns"]
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        raise UserError(f"{key}'s rows must be a whole number of rows, got {shorten(rows)}.")
    if (not isinstance(columns, dict) or not columns
            or not all(isinstance(c, str) and isinstance(d, str) and len(d) == COLUMN_DIGITS and HEX.fullmatch(d)
                       for c, d in columns.items())):
        raise UserError(f"{key}'s columns must map each column name to its {COLUMN_DIGITS}-digit fingerprint, got "
                        f"{shorten(columns)}.")
    rowset = value.get("rowset")
    if rowset is not None and not (isinstance(rowset, str) and len(rowset) == COLUMN_DIGITS and HEX.fullmatch(rowset)):
        raise UserError(f"{key}'s rowset must be a {COLUMN_DIGITS}-digit fingerprint, got {shorten(rowset)}.")
    content = Content(rows, dict(columns), rowset)
    if not (isinstance(value["content"], str) and value["content"].lower() == content.fingerprint):
        raise UserError(f"{key}'s content {shorten(value['content'])} is not the fingerprint of its rows and "
                        f"columns ({content.fingerprint}); the entry was edited, so it cannot say which file it names.")
    return content


def _difference(path: Path, content: Content | None, sha: str | None, renamed: dict[str, str] | None = None) -> str:
    """What differs between a file and the content (or older exports' sha256) an entry names, in words; '' for
    the same. A file that cannot be read differs (the corpus loader then says why, in its own words). `renamed`:
    Content.of_file's."""
    from core.data.content import Content

    try:
        if content is not None:
            return Content.of_file(path, content.columns, renamed).difference(content)
        got = sha and file_sha256(path)
        return "" if got == sha else f"its sha256 is {got}, not {sha}"
    except (UserError, OSError):
        return "it cannot be read"


def _what_it_changes(differs: str, data: dict, content: Content | None) -> str:
    """Why a difference of order or of swapped columns matters to the run, or that it does not: the same rows in
    another order draw another held-out test set where no split column gives one (named, or found by its name among
    the columns the run read), and other samples by position even where it does; the two texts of every pair swapped
    leave every cosine, and so STS Spearman, as they were."""
    from core.data.content import ORDER_ONLY, SWAPPED
    from core.data.table import SPLIT_NAMES

    if differs == ORDER_ONLY:
        columns = content.columns if content is not None else {}
        if not (data.get("split_col") or any(name.lower() in SPLIT_NAMES for name in columns)):
            return ", and the held-out test set is drawn from the row order, so it is a different draw"
        return (", so the splits are the same, but the samples drawn from the training rows by position (the P@k "
                "source pool, mined examples) are other draws")
    pair = {data.get("text1_col") or "text1", data.get("text2_col") or "text2"}
    if differs.startswith(SWAPPED) and all(f"{column!r}" in differs for column in pair):
        return ": every pair's two texts are swapped, which leaves every cosine and STS Spearman as they were"
    return ""


def _renamed(data: dict, given: dict) -> dict[str, str]:
    """The corpus columns the command line maps to other columns than the config's run read (--text1-col
    sentence_A where it read 'text1'): {the column the run read: the one given}."""
    return {data[name]: given[name] for name in COLUMN_SETTINGS
            if isinstance(data.get(name), str) and isinstance(given.get(name), str) and given[name] != data[name]}


def _places(config_dir: Path) -> list[Path]:
    """Where a file named only by name is looked for: the current folder, the config's, the home's corpora folder
    (uploads saved by the pages) and ContrastLab's assets (the demo corpora). locate_files also tries the pages' copy
    of an upload, named by its content (core.data.content.persist_table)."""
    places: list[Path] = []
    for folder in (Path.cwd(), config_dir, corpora_dir(), ASSETS):
        if all(folder.resolve() != seen.resolve() for seen in places):
            places.append(folder)
    return places


def _how_to_pass(key: str, config: Path) -> str:
    if key == "corpus":
        return f"pass the file as the corpus argument: python -m core train PATH --config {config}"
    flag = GENERAL_PARAMS[key].flag if key in GENERAL_PARAMS else "--" + key.replace("_", "-")
    return f"pass the file with {flag} PATH"


def locate_files(data: dict, config: Path, given: dict | None = None,
                 warn: Callable[[str], None] | None = None) -> dict:
    """`data` (a config file's settings) with each file named by {name, content, ...} replaced by a path: the one
    the command line gives in `given` (used whatever it holds; other content is reported to `warn`, saying what
    differs), else a file with that content by that name in the current folder, beside `config`, in the home's
    corpora folder or in the assets, or the app's own copy of it. None found: a one-line UserError asking for the
    file. A setting given as a path stays as it is."""
    out = dict(data)
    for key in file_settings():
        value = data.get(key)
        if value is None or isinstance(value, str):
            continue
        name, content, sha = _entry(key, value)
        chosen = (given or {}).get(key)
        if chosen:
            out[key] = str(chosen)
            if warn is not None and Path(chosen).is_file() and (content or sha):
                differs = _difference(Path(chosen), content, sha, _renamed(data, given) if key == "corpus" else None)
                if differs:
                    warn(f"{chosen} is not the {name} that config {config} trained on: {differs}"
                         f"{_what_it_changes(differs, data, content)}; training on it anyway.")
            continue
        candidates = [folder / name for folder in _places(config.parent)]
        if content is not None:
            from core.data.content import saved_copy_path

            candidates.append(saved_copy_path(content.fingerprint))
        found = [path for path in candidates if path.is_file()]
        match = next((path for path in found if not _difference(path, content, sha)), None)
        if match is None:
            named = saved_copy_path(content.fingerprint).stem if content else sha
            held = f" (content {named})" if named else ""
            differs = f"; {found[0]} has that name but {_difference(found[0], content, sha)}" if found else ""
            raise UserError(f"the config trains on {name}{held}, which is not in the current folder, beside the "
                            f"config, in {corpora_dir()} or in the assets{differs}; {_how_to_pass(key, config)}.")
        out[key] = str(match.resolve())
    return out


def resolved(config: dict) -> dict:
    """A stored train config as it trained: defaults filled in and the reference resolved to the model, so a run
    saved before either was stored (or by a path that left them out) compares with today's runs without spurious
    differences. A config that no longer validates (its model gone, a GPU missing) keeps its own keys, with only
    the reference resolved."""
    try:
        return TrainConfig.from_dict(config).to_dict()
    except UserError:
        return {**config, "reference": config.get("reference") or config.get("model")}


class TrainConfig:
    """Everything needed to reproduce a run; valid by construction. Settings read as attributes
    (cfg.batch_size, cfg.margin); a setting the recipe does not have is an AttributeError."""

    def __init__(self, /, **settings: object) -> None:  # positional-only: a setting may be called "self"
        self.__dict__["settings"] = _checked(settings)

    def __getattr__(self, name: str) -> object:
        try:
            return self.__dict__["settings"][name]
        except KeyError:
            raise AttributeError(f"{name} is not a setting of this config") from None

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("TrainConfig is immutable; build a new one with TrainConfig(**{**cfg.to_dict(), ...})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TrainConfig) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"TrainConfig({self.to_dict()!r})"

    @property
    def world_size(self) -> int:
        """Processes the run trains in (nproc x nnodes)."""
        return self.nproc * self.nnodes

    @property
    def effective_batch_size(self) -> int:
        """Examples per optimiser step over all processes: each process trains on its own batch_size examples."""
        return self.batch_size * self.world_size

    @property
    def recipe_settings(self) -> dict:
        """The recipe's own settings (model card, labels)."""
        return {p.name: self.settings[p.name] for p in get_recipe(self.recipe).params}

    def to_dict(self) -> dict:
        return dict(self.settings)

    @classmethod
    def from_dict(cls, data: object) -> TrainConfig:
        """A config from parsed JSON / YAML / widgets, whatever its shape: a list or a key that is not a setting
        name is one UserError, not a TypeError."""
        if not isinstance(data, dict):
            got = "nothing" if data is None else f"a {type(data).__name__}"
            raise UserError(f"settings must be given as a mapping (name: value), got {got}.")
        odd = [k for k in data if not isinstance(k, str)]
        if odd:
            raise UserError(f"setting names must be text, got the key {shorten(odd[0])}.")
        return cls(**data)

    @classmethod
    def from_file(cls, path: str | Path, given: dict | None = None,
                  warn: Callable[[str], None] | None = None) -> TrainConfig:
        """A config file's settings; any problem with it, its syntax included, is one line naming the file. A file
        it names by name and checksum (an export's config.yaml, see portable) is found or taken from `given`
        (the command line's {setting: path}) as locate_files does; `warn` hears of a given file with another
        checksum."""
        import yaml  # only for --config; keeps the CLI's start-up light

        path = Path(path)
        text = None
        try:
            text = path.read_text(encoding="utf-8")
            data = (json.loads(text, object_pairs_hook=_unique_json_keys) if path.suffix == ".json"
                    else yaml.load(text, Loader=_unique_key_loader()))
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise UserError(f"Could not read config {path}: {exc.problem or exc.context}{where}.") from exc
        except (OSError, ValueError, RecursionError, yaml.YAMLError) as exc:
            if text is not None and not text.strip():  # JSON's "Expecting value" for an empty file
                raise UserError(f"Config {path} is empty; it should hold a run's settings (name: value), as the "
                                "config.yaml of an export does.") from exc
            raise UserError(f"Could not read config {path}: {' '.join(str(exc).split()) or type(exc).__name__}."
                            ) from exc
        if data is None and not text.strip():  # YAML reads an empty file as null
            raise UserError(f"Config {path} is empty; it should hold a run's settings (name: value), as the "
                            "config.yaml of an export does.")
        try:
            if isinstance(data, dict):
                data = locate_files(data, path, given, warn)
                if data.get("corpus") is None and (given or {}).get("corpus"):  # a config of settings alone
                    data = {**data, "corpus": given["corpus"]}
            return cls.from_dict(data)
        except UserError as exc:
            raise UserError(f"Config {path}: {exc}") from exc


def _unique_json_keys(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object whose keys are all different: a key given twice would silently keep its last value."""
    found: dict = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"the key {shorten(key)} is given twice")
        found[key] = value
    return found


def _unique_key_loader():
    """PyYAML's safe loader refusing a mapping that gives a key twice (it would keep the last value in silence)."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                seen: set = set()
                for key_node, _value in node.value:  # the mapping's own keys: a merged (<<) key may be overridden
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=deep)
                    try:
                        repeated = key in seen
                    except TypeError:  # an unhashable key: the library's own error says so below
                        break
                    if repeated:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"the key {shorten(str(key))} is given twice", key_node.start_mark)
                    seen.add(key)
            return super().construct_mapping(node, deep)

    return UniqueKeyLoader
