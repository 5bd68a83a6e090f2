"""An exported config travels: it names the corpus by file name and SHA-256, never by a path in the exporting home,
and `python -m core train --config config.yaml` on another home finds the file (here, beside the config, in the
home's corpora folder) or asks for it in one line, and takes it as the corpus argument, warning when its checksum
differs. A config file that is empty, not YAML or JSON, or names its corpus oddly is one line, exit 2."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pandas as pd
import pytest
import yaml

from core.cli import main
from core.errors import UserError
from core.runs.export import CONFIG_FILE, export_run
from core.runs.store import RunStore
from core.training.config import TrainConfig, file_sha256
from tests.conftest import train_runs

NAME = "reviews.csv"
CLASSES = ("cooking", "finance", "sport")


@pytest.fixture(scope="module")
def exported(tmp_path_factory, tiny_model_dir) -> dict:
    """A tiny run trained in home A on a corpus kept in A's corpora folder, exported from A: the export folder,
    the corpus and its checksum, and home A."""
    root = tmp_path_factory.mktemp("portable")
    home_a = root / "home-a"
    corpus = home_a / "corpora" / NAME
    corpus.parent.mkdir(parents=True)
    pd.DataFrame([{"text": f"a {CLASSES[i % 3]} note, number {i}", "label": CLASSES[i % 3],
                   "split": "test" if i % 5 == 0 else "train"} for i in range(60)]).to_csv(corpus, index=False)
    config = TrainConfig(corpus=str(corpus), model=str(tiny_model_dir), recipe="triplet", examples=16,
                         batch_size=8, threshold=-1.0, device="cpu").to_dict()
    (run_id,) = train_runs(home_a, [config], corpus_name=NAME)
    with pytest.MonkeyPatch.context() as mp:  # module scope: the per-test home fixture is not in place yet
        mp.setenv("CONTRASTLAB_HOME", str(home_a))
        out = export_run(RunStore(home_a), run_id, root / "out", embeddings=False)
    return {"dir": Path(out["dir"]), "corpus": corpus, "sha": file_sha256(corpus), "home_a": home_a}


def _one_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_an_export_names_the_corpus_by_file_name_and_checksum(exported):
    folder, sha = exported["dir"], exported["sha"]
    entry = {"name": NAME, "sha256": sha}
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
    config, sha = exported["dir"] / CONFIG_FILE, exported["sha"]
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--config", str(config), "--json"]) == 2
    line = _one_error(capsys)
    assert line == (f"error: Config {config}: the config trains on {NAME} (sha256 {sha}), which is not in the "
                    f"current folder, beside the config, in {contrastlab_home / 'corpora'} or in the assets; pass "
                    f"the file as the corpus argument: python -m core train PATH --config {config}.")
    assert RunStore().list() == []  # refused before a run was created
    mine = tmp_path / "my copy.csv"  # the same rows, written another way: another checksum
    mine.write_bytes(exported["corpus"].read_bytes().replace(b"\n", b"\r\n"))
    other = file_sha256(mine)
    assert main(["train", str(mine), "--config", str(config), "--json"]) == 0
    captured = capsys.readouterr()
    assert (f"warning: {mine} (sha256 {other}) is not the file config {config} trained on, {NAME} (sha256 {sha}); "
            "training on it anyway.") in captured.err.splitlines()
    result = json.loads(captured.out)
    assert result["status"] == "done" and Path(result["model_path"]).is_relative_to(contrastlab_home)
    run = RunStore().get(result["run_id"])
    assert run.config["corpus"] == str(mine) and run.config["examples"] == 16


def test_the_corpus_is_found_by_name_and_checksum(exported, contrastlab_home, tmp_path, monkeypatch):
    config = exported["dir"] / CONFIG_FILE
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    shutil.copy(exported["corpus"], here / NAME)
    assert TrainConfig.from_file(config).corpus == str((here / NAME).resolve())
    (here / NAME).write_text("text,label\nanother,file\n")  # the name, not the contents: not used
    with pytest.raises(UserError, match=f"{here / NAME} has that name but other contents; pass the file") as caught:
        TrainConfig.from_file(config)
    assert len(str(caught.value).splitlines()) == 1
    saved = contrastlab_home / "corpora" / NAME  # where the pages keep uploads
    saved.parent.mkdir(parents=True)
    shutil.copy(exported["corpus"], saved)
    assert TrainConfig.from_file(config).corpus == str(saved.resolve())
    # a given file is used whatever it holds; only the command line's warning (`warn`) says it differs
    heard: list[str] = []
    given = TrainConfig.from_file(config, {"corpus": str(here / NAME)}, heard.append)
    assert given.corpus == str(here / NAME) and len(heard) == 1 and exported["sha"] in heard[0]


def test_a_missing_sts_corpus_is_asked_for_by_its_flag(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"corpus": str(tmp_path / "x.csv"), "sts_corpus": {"name": "sts.csv"}}))
    with pytest.raises(UserError, match=r"trains on sts\.csv, which is not .* pass the file with --sts-corpus PATH"):
        TrainConfig.from_file(path)


@pytest.mark.parametrize(("suffix", "body", "said"), [
    (".yaml", b"", "is empty"),
    (".json", b"  \n", "is empty"),
    (".yaml", b"corpus: [unclosed\n", "Could not read config"),
    (".json", b"corpus: not json", "Could not read config"),
    (".yaml", b"\xff\xfe\x00garbage", "Could not read config"),
    (".yaml", b"just some words\n", "settings must be given as a mapping"),
    (".yaml", b"corpus: [1, 2]\n", "corpus must be a file path or a mapping {name: FILE, sha256: HEX}, got [1, 2]"),
    (".yaml", b"corpus: 5\n", "corpus must be a file path or a mapping"),
    (".yaml", b"corpus: {path: x.csv}\n", "corpus must be a file path or a mapping"),
    (".yaml", b"corpus: {name: x.csv, sha256: abc, size: 3}\n", "corpus must be a file path or a mapping"),
    (".yaml", b"corpus: {name: ../x.csv}\n", "corpus's name must be a file name, without folders"),
    (".yaml", b"corpus: {name: \"a\\nb.csv\"}\n", "corpus's name must be a file name"),
    (".yaml", b"corpus: {name: x.csv, sha256: not-hex}\n", "corpus's sha256 must be 64 hexadecimal digits"),
    (".yaml", b"corpus: {name: x.csv, sha256: 12}\n", "corpus's sha256 must be 64 hexadecimal digits, got 12"),
    (".json", b'{"corpus": {"name": "x.csv", "sha256": "' + b"g" * 64 + b'"}}', "must be 64 hexadecimal digits"),
])
def test_a_hostile_config_file_is_one_line_exit_2(suffix, body, said, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / f"config{suffix}"
    path.write_bytes(body)
    assert main(["train", "--config", str(path)]) == 2
    line = _one_error(capsys)
    assert str(path) in line and said in line, line
