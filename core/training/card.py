"""The saved model's card: sentence-transformers' own card, filled in with what the run knows (its name, the corpus
as the training dataset's name, tags) and led by what a reader needs to judge and reproduce the run: base model,
corpus and its train/test leakage, recipe and settings, the headline metrics before and after with their 95%
intervals, the per-class results, and how to load the model.

Why lead with it: sentence-transformers' card is mostly generic (architecture, every trainer argument, widget
examples); ContrastLab's summary appended at its end sat ~450 lines down, below a dataset called "Unknown".

The card quotes no text of the corpus unless the run asks for it (card_examples): sentence-transformers puts
training texts in its widget, its usage snippet and a samples table, so a card shared without the data would leak
it.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from huggingface_hub.repocard import REGEX_YAML_BLOCK

from core.data.content import given_file_name
from core.data.corpus import CLASSES_SHOWN
from core.data.kinds import kind_of
from core.data.provenance import generation_text
from core.evaluation.headline import HEADLINE, Metric, is_number
from core.evaluation.paired import FEW_ITEMS, MIN_ITEMS, change_texts
from core.models.ata import ATAPooling
from core.training.config import TrainConfig, checkpoint_text
from core.training.eta import fmt_seconds
from core.training.raoe import PAPER_BATCH, self_taught, teacher_names
from core.training.recipe import MINING
from core.training.recipes import get_recipe

CONFIG_FILE = "config.yaml"  # the config an export writes beside the card (core.runs.export), named in the card
# How each headline figure's 95% interval is computed (core.evaluation.uncertainty), said under the card's table.
_BOOTSTRAP, _WILSON = "P@k and S@k: bootstrap over the target texts", "accuracies: Wilson"
INTERVAL_METHODS = {"polarity": _BOOTSTRAP, "similarity": _BOOTSTRAP, "knn_accuracy": _WILSON,
                    "linear_accuracy": _WILSON, "ordering_accuracy": _WILSON, "sts_spearman": "STS Spearman: Fisher z",
                    "kendall_tau": "Kendall tau: bootstrap over the lists"}


def save_with_card(model, path: Path, cfg: TrainConfig, result: dict) -> None:
    """Save `model` as a sentence-transformers directory whose README leads with the run (`result` as
    core.training.trainer.run_training returns it). Only README.md differs from a plain `model.save(path)`."""
    fill_card_data(model.model_card_data, cfg, result)
    model.save(str(path))
    readme = path / "README.md"
    card = trimmed(local_snippet(readme.read_text(encoding="utf-8")), cfg.card_examples) if readme.exists() else ""
    ata = any(isinstance(module, ATAPooling) for module in model)  # chosen for this run, or the base model's own
    readme.write_text(lead_with(card, contrastlab_card_section(cfg, result, ata)), encoding="utf-8")


HUB_SNIPPET = re.compile(r'# Download from the \U0001f917 Hub\n(\w+) = (\w+)\("sentence_transformers_model_id"\)')
LOCAL_LOAD = '# Load this folder: the model is not on the Hub\n\\1 = \\2("path/to/this/folder")'


def local_snippet(card: str) -> str:
    """sentence-transformers' usage snippet loads a Hub id the model does not have ("sentence_transformers_model_id",
    under "Download from the Hub"); the model is a folder, so the snippet loads the folder."""
    return HUB_SNIPPET.sub(LOCAL_LOAD, card)


PLACEHOLDER = re.compile(r"\n?<!--.*?-->\n?", flags=re.DOTALL)  # the template's commented-out fields


def _without_section(card: str, title: str) -> str:
    """`card` without its level-2 section `title`, up to the next level-2 heading."""
    return re.sub(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", "", card, flags=re.MULTILINE | re.DOTALL)


def trimmed(card: str, examples: bool) -> str:
    """sentence-transformers' card cut to what is true of this model: no commented-out placeholders (language,
    license, glossary), no links to the library's blog posts ("Additional Resources") and, unless the run quotes its
    own examples (card_examples), no usage snippet over the library's stock sentences ("The weather is lovely
    today."): the ContrastLab section says how to load the folder."""
    card = _without_section(PLACEHOLDER.sub("\n", card), "Additional Resources")
    if not examples:
        card = _without_section(card, "Usage")
    return re.sub(r"\n{3,}", "\n\n", card)


