"""The saved model's card leads with the run (base model, corpus name and size, classes, leakage, recipe and margin,
metrics before and after with their 95% intervals, per-class results, how to load it), fills sentence-transformers'
card data instead of leaving "Unknown", quotes no training or test text unless the run asks (card_examples), and the
directory still loads with plain sentence-transformers, unchanged but for its README."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from huggingface_hub.repocard import REGEX_YAML_BLOCK

from core.training.card import CLASSES_SHOWN, contrastlab_card_section, fill_card_data, lead_with, save_with_card
from core.training.config import TrainConfig
from core.training.trainer import run_training

CLASSES = ("cooking", "finance", "sport")
CORPUS_NAME = "product reviews"


class Quiet:
    """A reporter that keeps nothing (core.training.trainer.Reporter)."""

    def progress(self, **fields) -> None: ...
    def should_stop(self) -> bool: return False
    def log_loss(self, step: int, loss: float) -> None: ...
    def log_eval(self, point: dict) -> None: ...


ROWS = [{"text": f"the {CLASSES[i % 3]} story number {i} about the {('red', 'blue', 'green')[i % 7 % 3]} one",
         "label": CLASSES[i % 3], "split": "test" if i % 5 == 0 else "train"} for i in range(60)]


def _train(root: Path, tiny_model_dir: Path, **settings) -> tuple[Path, dict, TrainConfig]:
    """A tiny triplet run on ROWS saved as '<CORPUS_NAME>.csv' in `root`: (model folder, result, config)."""
    corpus = root / f"{CORPUS_NAME}.csv"
    pd.DataFrame(ROWS).to_csv(corpus, index=False)
    cfg = TrainConfig(corpus=str(corpus), model=str(tiny_model_dir), recipe="triplet", margin=0.25, examples=16,
                      batch_size=8, threshold=-1.0, device="cpu", **settings)
    with pytest.MonkeyPatch.context() as mp:  # module scope: the per-test home fixture is not in place yet
        mp.setenv("CONTRASTLAB_HOME", str(root / "home"))
        result = run_training(cfg, Quiet(), root / "work")
    return root / "work" / "model", result, cfg


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_model_dir) -> tuple[Path, dict, TrainConfig]:
    """A tiny triplet run on a 60-text corpus saved as '<CORPUS_NAME>.csv': (model folder, result, config)."""
    return _train(tmp_path_factory.mktemp("card"), tiny_model_dir)


def _texts_found(folder: Path) -> set[str]:
    """The corpus texts (training and test) that occur in any file of the saved model folder."""
    contents = [path.read_bytes().decode("utf-8", errors="ignore") for path in folder.rglob("*") if path.is_file()]
    return {row["text"] for row in ROWS if any(row["text"] in content for content in contents)}


def _body(card: str) -> list[str]:
    """The card's lines after its YAML front matter, blank ones left out."""
    match = REGEX_YAML_BLOCK.search(card)
    assert match, card[:300]
    return [line for line in card[match.end():].splitlines() if line.strip()]


def test_the_card_leads_with_what_the_run_did(trained, tiny_model_dir):
    folder, result, _ = trained
    card = (folder / "README.md").read_text(encoding="utf-8")
    lines = _body(card)
    assert lines[0] == f"# `{tiny_model_dir.name}` fine-tuned with ContrastLab on `{CORPUS_NAME}`"
    lead = "\n".join(lines[:40])
    assert f"**Base model:** `{tiny_model_dir}`" in lead
    corpus = result["corpus"]
    assert (f"**Corpus:** `{CORPUS_NAME}`: {corpus['rows_train']} train rows, {corpus['rows_test']} test rows, "
            "3 classes (`cooking`, `finance`, `sport`)") in lead
    assert "**Recipe:** Triplet (`triplet`), margin = 0.25" in lead
    assert "| metric (k = 16) | before | after | change |" in lead
    before, after = result["before"]["polarity"], result["after"]["polarity"]
    assert f"| P@k (label agreement of retrieved texts) | {before:.1f} (" in lead and f"| {after:.1f} (" in lead
    knn = result["after"]["knn_accuracy"]
    assert any(line.startswith("| kNN accuracy |") and f"| {100 * knn:.1f}% (" in line for line in lines[:40])
    assert 'model = SentenceTransformer("path/to/this/folder")' in lead
    assert card.index("## ContrastLab fine-tuning") < card.index("This is a [sentence-transformers]")
    assert str(Path(trained[2].corpus).parent) not in card  # the corpus by name, not by where it was saved


def test_the_saved_folder_quotes_no_training_or_test_text_by_default(trained):
    folder, _, cfg = trained
    assert _texts_found(folder) == set()  # no widget, samples table or usage snippet taken from the data
    assert cfg.card_examples is False
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert "* Samples:" not in card and "source_sentence" not in card
    # sentence-transformers' stock usage sentences, placeholders and blog links are not true of this model (issue 51)
    assert "The weather is lovely today." not in card and "<!--" not in card and "Additional Resources" not in card


