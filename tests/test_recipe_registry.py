"""A recipe is one module plus one registration line: a toy recipe registered in-process gets a CLI flag, config
validation and Train-page widgets with no other file changed. And every setting refuses hostile values (inf, NaN,
negative, wrong type) with one line naming it, before any run is created."""

from __future__ import annotations

import math

import pytest

from core.cli import build_parser, main
from core.cli.training import train_config
from core.data.corpus import demo_corpus_path
from core.errors import UserError
from core.runs.store import RunStore
from core.training.config import GENERAL, TrainConfig
from core.training.params import Param
from core.training.recipe import MINING, Recipe
from core.training.recipes import RECIPES, get_recipe, register

TOY = Recipe("toy", "Toy objective", "triplet", lambda model, cfg: None, knob="margin", params=(
    Param("margin", float, 0.3, "Margin", "The toy's margin.", low=0.0, presets=(0.3, 3.0)),
    Param("toy_param", int, 1, "Toy setting", "Only the toy has it.", low=0, high=10),
    *MINING))


@pytest.fixture
def toy():
    register(TOY)
    yield TOY
    del RECIPES["toy"]


def error_lines(capsys) -> list[str]:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return [line for line in err.strip().splitlines() if line.startswith("error:")]


def test_cli_takes_the_toy_flag_only_for_the_toy(toy, tiny_model_dir, capsys):
    corpus = str(demo_corpus_path())
    args = build_parser().parse_args(["train", corpus, "--model", str(tiny_model_dir), "--recipe", "toy",
                                      "--toy-param", "2"])
    config = train_config(args)
    assert (config["recipe"], config["toy_param"], config["margin"]) == ("toy", 2, 0.3)

    assert main(["train", corpus, "--model", str(tiny_model_dir), "--toy-param", "2"]) == 2  # triplet has none
    [line] = error_lines(capsys)
    assert "toy_param is not a setting of triplet" in line
    assert RunStore().list() == []


def test_config_validates_the_toy_setting(toy):
    assert TrainConfig(corpus="x.csv", recipe="toy", toy_param=4).toy_param == 4
    assert TrainConfig(corpus="x.csv", recipe="toy").toy_param == 1
    with pytest.raises(UserError, match=r"toy_param must be a whole number in \[0, 10\], got 11"):
        TrainConfig(corpus="x.csv", recipe="toy", toy_param=11)
    with pytest.raises(UserError, match="toy_param is not a setting of crop"):
        TrainConfig(corpus="x.csv", recipe="crop", toy_param=4)


def test_train_page_offers_the_toy_and_its_setting(app, toy):
    at = app
    at.run()
    at.switch_page("app_pages/2_Train.py").run()
    assert not at.exception, at.exception
    recipes = at.selectbox(key="train:recipe:Supervised")
    assert "Toy objective" in recipes.options
    recipes.set_value("toy").run()
    assert not at.exception, at.exception
    box = at.number_input(key="train:toy_param")
    assert (box.label, box.value) == ("Toy setting", 1)
    assert at.selectbox(key="train:margin:toy").value == 0.3


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "-1", "abc", "1e999"])
def test_cli_refuses_a_hostile_margin_with_one_line_and_no_run(value, capsys):
    assert main(["train", str(demo_corpus_path()), f"--margin={value}"]) == 2
    [line] = error_lines(capsys)
    assert line.startswith("error: margin must be a finite number >= 0, got")
    assert RunStore().list() == []


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, -1, "x", True, [1], None])
def test_every_numeric_setting_refuses_hostile_values(value):
    numeric = [p for p in (*GENERAL, *get_recipe("triplet").params, *get_recipe("crop").params)
               if p.type in (int, float)]
    for param in numeric:
        if value == -1 and param.low is not None and param.low <= -1:
            continue  # the cosine threshold may be negative
        if value is None and param not in GENERAL:
            continue  # a recipe setting saved as None means its default (configs saved before)
        recipe = "crop" if param.name in ("crop_t", "pairs_per_doc") else "triplet"
        with pytest.raises(UserError, match=f"^{param.name} must be "):
            TrainConfig(corpus="x.csv", recipe=recipe, **{param.name: value})


def test_choices_and_flags_refuse_wrong_values():
    for bad in ({"pooling": "median"}, {"distance": 3}, {"freeze_embeddings": "maybe"}, {"recipe": 7}):
        with pytest.raises(UserError):
            TrainConfig(corpus="x.csv", **bad)
    assert TrainConfig(corpus="x.csv", freeze_embeddings="true").freeze_embeddings is True
    assert TrainConfig(corpus="x.csv", batch_size="8", lr="1e-4").to_dict() == TrainConfig(
        corpus="x.csv", batch_size=8, lr=1e-4).to_dict()  # strings from a flag or a text box are parsed


def test_sweep_values_parse_once_for_cli_and_page():
    knob = get_recipe("triplet").knob_param
    assert knob.parse_list("0.01, 0.1,1,5") == [0.01, 0.1, 1.0, 5.0]
    for bad in ("0.1, inf", "0.1,-1", "a,b", " , "):
        with pytest.raises(UserError):
            knob.parse_list(bad)


def test_configs_saved_before_still_load():
    """Every setting of every recipe was saved flat, None meaning the recipe's default."""
    saved = {"corpus": "x.csv", "text_col": None, "label_col": None, "split_col": None, "documents": None,
             "model": "m", "reference": None, "recipe": "crop", "margin": 50.0, "distance": "cosine", "examples": 100,
             "mine_k": 5, "threshold": 0.5, "crop_t": 3, "pairs_per_doc": 2, "epochs": 1.0, "max_steps": 10,
             "batch_size": 64, "lr": 2e-5, "warmup_ratio": 0.1, "seed": 0, "freeze_embeddings": False,
             "freeze_layers": 0, "pooling": "model", "precision": "auto", "eval_every": 0, "eval_k": 16,
             "device": None}
    cfg = TrainConfig.from_dict(saved)
    assert (cfg.margin, cfg.crop_t, cfg.pairs_per_doc, cfg.max_steps) == (50.0, 3, 2, 10)
    assert "threshold" not in cfg.to_dict()
    triplet = TrainConfig.from_dict({**saved, "recipe": "triplet", "margin": None, "crop_t": 2, "pairs_per_doc": 1})
    assert (triplet.margin, triplet.mine_k) == (0.1, 5)
    with pytest.raises(UserError, match="crop_t is not a setting of triplet"):
        TrainConfig.from_dict({**saved, "recipe": "triplet"})  # crop_t 3 is not a saved default