def fill_card_data(data, cfg: TrainConfig, result: dict) -> None:
    """What sentence-transformers' card data (SentenceTransformerModelCardData) cannot know: the model's name, the
    training dataset's name (the trainer records only its size, columns and samples, so the card says "Unknown"),
    the base model's Hub id where the run names one, and ContrastLab's tags. Nothing is looked up on the Hub: the
    card is written offline like everything else."""
    data.local_files_only = True  # else saving asks the Hub about every guess at a base model id
    name = _code(corpus_name(cfg, result))  # the template puts names into Markdown as they are
    data.model_name = f"{_code(_model_label(cfg.model))} fine-tuned with ContrastLab on {name}"
    for dataset in data.train_datasets:  # one per training dataset the trainer saw; its statistics stay
        dataset["name"] = name
    if _hub_id(cfg.model) and not data.base_model:
        data.base_model = cfg.model  # links the card to it on the Hub; a local directory has no such id
    data.add_tags(["contrastlab", f"contrastlab-recipe:{cfg.recipe}"])
    train_s = (result.get("timings") or {}).get("train_s")
    if train_s is not None:  # sentence-transformers' clock runs on to the save, the evaluation after training included
        data.get_training_duration_data = lambda: {"training_time": f"{fmt_seconds(train_s)} (the optimiser steps, "
                                                   "as ContrastLab reports them)", "evaluation_time": None,
                                                   "total_time": None}
    if not cfg.card_examples:
        without_examples(data)


def without_examples(data) -> None:
    """Card data that quotes no text of the data: the trainer filled the widget (YAML front matter) and the usage
    snippet's sentences from the training examples, and each dataset's samples table with its first rows; the
    snippet falls back to sentence-transformers' own generic sentences."""
    data.widget = []
    data.usage_examples = None
    data.usage_examples_display = None
    data.label_example_list = []
    for dataset in (*data.train_datasets, *data.eval_datasets):
        for key in ("examples", "examples_table", "_example_columns"):
            dataset.pop(key, None)


def lead_with(card: str, section: str) -> str:
    """`card` with `section` right below its title (after the YAML front matter and the first `# ` heading); on top
    of the body when it has no title."""
    match = REGEX_YAML_BLOCK.search(card)
    front, body = (card[:match.end()], card[match.end():]) if match else ("", card)
    title = re.search(r"^# .*$", body, flags=re.MULTILINE)
    at = title.end() if title else 0
    parts = ((front + body[:at]).rstrip("\n"), section.strip(), body[at:].strip())
    return "\n\n".join(part for part in parts if part) + "\n"


def _at_k(before: dict, after: dict) -> bool:
    """Whether the table shows a figure measured at a depth k (P@k, S@k): only then does its header name k."""
    return any(m.key in before or m.key in after for m in HEADLINE if "{k}" in m.short)


def corpus_name(cfg: TrainConfig, result: dict) -> str:
    """The corpus as the run's result names it (core.data Corpus.summary()), else the file's stem."""
    return str(result.get("corpus", {}).get("name") or Path(cfg.corpus).stem)