def test_card_examples_keeps_sentence_transformers_examples(tmp_path_factory, tiny_model_dir):
    folder, _, cfg = _train(tmp_path_factory.mktemp("card-examples"), tiny_model_dir, card_examples=True)
    assert cfg.card_examples is True
    found = _texts_found(folder)
    assert found and found <= {row["text"] for row in ROWS if row["split"] == "train"}, found
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert "* Samples:" in card and "source_sentence" in card


def test_card_examples_is_a_train_flag_and_off_by_default():
    from core.cli import build_parser

    args = build_parser().parse_args(["train", "x.csv", "--card-examples"])
    assert args.card_examples is True
    assert build_parser().parse_args(["train", "x.csv"]).card_examples is None  # unset: the config's, else False
    assert TrainConfig(corpus="x.csv").card_examples is False


def test_the_card_carries_intervals_per_class_results_and_leakage(trained):
    folder, result, _ = trained
    card = (folder / "README.md").read_text(encoding="utf-8")
    after = result["after"]
    low, high = after["knn_accuracy_ci"]
    assert f"| {100 * after['knn_accuracy']:.1f}% ({100 * low:.1f}–{100 * high:.1f}%) |" in card
    low, high = after["uncertainty"]["similarity_ci"]
    assert f"| {after['similarity']:.1f} ({low:.1f}–{high:.1f}) |" in card
    assert ("In brackets: the 95% interval (P@k and S@k: bootstrap over the target texts; accuracies: Wilson)."
            in card)
    assert "| class | test texts | P@16 before | P@16 after | kNN recall before | kNN recall after |" in card
    for was, now in zip(result["before"]["per_class"]["classes"], after["per_class"]["classes"]):
        assert (f"| `{now['class']}` | {now['n']}* | {was['polarity']:.1f} | {now['polarity']:.1f} | "
                f"{100 * was['knn_recall']:.1f}% | {100 * now['knn_recall']:.1f}% |") in card
    assert "*: fewer than 20 test texts" in card
    assert "| kNN recall after | recall change 95% CI, p |" in card  # each class's change, with the floors (issue 53)
    assert card.count("| n = 4: too few to judge (fewer than 10) |") == 3  # 4 test texts a class: no interval
    assert "no interval below 10 of them, rough below 30" in card
    assert "- **Leakage:** none: no test text is also a training text" in card


@pytest.mark.parametrize(("summary", "line"), [
    ({"leaked": 3, "leaked_dropped": 0},
     "3 test texts are also training texts (exact repeats); counted in the figures below, where a model can score "
     "them from memory"),
    ({"leaked": 1, "leaked_dropped": 1, "target_split": "holdout"},
     "1 holdout text was also a training text (exact repeats); dropped from the holdout split before evaluating"),
    ({"kind": "pairs", "leaked": 2, "leaked_dropped": 0, "rows_train": 9, "rows_test": 4},
     "2 test pairs are also training pairs (exact repeats); counted in the figures below, where a model can score "
     "them from memory"),
    ({"kind": "pairs", "leaked": 0, "leaked_dropped": 0}, "none: no test pair is also a training pair"),
    ({}, None),  # a summary recorded before leakage was counted
    ({"kind": "lists", "lists_train": 3, "lists_test": 1}, None),  # a kind that does not count it
])
def test_the_leakage_count_is_said_where_the_corpus_has_one(summary, line):
    section = contrastlab_card_section(TrainConfig(corpus="c.csv"), {"corpus": {"name": "c", **summary}})
    leakage = [text for text in section.splitlines() if text.startswith("- **Leakage:**")]
    assert leakage == ([f"- **Leakage:** {line}"] if line else [])


