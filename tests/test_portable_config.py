"""An exported config travels: it names the corpus by the file name the user gave it and by its content (rows and
a fingerprint per column, the same for a CSV and its Parquet copy), never by a path in the exporting home, and
`python -m core train --config config.yaml` on another home finds the file (here, beside the config, in the home's
corpora folder) or asks for it in one line, and takes it as the corpus argument, warning with what differs when
its content does. A config file that is empty, not YAML or JSON, or names its corpus oddly is one line, exit 2."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pandas as pd
import pytest
import yaml

from core.cli import main
from core.data.content import Content, persist_table
from core.errors import UserError
from core.runs.export import CONFIG_FILE, export_run
from core.runs.store import RunStore
from core.training.config import TrainConfig, file_sha256
from tests.conftest import train_runs

NAME = "reviews.csv"
CLASSES = ("cooking", "finance", "sport")


def reviews(n: int = 60) -> pd.DataFrame:
    return pd.DataFrame([{"text": f"a {CLASSES[i % 3]} note, number {i}", "label": CLASSES[i % 3],
                          "split": "test" if i % 5 == 0 else "train"} for i in range(n)])


@pytest.fixture(scope="module")
def exported(tmp_path_factory, tiny_model_dir) -> dict:
    """A tiny run trained in home A on a corpus kept in A's corpora folder, exported from A: the export folder,
    the corpus, its content entry, and home A."""
    root = tmp_path_factory.mktemp("portable")
    home_a = root / "home-a"
    corpus = home_a / "corpora" / NAME
    corpus.parent.mkdir(parents=True)
    reviews().to_csv(corpus, index=False)
    config = TrainConfig(corpus=str(corpus), model=str(tiny_model_dir), recipe="triplet", examples=16,
                         batch_size=8, threshold=-1.0, device="cpu").to_dict()
    (run_id,) = train_runs(home_a, [config], corpus_name=NAME)
    with pytest.MonkeyPatch.context() as mp:  # module scope: the per-test home fixture is not in place yet
        mp.setenv("CONTRASTLAB_HOME", str(home_a))
        out = export_run(RunStore(home_a), run_id, root / "out", embeddings=False)
    return {"dir": Path(out["dir"]), "corpus": corpus, "entry": {"name": NAME, **Content.of(reviews()).entry()},
            "home_a": home_a}


def _one_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_an_export_names_the_corpus_by_file_name_and_content(exported):
    folder, entry = exported["dir"], exported["entry"]
    assert entry["rows"] == 60 and set(entry["columns"]) == {"text", "label", "split"}
    assert yaml.safe_load((folder / CONFIG_FILE).read_text())["corpus"] == entry
    assert json.loads((folder / "config.json").read_text())["corpus"] == entry
    assert yaml.safe_load((folder / "model" / CONFIG_FILE).read_text())["corpus"] == entry  # beside the card
    assert not (folder / "model" / "contrastlab_config.json").exists()  # the run's own, with this machine's paths
    with zipfile.ZipFile(folder / "model.zip") as archive:
        names = archive.namelist()
    assert f"model/{CONFIG_FILE}" in names and not any(n.endswith("contrastlab_config.json") for n in names)
    home_a = str(exported["home_a"])
    for path in folder.rglob("*"):
        if path.is_file() and path.suffix != ".zip":
            assert home_a not in path.read_bytes().decode("utf-8", errors="ignore"), path
    assert f"--config {CONFIG_FILE}" in (folder / "model" / "README.md").read_text()


def test_a_config_exported_on_one_home_trains_on_another(exported, contrastlab_home, tmp_path, monkeypatch,
                                                         capsys):
    assert contrastlab_home != exported["home_a"]  # home B: a fresh one, without the corpus
    config, content = exported["dir"] / CONFIG_FILE, exported["entry"]["content"]
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--config", str(config), "--json"]) == 2
    line = _one_error(capsys)
    assert line == (f"error: Config {config}: the config trains on {NAME} (content {content[:16]}), which is not "
                    f"in the current folder, beside the config, in {contrastlab_home / 'corpora'} or in the assets; "
                    f"pass the file as the corpus argument: python -m core train PATH --config {config}.")
    assert RunStore().list() == []  # refused before a run was created
    mine = tmp_path / "my copy.jsonl"  # the same rows in another format: the same content, so not a word
    reviews().to_json(mine, orient="records", lines=True)
    assert main(["train", str(mine), "--config", str(config), "--json", "--foreground"]) == 0
    captured = capsys.readouterr()
    assert "is not the" not in captured.err, captured.err
    result = json.loads(captured.out)
    assert result["status"] == "done" and Path(result["model_path"]).is_relative_to(contrastlab_home)
    run = RunStore().get(result["run_id"])
    assert run.config["corpus"] == str(mine) and run.config["examples"] == 16


def test_the_documented_re_run_from_the_folder_that_holds_both_files_stores_absolute_paths(
        exported, contrastlab_home, tmp_path, monkeypatch, capsys, tiny_model_dir):
    """Issue 51: `train --config config.yaml --corpus "emotion tweets.csv"`, run from the folder holding both files,
    read the file and then failed in the worker ("Corpus file emotion tweets.csv does not exist"): the worker runs
    in the repository's folder. Every path the call gives is made absolute before the run is queued."""
    shutil.copy(exported["dir"] / CONFIG_FILE, tmp_path / "config.yaml")
    reviews().to_csv(tmp_path / "emotion tweets.csv", index=False)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "tiny").symlink_to(tiny_model_dir, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--config", "config.yaml", "--corpus", "emotion tweets.csv", "--model", "models/tiny",
                 "--json", "--foreground"]) == 0
    run = RunStore().get(json.loads(capsys.readouterr().out)["run_id"])
    assert run.status == "done"
    assert run.config["corpus"] == str(tmp_path / "emotion tweets.csv")
    assert Path(run.config["model"]).is_absolute() and Path(run.config["reference"]).is_absolute()