def contrastlab_card_section(cfg: TrainConfig, result: dict, ata: bool | None = None) -> str:
    """The run in Markdown: what it started from, trained on and with, what it changed, how to load and reproduce
    it. `ata`: the saved model pools with ATA (default: the run chose ATA pooling; a base model that already pools
    with ATA and keeps its own pooling also needs the ATA loading line)."""
    recipe = get_recipe(cfg.recipe)
    corpus = result.get("corpus", {})
    before, after = result.get("before", {}), result.get("after", {})
    k = after.get("k", cfg.eval_k)
    uniform = after.get("discount", cfg.discount) == "none"  # P@k / S@k's weighting, said where not the default
    kind = kind_of(corpus)
    mined = kind.mined  # a pair or list corpus's own examples: no mining settings to state
    settings = {name: value for name, value in cfg.recipe_settings.items()
                if mined or name not in {p.name for p in MINING}}
    knob = recipe.knob_param
    uses = [use for use, used in (("mining", mined), ("S@k", kind.judged),
                                  ("teacher", settings.get("teacher") == "reference")) if used]
    lines = [
        "## ContrastLab fine-tuning",
        "",
        f"- **Base model:** {_code(cfg.model)}",
        *([f"- **Reference model ({', '.join(uses)}):** {_code(cfg.reference or cfg.model)}"] if uses else []),
        f"- **Corpus:** {_code(corpus_name(cfg, result))}: {_corpus_text(corpus)}",
        *([f"- **Leakage:** {leak}"] if (leak := _leakage_text(corpus)) else []),
        f"- **Recipe:** {recipe.title} (`{cfg.recipe}`)"
        + (f", {knob.phrase} = {settings[knob.name]}" if knob else ""),
    ]
    if "lists" in result:
        lists = result["lists"]
        lines.append(f"- **Lists:** from the {lists['source']}: {_corpus_text(lists)}")
    others = [f"`{name}` = {value}" for name, value in settings.items() if knob is None or name != knob.name]
    if others:
        lines.append(f"- **Recipe settings:** {', '.join(others)}")
    derived = recipe.derived(cfg)
    if derived:
        lines.append(f"- **Derived settings:** {', '.join(f'`{name}` = {value:g}' for name, value in derived.items())}"
                     + (f" (I_eff: the interval I given at the paper's batch of {PAPER_BATCH}, scaled to this run's "
                        "batch per process)" if "interval_eff" in derived else ""))
    if "teacher" in settings:
        lines.append(f"- **Teacher:** {_teacher_text(cfg)}")
    examples = result.get("examples", {})
    lines += [
        f"- **Examples:** {examples.get('examples', '?')} ({examples.get('format', recipe.example_format)})",
        *([f"- **Training file:** {trained_on}"] if (trained_on := _training_file_text(examples)) else []),
        *([f"- **Loss:** {examples['loss']}"] if examples.get("loss") else []),  # a recipe's reduction, if it says
        f"- **Training:** {cfg.epochs} epoch(s), {_batch_text(cfg)}, lr {cfg.lr}, warm-up ratio "
        f"{cfg.warmup_ratio}, seed {cfg.seed}, pooling {cfg.pooling}, frozen: "
        + (f"all but the top {cfg.top_layers} layer(s), trained from the frozen part's cached output"
           if cfg.top_layers else f"{'embeddings + ' if cfg.freeze_embeddings else ''}{cfg.freeze_layers} layer(s)"),
        *([f"- **Checkpoint:** {checkpoint}"] if (checkpoint := _checkpoint_text(cfg, result)) else []),
        "",
        "| metric" + (f" (k = {k}{', no rank discount' if uniform else ''})" if _at_k(before, after) else "")
        + " | before | after | change |",
        "|---|---|---|---|",
    ]
    methods: list[str] = []  # how the intervals shown were computed, each named once
    paired = change_texts(before, after)
    for metric in HEADLINE:
        if metric.key in before or metric.key in after:
            was, now = before.get(metric.key), after.get(metric.key)
            change = paired.get(metric.key) or (metric.change_text(was, now) if is_number(was) and is_number(now)
                                                else "–")
            ci_was, ci_now = _interval_text(metric, before), _interval_text(metric, after)
            method = INTERVAL_METHODS.get(metric.key)
            if (ci_was or ci_now) and method and method not in methods:
                methods.append(method)
            lines.append(f"| {metric.long} | {metric.shown_text(was)}{ci_was} | {metric.shown_text(now)}{ci_now} | "
                         f"{change} |")
    if methods:
        lines += ["", f"In brackets: the 95% interval ({'; '.join(methods)})."]
    if paired:
        lines += ["", "Change: after − before with its 95% interval and two-sided p-value, paired over the same test "
                  "items (bootstrap, 1,000 resamples)."]
    lines += _per_class_lines(before, after)
    ata = cfg.pooling == "ata" if ata is None else ata
    file = shlex.quote(given_file_name(corpus.get("name"), cfg.corpus))
    command = f"python -m core train --config {CONFIG_FILE} --corpus {file}"
    lines += ["", _load_text(ata), "", *_load_code(ata), "",
              f"Reproduce with {_code(command)}: an export of the run (`python -m core export RUN_ID`, or the Runs "
              f"page) writes {CONFIG_FILE} into this folder and beside it, naming the corpus by its file name and "
              "content (rows and a fingerprint of each column read, the same whatever the file's format); another "
              "file is used with a warning that says what differs.", ""]
    return "\n".join(lines)


