"""The saved model's card leads with the run (base model, corpus name and size, classes, recipe and margin, metrics
before and after, how to load it), fills sentence-transformers' card data instead of leaving "Unknown", and the
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


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_model_dir) -> tuple[Path, dict, TrainConfig]:
    """A tiny triplet run on a 60-text corpus saved as '<CORPUS_NAME>.csv': (model folder, result, config)."""
    root = tmp_path_factory.mktemp("card")
    rows = [{"text": f"the {CLASSES[i % 3]} story number {i} about the {('red', 'blue', 'green')[i % 7 % 3]} one",
             "label": CLASSES[i % 3], "split": "test" if i % 5 == 0 else "train"} for i in range(60)]
    corpus = root / f"{CORPUS_NAME}.csv"
    pd.DataFrame(rows).to_csv(corpus, index=False)
    cfg = TrainConfig(corpus=str(corpus), model=str(tiny_model_dir), recipe="triplet", margin=0.25, examples=16,
                      batch_size=8, threshold=-1.0, device="cpu")
    with pytest.MonkeyPatch.context() as mp:  # module scope: the per-test home fixture is not in place yet
        mp.setenv("CONTRASTLAB_HOME", str(root / "home"))
        result = run_training(cfg, Quiet(), root / "work")
    return root / "work" / "model", result, cfg


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
    lead = "\n".join(lines[:25])
    assert f"**Base model:** `{tiny_model_dir}`" in lead
    corpus = result["corpus"]
    assert (f"**Corpus:** `{CORPUS_NAME}`: {corpus['rows_train']} train rows, {corpus['rows_test']} test rows, "
            "3 classes (`cooking`, `finance`, `sport`)") in lead
    assert "**Recipe:** Triplet (`triplet`), margin = 0.25" in lead
    assert "| metric (k = 16) | before | after | change |" in lead
    before, after = result["before"]["polarity"], result["after"]["polarity"]
    assert f"| P@k (label agreement of retrieved texts) | {before:.1f} | {after:.1f} |" in lead
    knn = result["after"]["knn_accuracy"]
    assert any(line.startswith("| kNN accuracy |") and f"| {100 * knn:.1f}% |" in line for line in lines[:25])
    assert 'model = SentenceTransformer("path/to/this/folder")' in lead
    assert card.index("## ContrastLab fine-tuning") < card.index("This is a [sentence-transformers]")
    assert str(Path(trained[2].corpus).parent) not in card  # the corpus by name, not by where it was saved


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
    assert "0123abcd" not in section  # named: not by the saved file's hash


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