@pytest.mark.parametrize(("change", "said"), [
    (lambda df: df.head(59), "it has 59 rows, not 60"),
    (lambda df: df.drop(columns="split"), "it lacks the column 'split'"),
    (lambda df: df.assign(label=df["label"].str.upper()), "other values in the column 'label'"),
    (lambda df: df.assign(label=df["label"].str.upper(), text=df["text"] + "!"),
     "other values in the columns 'text', 'label'"),
    # issue 51: the same rows in another order said "other values in the columns 'text', 'label', 'split'"
    (lambda df: df.iloc[::-1], "the same rows in another order, so the splits are the same, but the samples drawn "
     "from the training rows by position (the P@k source pool, mined examples) are other draws"),
    (lambda df: df.iloc[::-1][["split", "label", "text"]],  # the columns' order in the file is no matter
     "the same rows in another order, so the splits are the same, but the samples drawn from the training rows by "
     "position (the P@k source pool, mined examples) are other draws"),
    (lambda df: df.assign(text=df["label"], label=df["text"]), "the same values with the columns 'text' and 'label' "
     "swapped"),
])
def test_a_given_file_with_other_content_is_used_with_one_warning_saying_what_differs(exported, tmp_path, change,
                                                                                    said):
    config = exported["dir"] / CONFIG_FILE
    other = tmp_path / "other.csv"
    change(reviews()).to_csv(other, index=False)
    heard: list[str] = []
    given = TrainConfig.from_file(config, {"corpus": str(other)}, heard.append)
    assert given.corpus == str(other)
    assert heard == [f"{other} is not the {NAME} that config {config} trained on: {said}; training on it anyway."]


def test_another_row_order_without_a_split_column_says_the_hold_out_is_another_draw(tmp_path, tiny_model_dir):
    from core.training.config import portable

    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    rows = reviews().drop(columns="split")
    rows.to_csv(first, index=False)
    rows.iloc[::-1].to_csv(second, index=False)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(portable(TrainConfig(corpus=str(first), model=str(tiny_model_dir)).to_dict())))
    heard: list[str] = []
    TrainConfig.from_file(config, {"corpus": str(second)}, heard.append)
    assert heard == [f"{second} is not the a.csv that config {config} trained on: the same rows in another order, and "
                     "the held-out test set is drawn from the row order, so it is a different draw; training on it "
                     "anyway."]