def _interval_text(metric: Metric, result: dict) -> str:
    """" (75.1–79.3)": a metric's 95% interval in its shown unit where the result carries one; else ""."""
    text = metric.range_text(result)
    return f" ({text})" if text else ""


def _leakage_text(corpus: dict) -> str:
    """The corpus's train/test leakage in words ("3 test texts were also training texts (exact repeats); dropped
    from the test split before evaluating"), from its summary's counts (core.data Corpus.summary(): leaked,
    leaked_dropped); "" for a summary without them (one recorded before they were, a kind that does not count them)."""
    leaked, dropped = corpus.get("leaked"), corpus.get("leaked_dropped") or 0
    if not isinstance(leaked, int) or isinstance(leaked, bool):
        return ""
    unit, target = kind_of(corpus).item, corpus.get("target_split", "test")
    if leaked == 0:
        return f"none: no {target} {unit} is also a training {unit}"
    gone = dropped >= leaked
    verb = ("was" if gone else "is") if leaked == 1 else ("were" if gone else "are")
    text = (f"1 {target} {unit} {verb} also a training {unit}" if leaked == 1
            else f"{leaked:,} {target} {unit}s {verb} also training {unit}s") + " (exact repeats)"
    if gone:
        return text + f"; dropped from the {target} split before evaluating"
    if dropped:
        return text + f"; {dropped:,} of them dropped from the {target} split, the others counted in the figures below"
    return text + "; counted in the figures below, where a model can score them from memory"


def _per_class_lines(before: dict, after: dict) -> list[str]:
    """The per-class results (core.evaluation.per_class) as a table: test texts, P@k and kNN recall before and
    after, for the first CLASSES_SHOWN classes; nothing when neither result has them (a pair or list corpus, a run
    recorded before they were)."""
    rows = {side: {str(row.get("class")): row for row in (result.get("per_class") or {}).get("classes") or []}
            for side, result in (("before", before), ("after", after))}
    classes = list(dict.fromkeys([*rows["after"], *rows["before"]]))
    if not classes:
        return []
    from core.evaluation.per_class import RECALL_CI, SMALL_CLASS, per_class_frame  # sklearn: only for such a card

    k = ((after.get("per_class") or before.get("per_class")) or {}).get("k", "k")
    frame = per_class_frame(before, after) if before.get("per_class") and after.get("per_class") else None
    paired = dict(zip(frame["class"], frame[RECALL_CI])) if frame is not None and RECALL_CI in frame else {}
    lines = ["", f"| class | test texts | P@{k} before | P@{k} after | kNN recall before | kNN recall after |"
             + (" recall change 95% CI, p |" if paired else ""),
             "|---|---|---|---|---|---|" + ("---|" if paired else "")]
    few = False
    for name in classes[:CLASSES_SHOWN]:
        was, now = rows["before"].get(name, {}), rows["after"].get(name, {})
        n = now.get("n", was.get("n"))
        small = isinstance(n, int) and n < SMALL_CLASS
        few = few or small
        cells = [f"{n}{'*' if small else ''}" if isinstance(n, int) else "–",
                 *(f"{row['polarity']:.1f}" if is_number(row.get("polarity")) else "–" for row in (was, now)),
                 *(f"{100 * row['knn_recall']:.1f}%" if is_number(row.get("knn_recall")) else "–"
                   for row in (was, now))]
        if paired:
            cells.append(paired.get(name, "–"))
        lines.append(f"| {_code(name)} | {' | '.join(cells)} |")
    notes = []
    if len(classes) > CLASSES_SHOWN:
        notes.append(f"{len(classes) - CLASSES_SHOWN} more classes are in the run's per-class results (Runs page).")
    if few:
        notes.append(f"*: fewer than {SMALL_CLASS} test texts, so one text moves the class's kNN recall by more "
                     "than 5 points.")
    if paired:
        notes.append(f"A class's recall change is paired over its own test texts, with the whole comparison's floors: "
                     f"no interval below {MIN_ITEMS} of them, rough below {FEW_ITEMS}.")
    return lines + (["", " ".join(notes)] if notes else [])