def test_intervals_show_where_both_bounds_are_known_and_per_class_rows_are_cut():
    classes = [f"c{i}" for i in range(CLASSES_SHOWN + 2)]
    rows = [{"class": c, "n": 30, "polarity": 50.0 + i, "polarity_sd": 1.0, "knn_recall": 0.5} for i, c in
            enumerate(classes)]
    result = {"corpus": {"name": "big", "classes": classes},
              "before": {"knn_accuracy": 0.5, "knn_accuracy_ci": [None, 0.6], "sts_spearman": 70.0,
                         "sts_spearman_ci": [60.0, 78.0]},
              "after": {"knn_accuracy": 0.75, "knn_accuracy_ci": [0.7, 0.8], "sts_spearman": 80.0,
                        "sts_spearman_ci": [None, None], "ordering_accuracy": 0.25,
                        "ordering_accuracy_ci": [0.125, 0.5], "per_class": {"k": 8, "knn_k": 10, "classes": rows}}}
    section = contrastlab_card_section(TrainConfig(corpus="big.csv"), result)
    assert "| kNN accuracy | 50.0% | 75.0% (70.0–80.0%) | +25.0 pp |" in section  # an undefined bound: no interval
    assert "| STS Spearman (cosine vs gold score, x100) | 70.0 (60.0–78.0) | 80.0 | +10.0 |" in section
    assert "| – | 25.0% (12.5–50.0%) | – |" in section
    assert "(accuracies: Wilson; STS Spearman: Fisher z)." in section
    assert "| `c0` | 30 | – | 50.0 | – | 50.0% |" in section  # no per-class results before: dashes
    assert f"`c{CLASSES_SHOWN - 1}` |" in section and f"`c{CLASSES_SHOWN}` |" not in section
    assert "2 more classes are in the run's per-class results" in section and "*: fewer" not in section


def test_the_card_names_the_config_an_export_writes():
    from core.runs.export import CONFIG_FILE

    section = contrastlab_card_section(TrainConfig(corpus="c.csv"), {})
    assert f"python -m core train --config {CONFIG_FILE}" in section and "contrastlab_config" not in section
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert f"--config exports/<folder>/{CONFIG_FILE}" in readme


def test_the_card_data_names_the_dataset_instead_of_unknown(trained):
    card = (trained[0] / "README.md").read_text(encoding="utf-8")
    assert "Unnamed Dataset" not in card and "Training Dataset:** Unknown" not in card
    assert f"trained on the `{CORPUS_NAME}` dataset" in card
    assert f"#### `{CORPUS_NAME}`" in card and "* Size: 16 training samples" in card
    front = REGEX_YAML_BLOCK.search(card).group(2)
    assert "- contrastlab" in front and "- contrastlab-recipe:triplet" in front and "- dataset_size:16" in front
    assert "#### Non-Default Hyperparameters" in card and "`per_device_train_batch_size`: 8" in card  # trainer args


def test_the_folder_loads_with_sentence_transformers(trained):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(trained[0]), device="cpu")
    assert model.encode(["a story about sport"]).shape == (1, model.get_embedding_dimension())


def test_only_the_readme_differs_from_a_plain_save(tiny_model_dir, tmp_path):
    from core.models.loading import load_model

    model = load_model(str(tiny_model_dir), device="cpu")
    model.save(str(tmp_path / "plain"))
    save_with_card(model, tmp_path / "ours", TrainConfig(corpus="x.csv", model=str(tiny_model_dir)), {})
    files = {folder: {p.relative_to(tmp_path / folder): p.read_bytes() for p in (tmp_path / folder).rglob("*")
                      if p.is_file()} for folder in ("plain", "ours")}
    assert files["ours"].keys() == files["plain"].keys()
    assert [name for name in files["ours"] if files["ours"][name] != files["plain"][name]] == [Path("README.md")]


@pytest.mark.parametrize(("name", "span"), [
    ("a`b``c", "```a`b``c```"),  # the fence is longer than any backtick run inside, so the name cannot close it
    ("<script>alert(1)</script>", "`<script>alert(1)</script>`"),
    ("two\nlines | pipe", "`two lines | pipe`"),
    (" padded ", "`  padded  `"),
])
def test_a_hostile_corpus_name_stays_inside_its_code_span(name, span):
    result = {"corpus": {"name": name, "rows_train": 3, "rows_test": 1, "n_classes": 1, "classes": [name]}}
    section = contrastlab_card_section(TrainConfig(corpus="saved/0123abcd.parquet"), result)
    line = next(line for line in section.splitlines() if line.startswith("- **Corpus:**"))
    assert line == f"- **Corpus:** {span}: 3 train rows, 1 test rows, 1 classes ({span})"
    reproduce = next(line for line in section.splitlines() if line.startswith("Reproduce with "))
    assert "0123abcd" not in section.replace(reproduce, "")  # named: not by the saved file's hash
    assert "--corpus 0123abcd.parquet" in reproduce  # a name that is no file's (a paste): the copy is the file


@pytest.mark.parametrize(("name", "command"), [
    ("my data.csv", "`python -m core train --config config.yaml --corpus 'my data.csv'`"),
    ("a`b.jsonl", "``python -m core train --config config.yaml --corpus 'a`b.jsonl'``"),
])
def test_the_card_reproduces_on_the_file_the_user_named(name, command):
    """Issue 31, section 1: the card's command names the upload, quoted for the shell, inside one code span."""
    result = {"corpus": {"name": name, "rows_train": 3, "rows_test": 1, "n_classes": 1, "classes": ["x"]}}
    section = contrastlab_card_section(TrainConfig(corpus="saved/0123abcd.parquet"), result)
    assert f"Reproduce with {command}: an export" in section and "0123abcd" not in section