def test_a_pair_file_with_its_texts_swapped_says_its_cosines_are_unchanged(tmp_path, tiny_model_dir):
    from core.training.config import portable

    pairs = pd.DataFrame({"text1": [f"a cat {i}" for i in range(40)], "text2": [f"a dog {i % 7}" for i in range(40)],
                          "score": [float(i % 5) for i in range(40)]})
    first, second = tmp_path / "pairs.csv", tmp_path / "swapped.csv"
    pairs.to_csv(first, index=False)
    pairs.rename(columns={"text1": "text2", "text2": "text1"})[["text1", "text2", "score"]].to_csv(second, index=False)
    config = tmp_path / "config.yaml"
    settings = {"corpus": str(first), "model": str(tiny_model_dir), "recipe": "cosent", "text1_col": "text1",
                "text2_col": "text2", "score_col": "score"}
    config.write_text(yaml.safe_dump(portable(TrainConfig(**settings).to_dict())))
    heard: list[str] = []
    TrainConfig.from_file(config, {"corpus": str(second)}, heard.append)
    assert heard == [f"{second} is not the pairs.csv that config {config} trained on: the same values with the columns "
                     "'text1' and 'text2' swapped: every pair's two texts are swapped, which leaves every cosine and "
                     "STS Spearman as they were; training on it anyway."]


def test_a_re_run_mapping_its_columns_compares_the_file_role_by_role(tmp_path, tiny_model_dir, capsys):
    """Issue 51 item 2: the same pairs in SICK's own column names, mapped with --text1-col etc., are the same
    content, not a file that "lacks the columns 'text1'"; other pairs so mapped differ in their values."""
    from core.training.config import portable

    pairs = pd.DataFrame({"text1": [f"a cat {i}" for i in range(120)], "text2": [f"a dog {i % 7}" for i in range(120)],
                          "score": [float(i % 5) for i in range(120)]})
    first = tmp_path / "pairs.csv"
    pairs.to_csv(first, index=False)
    sick = pairs.rename(columns={"text1": "sentence_A", "text2": "sentence_B", "score": "relatedness_score"})
    sick.assign(text1="not a role here").to_csv(tmp_path / "sick.csv", index=False)
    sick.assign(relatedness_score=sick["relatedness_score"][::-1].to_numpy()).to_csv(tmp_path / "other.csv",
                                                                                     index=False)
    config = tmp_path / "config.yaml"
    settings = {"corpus": str(first), "model": str(tiny_model_dir), "recipe": "cosent", "text1_col": "text1",
                "text2_col": "text2", "score_col": "score"}
    config.write_text(yaml.safe_dump(portable(TrainConfig(**settings).to_dict())))
    roles = {"text1_col": "sentence_A", "text2_col": "sentence_B", "score_col": "relatedness_score"}
    for name, said in (("sick.csv", []), ("other.csv", ["other values in the column 'score'"])):
        heard: list[str] = []
        TrainConfig.from_file(config, {"corpus": str(tmp_path / name), **roles}, heard.append)
        assert len(heard) == len(said) and all(text in line for text, line in zip(said, heard)), heard
    flags = ["--text1-col", "sentence_A", "--text2-col", "sentence_B", "--score-col", "relatedness_score"]
    assert main(["train", str(tmp_path / "sick.csv"), "--config", str(config), *flags, "--json",
                 "--foreground", "--epochs", "1", "--batch-size", "8"]) == 0
    err = capsys.readouterr().err
    assert "is not the" not in err and "lacks" not in err, err


def test_extra_columns_of_the_original_file_are_not_a_difference(exported, tmp_path):
    """The pages save only the columns a run reads; the user's file may hold more."""
    config = exported["dir"] / CONFIG_FILE
    wider = tmp_path / "wider.csv"
    reviews().assign(id=range(60), note="x").to_csv(wider, index=False)
    heard: list[str] = []
    assert TrainConfig.from_file(config, {"corpus": str(wider)}, heard.append).corpus == str(wider)
    assert heard == []