def _teacher_text(cfg: TrainConfig) -> str:
    """Which model(s) gave the teacher's judgement (RAOE's s, ListMLE's similarities): several are averaged, and
    the model the run starts from is self-distillation."""
    if cfg.teacher == "score":
        return "the pair corpus's own score column (s = the gold score)"
    names = teacher_names(cfg.teacher)
    shown = " and ".join(_code(cfg.reference or cfg.model) + " (the reference model)" if name == "reference"
                         else _code(name) for name in names)
    text = f"the mean cosine of {shown}" if len(names) > 1 else f"the cosine of {shown}"
    same = self_taught(cfg.teacher, cfg.model, cfg.reference)
    return text + (f"; {', '.join(map(_code, same))} is the model this run starts from (self-distillation)"
                   if same else "")


def _training_file_text(examples: dict) -> str:
    """The file a recipe trained on instead of the corpus (a negatives or lists file), with the language model that
    wrote it where its generation record says so."""
    file = examples.get("negatives_file") or examples.get("lists_file")
    if not file:
        return ""
    generated = examples.get("generated")
    return generation_text(generated) if generated else f"{_code(file)}, with no generation record beside it"


def _checkpoint_text(cfg: TrainConfig, result: dict) -> str:
    """Which checkpoint the saved model is and why, in one sentence, for a run that picked it on a split of its STS
    corpus (core.training.selection: the result's "selection"); "" for any other run, which keeps its last step."""
    selection = result.get("selection")
    if not selection:
        return ""
    steps = result.get("steps", selection["points"][-1]["step"] if selection["points"] else "?")
    return (f"{checkpoint_text(selection, steps, cfg.sts_corpus, _code)}; selecting a checkpoint is our assumption, "
            "not part of the recipe's method.")


def _batch_text(cfg: TrainConfig) -> str:
    """The batch a step trains on; over several processes (DDP) each trains its own batch, so a step's effective
    batch is their sum, which is what compares with a single-process run."""
    if cfg.world_size == 1:
        return f"batch {cfg.batch_size}"
    return (f"effective batch {cfg.effective_batch_size} ({cfg.batch_size} per process x {cfg.world_size} processes: "
            f"{cfg.nproc} per node x {cfg.nnodes} node(s), PyTorch DDP)")




def _code(text: object) -> str:
    """`text` as a Markdown code span, so a name holding Markdown or HTML shows as written: the fence is one backtick
    longer than any run inside, padded where the text starts or ends with one."""
    text = str(text).replace("\r", " ").replace("\n", " ")
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if not text or text[0] in "` " or text[-1] in "` " else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _model_label(model: str) -> str:
    """A model path shortened to its folder name (a card's title); packaged names and Hub ids unchanged."""
    return Path(model).name if Path(model).expanduser().is_dir() else model


def _hub_id(model: str) -> bool:
    """Whether `model` reads as a Hub id (owner/name) rather than a local directory or a packaged name."""
    return re.fullmatch(r"[\w.-]+/[\w.-]+", model) is not None and not Path(model).expanduser().exists()


def _corpus_text(summary: dict) -> str:
    """What a corpus summary (core.data Corpus, PairCorpus or ListCorpus .summary()) holds, in a few words: its size
    and, for a labelled corpus, its classes."""
    return kind_of(summary).summary_text(summary, _code)


def _load_text(ata: bool) -> str:
    """How a reader loads the saved directory. An ATA-pooled model's modules.json names ContrastLab's module classes,
    which sentence-transformers imports only with trust_remote_code, and only if ContrastLab's `core` is importable
    (checked in tests/test_ata.py); ContrastLab's own loader needs neither the flag nor the directory's trust."""
    if not ata:
        return "Load with `SentenceTransformer(path)`."
    return ("Load with `from core.models.ata import load_allowing_ata; load_allowing_ata(path)` with ContrastLab's "
            "`core` package importable, no `trust_remote_code` needed: ATA pooling is ContrastLab code, which a plain "
            "`SentenceTransformer(path)` refuses and `SentenceTransformer(path, trust_remote_code=True)` loads only "
            "where `core` is importable too.")


def _load_code(ata: bool) -> list[str]:
    """The loading line as a snippet to copy, `path` being this folder."""
    load = (["from core.models.ata import load_allowing_ata", "", 'model = load_allowing_ata("path/to/this/folder")']
            if ata else
            ["from sentence_transformers import SentenceTransformer", "",
             'model = SentenceTransformer("path/to/this/folder")'])
    return ["```python", *load, 'embeddings = model.encode(["A first sentence.", "A second one."])', "```"]