def test_many_classes_are_cut_with_a_count_and_missing_metrics_show_a_dash():
    classes = [f"class {i}" for i in range(CLASSES_SHOWN + 5)]
    result = {"corpus": {"name": "big", "rows_train": 100, "rows_test": 10, "n_classes": len(classes),
                         "classes": classes},
              "before": {"polarity": 40.0, "knn_accuracy": float("nan")}, "after": {"polarity": 45.5, "k": 16}}
    section = contrastlab_card_section(TrainConfig(corpus="big.csv"), result)
    assert f"`class {CLASSES_SHOWN - 1}`, … (+5))" in section and f"`class {CLASSES_SHOWN}`" not in section
    assert "| P@k (label agreement of retrieved texts) | 40.0 | 45.5 | +5.5 |" in section
    assert "| kNN accuracy | – | – | – |" in section and "nan" not in section.lower()


def test_an_empty_result_or_name_still_gives_a_section_named_after_the_file():
    for result in ({}, {"corpus": {"name": ""}}):
        section = contrastlab_card_section(TrainConfig(corpus="/data/my_corpus.csv"), result)
        assert "**Corpus:** `my_corpus`: ? train rows, ? test rows, ? classes" in section
    assert "Load with `SentenceTransformer(path)`." in section


def test_lead_with_puts_the_section_below_the_title_and_never_inside_the_front_matter():
    card = "---\n# a YAML comment, not a title\ntags:\n- x\n---\n\n# Title\n\nBoilerplate.\n"
    out = lead_with(card, "## Ours\n\nText.")
    assert out.startswith("---\n# a YAML comment, not a title\ntags:\n- x\n---\n")
    assert out.index("# Title") < out.index("## Ours") < out.index("Boilerplate.")
    assert lead_with("Boilerplate only.\n", "## Ours") == "## Ours\n\nBoilerplate only.\n"
    assert lead_with("", "## Ours\n") == "## Ours\n"


def test_the_base_model_is_linked_only_when_the_run_names_a_hub_id(tiny_model_dir):
    from sentence_transformers import SentenceTransformerModelCardData

    for model, linked in (("sentence-transformers/all-MiniLM-L6-v2", True), (str(tiny_model_dir), False),
                          ("all-MiniLM-L6-v2", False)):
        data = SentenceTransformerModelCardData(local_files_only=True)
        fill_card_data(data, TrainConfig(corpus="reviews.csv", model=model), {})
        assert data.base_model == (model if linked else None)
        assert data.model_name.endswith("fine-tuned with ContrastLab on `reviews`")


def test_the_card_reads_as_the_app_does(trained):
    """Issue 31, item 3.5: the training time the app reports (not sentence-transformers' clock, which runs on to the
    save), no usage snippet that downloads a Hub id the model does not have, and no k over a table without P@k."""
    from core.training.eta import fmt_seconds

    folder, result, cfg = trained
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert "sentence_transformers_model_id" not in card and "Download from the" not in card
    assert card.count('SentenceTransformer("path/to/this/folder")') == 1  # ours; the stock usage section is cut
    assert f"- **Training**: {fmt_seconds(result['timings']['train_s'])} (the optimiser steps" in card
    pairs = {"before": {"sts_spearman": 80.0}, "after": {"sts_spearman": 81.0, "k": 16}}
    assert "| metric | before | after | change |" in contrastlab_card_section(cfg, pairs)
    assert "| metric (k = 16) | before | after | change |" in card  # P@k beside: its k is named


def test_a_pair_run_s_card_states_only_the_settings_it_used():
    """Issue 51: a pair run's card listed mining settings (mine_k, threshold) and a reference 'for mining, S@k' the
    run never used: it trains on the corpus's own pairs and reports STS Spearman."""
    cfg = TrainConfig(corpus="sick.csv", recipe="cosent")
    result = {"corpus": {"kind": "pairs", "name": "sick", "rows_train": 90, "rows_test": 30, "target_split": "test"},
              "before": {"sts_spearman": 70.0}, "after": {"sts_spearman": 75.0}, "examples": {"examples": 90}}
    section = contrastlab_card_section(cfg, result)
    assert "mine_k" not in section and "threshold" not in section and "Reference model" not in section
    labelled = {**result, "corpus": {"name": "demo", "rows_train": 90, "rows_test": 10, "classes": ["a", "b"]},
                "before": {"polarity": 60.0}, "after": {"polarity": 70.0}}
    shown = contrastlab_card_section(TrainConfig(corpus="demo.csv", recipe="cosent"), labelled)
    assert "`mine_k` = 5" in shown and "- **Reference model (mining, S@k):**" in shown