def test_the_corpus_is_found_by_name_and_content(exported, contrastlab_home, tmp_path, monkeypatch):
    config = exported["dir"] / CONFIG_FILE
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    (here / NAME).write_bytes(exported["corpus"].read_bytes().replace(b"\n", b"\r\n"))  # other bytes, same rows
    assert TrainConfig.from_file(config).corpus == str((here / NAME).resolve())
    (here / NAME).write_text("text,label\nanother,file\n")  # the name, not the contents: not used
    with pytest.raises(UserError, match=f"{here / NAME} has that name but it lacks the column 'split'; pass "
                       ) as caught:
        TrainConfig.from_file(config)
    assert len(str(caught.value).splitlines()) == 1
    saved = contrastlab_home / "corpora" / NAME  # where the pages keep uploads
    saved.parent.mkdir(parents=True)
    shutil.copy(exported["corpus"], saved)
    assert TrainConfig.from_file(config).corpus == str(saved.resolve())


def test_the_pages_copy_of_an_upload_is_found_by_its_content(exported, contrastlab_home, tmp_path, monkeypatch):
    """On the machine that trained it, a config names the original upload, which the app kept only as its copy."""
    monkeypatch.chdir(tmp_path)
    copy = persist_table(reviews(), ["text", "label", "split"])
    assert TrainConfig.from_file(exported["dir"] / CONFIG_FILE).corpus == str(copy.resolve())


def test_a_config_of_an_older_export_names_its_file_by_sha256(exported, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = yaml.safe_load((exported["dir"] / CONFIG_FILE).read_text())
    data["corpus"] = {"name": NAME, "sha256": file_sha256(exported["corpus"])}
    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump(data))
    shutil.copy(exported["corpus"], tmp_path / NAME)
    assert TrainConfig.from_file(old).corpus == str((tmp_path / NAME).resolve())
    (tmp_path / "edited.csv").write_text("text,label\nanother,file\n")
    heard: list[str] = []
    TrainConfig.from_file(old, {"corpus": str(tmp_path / "edited.csv")}, heard.append)
    assert len(heard) == 1 and f"its sha256 is {file_sha256(tmp_path / 'edited.csv')}" in heard[0]


def test_a_missing_sts_corpus_is_asked_for_by_its_flag(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"corpus": str(tmp_path / "x.csv"), "sts_corpus": {"name": "sts.csv"}}))
    with pytest.raises(UserError, match=r"trains on sts\.csv, which is not .* pass the file with --sts-corpus PATH"):
        TrainConfig.from_file(path)


def _content_entry(**changed: str) -> bytes:
    """A config whose corpus entry is a valid content entry with `changed` fields replaced (YAML text)."""
    entry = {"name": "x.csv", **Content(2, {"text": "a" * 16}).entry()}
    fields = {key: json.dumps(value) for key, value in entry.items()}  # JSON is YAML
    fields.update(changed)
    return ("corpus: {" + ", ".join(f"{key}: {value}" for key, value in fields.items()) + "}\n").encode()


@pytest.mark.parametrize(("suffix", "body", "said"), [
    (".yaml", b"", "is empty"),
    (".json", b"  \n", "is empty"),
    (".yaml", b"corpus: [unclosed\n", "Could not read config"),
    (".json", b"corpus: not json", "Could not read config"),
    (".yaml", b"\xff\xfe\x00garbage", "Could not read config"),
    (".yaml", b"just some words\n", "settings must be given as a mapping"),
    (".yaml", b"corpus: [1, 2]\n", "corpus must be a file path or a mapping {name: FILE, content: HEX, rows: N, "
     "columns: {COLUMN: HEX}}, got [1, 2]"),
    (".yaml", b"corpus: 5\n", "corpus must be a file path or a mapping"),
    (".yaml", b"corpus: {path: x.csv}\n", "corpus must be a file path or a mapping"),
    (".yaml", b"corpus: {name: x.csv, sha256: abc, size: 3}\n", "corpus must be a file path or a mapping"),
    (".yaml", b"corpus: {name: ../x.csv}\n", "corpus's name must be a file name, without folders"),
    (".yaml", b"corpus: {name: \"a\\nb.csv\"}\n", "corpus's name must be a file name"),
    (".yaml", b"corpus: {name: x.csv, sha256: not-hex}\n", "corpus's sha256 must be 64 hexadecimal digits"),
    (".yaml", b"corpus: {name: x.csv, sha256: 12}\n", "corpus's sha256 must be 64 hexadecimal digits, got 12"),
    (".json", b'{"corpus": {"name": "x.csv", "sha256": "' + b"g" * 64 + b'"}}', "must be 64 hexadecimal digits"),
    (".yaml", b"corpus: {name: x.csv, content: abc}\n", "names its content by content, rows, columns together; it "
     "gives only content"),
    (".yaml", _content_entry(rows="-1"), "corpus's rows must be a whole number of rows, got -1"),
    (".yaml", _content_entry(rows="true"), "corpus's rows must be a whole number of rows, got True"),
    (".yaml", _content_entry(rows="2.5"), "corpus's rows must be a whole number of rows, got 2.5"),
    (".yaml", _content_entry(rows=".nan"), "corpus's rows must be a whole number of rows, got nan"),
    (".yaml", _content_entry(columns="{}"), "corpus's columns must map each column name to its 16-digit"),
    (".yaml", _content_entry(columns="[text]"), "corpus's columns must map each column name to its 16-digit"),
    (".yaml", _content_entry(columns="{text: zz}"), "corpus's columns must map each column name to its 16-digit"),
    (".yaml", _content_entry(columns="{1: " + "a" * 16 + "}"), "corpus's columns must map each column name"),
    (".yaml", _content_entry(content="b" * 64), "the entry was edited, so it cannot say which file it names"),
    (".yaml", _content_entry(content="[1]"), "the entry was edited, so it cannot say which file it names"),
    (".yaml", b"corpus: {name: x.csv, name: y.csv}\n", "the key 'name' is given twice"),
])
def test_a_hostile_config_file_is_one_line_exit_2(suffix, body, said, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / f"config{suffix}"
    path.write_bytes(body)
    assert main(["train", "--config", str(path)]) == 2
    line = _one_error(capsys)
    assert str(path) in line and said in line, line


def test_paths_a_run_reads_are_made_absolute_and_names_are_left_alone(tmp_path, monkeypatch):
    from core.training.config import absolute_paths

    (tmp_path / "models" / "teacher").mkdir(parents=True)
    (tmp_path / "docs.csv").write_text("text\na\n")
    monkeypatch.chdir(tmp_path)
    config = {"corpus": "missing.csv", "documents": "docs.csv", "model": "all-MiniLM-L6-v2",
              "reference": "models/teacher", "teacher": "models/teacher,reference", "recipe": "triplet"}
    assert absolute_paths(config) == {
        "corpus": "missing.csv",  # named as given, so the check that it is missing says what the user typed
        "documents": str(tmp_path / "docs.csv"), "model": "all-MiniLM-L6-v2",
        "reference": str(tmp_path / "models" / "teacher"),
        "teacher": f"{tmp_path / 'models' / 'teacher'},reference", "recipe": "triplet"}


def test_a_config_of_settings_alone_trains_on_the_corpus_given_beside_it(tmp_path, tiny_model_dir, capsys):
    """Issue 51: a config without a corpus, given --corpus FILE, said "The config needs a 'corpus' path"."""
    config = tmp_path / "settings.yaml"
    config.write_text("recipe: triplet\nmargin: 0.2\nexamples: 16\nbatch_size: 8\ndevice: cpu\n")
    assert main(["train", "--config", str(config), "--model", str(tiny_model_dir), "--json"]) == 2
    assert _one_error(capsys).endswith("The config needs a 'corpus' path; add one, or give the corpus file on the "
                                       "command line: python -m core train PATH --config FILE.")
    from core.data.corpus import demo_corpus_path

    assert main(["train", "--config", str(config), "--corpus", str(demo_corpus_path()), "--model",
                 str(tiny_model_dir), "--json", "--foreground"]) == 0
    run = RunStore().get(json.loads(capsys.readouterr().out)["run_id"])
    assert run.status == "done" and run.config["margin"] == 0.2 and run.config["corpus"] == str(demo_corpus_path())
