"""Multi-granularity hard negatives (issue 11, seed 004): bands mined on real TREC questions (cosines fall from N1 to
N4, negatives of other labels only, ranks within the edges by brute force, seeded, cached), hostile band edges and
orders, the band schedule of every order, the banded loss against sentence-transformers' MNRL, and runs through the
trainer and the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from core.cli import main
from core.data.bands import EDGES, BandSettings, band_negatives, band_ranges, build_banded, mine_bands, parse_edges
from core.data.corpus import load_corpus
from core.data.mining import MiningSettings, unit_rows
from core.errors import UserError
from core.losses.mgh import BandedMNRLoss
from core.models.encode import encode
from core.runs.store import RunStore
from core.training.config import TrainConfig
from core.training.mgh import ORDERS, band_at, band_callback, band_phases, banded_examples
from core.training.recipes import get_recipe
from core.training.trainer import run_training
from tests.conftest import shared_data

TREC_ROWS = 1200
SETTINGS = BandSettings(EDGES, MiningSettings(k=5, threshold=0.5, max_examples=2000, seed=0))
TIES = 1e-5  # FAISS and numpy round float32 cosines differently: ranks are compared with this slack

# ---------------------------------------------------------------- bands on real TREC questions


@pytest.fixture(scope="module")
def trec() -> SimpleNamespace:
    """1,200 distinct TREC training questions (so a text maps back to one row) and their frozen MiniLM embeddings.
    Encoded without the disk cache: the per-test ContrastLab home does not exist yet at module scope."""
    from core.models.loading import load_model

    df = pd.read_csv(shared_data("trec.csv"))
    df = df[df["split"] == "train"].drop_duplicates("text").sample(TREC_ROWS, random_state=0)
    model = load_model("all-MiniLM-L6-v2", "cpu")
    texts = df["text"].tolist()
    emb = unit_rows(encode(model, texts).embeddings)
    return SimpleNamespace(model=model, texts=texts, labels=pd.factorize(df["label"])[0], emb=emb,
                           row_of={t: i for i, t in enumerate(texts)})


@pytest.fixture(scope="module")
def banded(trec):
    return build_banded(trec.texts, trec.labels, trec.emb, SETTINGS)


def rank_span(emb: np.ndarray, labels: np.ndarray, anchor: int, negative: int) -> tuple[int, int]:
    """0-based positions the negative can hold in its anchor's other-label texts sorted by cosine, nearest first
    (a span: near-ties may sort either way)."""
    sims = emb[labels != labels[anchor]] @ emb[anchor]
    cos = float(emb[anchor] @ emb[negative])
    return int((sims > cos + TIES).sum()), int((sims >= cos - TIES).sum()) - 1


def test_band_cosines_fall_from_n1_to_n4(banded):
    frame, stats = banded.frame, banded.stats
    means = [frame[f"c{b}"].mean() for b in range(1, 5)]
    assert means[0] > means[1] > means[2] > means[3]
    np.testing.assert_allclose(stats["band_cosine"], means, atol=1e-4)
    cos = frame[["c1", "c2", "c3", "c4"]].to_numpy()
    assert np.isfinite(cos).all() and (np.diff(cos, axis=1) <= TIES).all()  # disjoint ranks: every row falls too
    assert stats["examples"] == len(frame) > 300 and stats["anchors_used"] > 200
    assert stats["edges"] == list(EDGES) and stats["anchors"] == TREC_ROWS


def test_negatives_never_share_the_anchors_label_and_positives_always_do(trec, banded):
    label = dict(zip(trec.texts, trec.labels))
    for row in banded.frame.itertuples():
        negatives = [row.n1, row.n2, row.n3, row.n4]
        assert all(label[n] != label[row.anchor] for n in negatives)
        assert row.anchor not in negatives and row.positive != row.anchor
        assert label[row.positive] == label[row.anchor]


def test_each_negative_lies_within_its_bands_ranks_by_brute_force(trec, banded):
    """Every anchor of the sample: recompute the rank of each drawn negative among the other-label texts."""
    rows, cos = band_negatives(trec.emb, trec.labels, trec.texts, EDGES, seed=0)
    assert (rows >= 0).all()  # 1,200 questions: every anchor has 100 other-label texts
    positions = np.zeros((TREC_ROWS, 4), dtype=np.int64)
    for a in range(TREC_ROWS):
        for b, (start, stop) in enumerate(band_ranges(EDGES)):
            low, high = rank_span(trec.emb, trec.labels, a, rows[a, b])
            assert low < stop and high >= start, (a, b, low, high)
            positions[a, b] = low
        np.testing.assert_allclose(cos[a], trec.emb[a] @ trec.emb[rows[a]].T, atol=1e-4)
    counts = np.bincount(positions[:, 0], minlength=5)  # drawn uniformly within N1, not always the nearest
    assert counts.min() > 0.6 * TREC_ROWS / 5 and counts.max() < 1.4 * TREC_ROWS / 5

    frame = banded.frame  # the cached frame's texts and cosines are the same draw
    for row in frame.drop_duplicates("anchor").head(50).itertuples():
        a = trec.row_of[row.anchor]
        assert [trec.row_of[t] for t in (row.n1, row.n2, row.n3, row.n4)] == rows[a].tolist()
        np.testing.assert_allclose([row.c1, row.c2, row.c3, row.c4], cos[a], atol=1e-6)


def test_the_draw_is_seeded(trec, banded):
    again = build_banded(trec.texts, trec.labels, trec.emb, SETTINGS)
    pd.testing.assert_frame_equal(again.frame, banded.frame)
    other = BandSettings(EDGES, MiningSettings(k=5, threshold=0.5, max_examples=2000, seed=1))
    assert not build_banded(trec.texts, trec.labels, trec.emb, other).frame.equals(banded.frame)
    first, _ = band_negatives(trec.emb, trec.labels, trec.texts, EDGES, seed=0)
    second, _ = band_negatives(trec.emb, trec.labels, trec.texts, EDGES, seed=1)
    assert (first != second).mean() > 0.5  # 1 in 5 (N1) to 1 in 50 (N4) would match by chance


def test_mining_is_cached_and_keyed_by_the_edges(trec, monkeypatch):
    calls = []

    def encoded_once(model, texts, **_kw):
        calls.append(len(texts))
        return trec.emb

    monkeypatch.setattr("core.data.bands.encode_cached", encoded_once)
    first = mine_bands(trec.model, trec.texts, trec.labels, SETTINGS)

    def no_encoding(*_a, **_kw):
        raise AssertionError("encoded again")

    monkeypatch.setattr("core.data.bands.encode_cached", no_encoding)
    second = mine_bands(trec.model, trec.texts, trec.labels, SETTINGS)
    pd.testing.assert_frame_equal(second.frame, first.frame)
    assert second.stats == first.stats and calls == [TREC_ROWS]
    with pytest.raises(AssertionError, match="encoded again"):  # other edges: another cache entry
        mine_bands(trec.model, trec.texts, trec.labels, BandSettings((4, 20, 50, 100), SETTINGS.positives))


# ---------------------------------------------------------------- bands on made-up embeddings


def random_unit(n: int, seed: int = 0, dim: int = 16) -> np.ndarray:
    return unit_rows(np.random.default_rng(seed).normal(size=(n, dim)))


def test_a_text_identical_to_the_anchor_is_never_its_negative():
    """The same text under another label has cosine 1, rank 1: it is skipped, so N1 (ranks 1-2) is rank 2."""
    texts = [f"text {i}" for i in range(12)]
    labels = np.array([0] * 6 + [1] * 6)
    emb = random_unit(12)
    texts[7], emb[7] = texts[0], emb[0]  # text 0 again, labelled 1
    rows, cos = band_negatives(emb, labels, texts, (2, 3, 4, 5), seed=0)
    assert 7 not in rows[0] and 0 not in rows[7] and (rows >= 0).all()
    nearest = 6 + np.argsort(-(emb[6:] @ emb[0]))  # text 0's other-label texts, nearest first: 7 (itself), ...
    assert nearest[0] == 7 and rows[0, 0] == nearest[1] and (cos[0] < 1 - 1e-4).all()
    assert (rows[labels == 0] >= 6).all() and (rows[labels == 1] < 6).all()


def test_anchors_short_of_other_label_texts_are_left_out_and_counted():
    """Class 0 (20 texts) sees 2 texts of class 1, fewer than the 10 the bands need; class 1 sees 20."""
    texts = [f"text {i}" for i in range(22)]
    labels = np.array([0] * 20 + [1] * 2)
    settings = BandSettings((1, 2, 3, 10), MiningSettings(k=1, threshold=-1.0, max_examples=100))
    rows, _ = band_negatives(random_unit(22), labels, texts, settings.edges, seed=0)
    assert (rows[:20, 2:] == -1).all() and (rows[20:] >= 0).all()
    examples = build_banded(texts, labels, random_unit(22), settings)
    assert set(examples.frame["anchor"]) == {"text 20", "text 21"}  # never texts[-1] for a missing band
    assert examples.stats["anchors_without_band"] == 20 and examples.stats["anchors_used"] == 2


def test_a_corpus_too_small_for_the_bands_says_to_lower_the_edges():
    texts = [f"text {i}" for i in range(30)]
    labels = np.arange(30) % 3  # 20 other-label texts per anchor, the default N4 starts at rank 51
    with pytest.raises(UserError, match="lower the band edges"):
        build_banded(texts, labels, random_unit(30), SETTINGS)


@pytest.mark.parametrize(("bands", "fits"), [("5,10,20,48", True), ("5,10,20,49", False), ("1,2,3,4", True)])
def test_the_recipe_checks_the_last_band_against_the_other_label_texts_before_mining(tmp_path, bands, fits):
    corpus = load_corpus(labelled_csv(tmp_path))  # 12, 24, 24 training texts: at most 48 of other labels
    need = get_recipe("mgh").needs(TrainConfig(corpus="x.csv", recipe="mgh", bands=bands), corpus)
    assert (need is None) == fits, need
    assert fits or (need.startswith("labelled is too small for the bands") and "\n" not in need)


def test_a_run_on_too_small_a_corpus_is_refused_in_one_sentence(tmp_path, tiny_model):
    corpus = load_corpus(labelled_csv(tmp_path))
    cfg = TrainConfig(corpus="x.csv", recipe="mgh", threshold=-1.0)  # default bands 5,20,50,100
    with pytest.raises(UserError, match="lower the band edges") as err:
        banded_examples(cfg, corpus, tiny_model, "banded")
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------- settings


@pytest.mark.parametrize("value", ["", "   ", "5,20,50", "5,20,50,100,200", "5,5,20,50", "20,5,50,100", "0,5,10,20",
                                   "-1,5,20,50", "5,20,50,1e9", "5,20,50,20000", "nan,1,2,3", "5,20,50,inf", "inf",
                                   "5,20,50,100,", "5.5,20,50,100", "a,b,c,d", "1" + ",2" * 100_000,
                                   [5, 20, 50, 100], 5, 5.0, True, {"n1": 5}])
def test_bad_band_edges_are_refused_naming_bands(value):
    with pytest.raises(UserError, match="bands") as err:
        TrainConfig(corpus="x.csv", recipe="mgh", bands=value)
    assert "\n" not in str(err.value)


def test_a_huge_bands_value_is_refused_in_a_short_line():
    with pytest.raises(UserError, match="bands") as err:
        TrainConfig(corpus="x.csv", recipe="mgh", bands="1" + ",2" * 100_000)
    assert len(str(err.value)) < 400


def test_band_edges_are_normalised():
    assert TrainConfig(corpus="x.csv", recipe="mgh", bands=" 5, 20 ,50,100 ").bands == "5,20,50,100"
    assert TrainConfig(corpus="x.csv", recipe="mgh").bands == "5,20,50,100"
    assert parse_edges("1,2,3,10000") == (1, 2, 3, 10_000) and parse_edges([1, 2, 3, 4]) == (1, 2, 3, 4)


@pytest.mark.parametrize("value", ["fixed:5", "fixed:0", "fixed:", "fixed:1.0", "fixed:-1", "curriculm", "Curriculum",
                                   "", " ", 1, 4.0, True, ["curriculum"], {"order": "random"}])
def test_bad_orders_are_refused_naming_order(value):
    with pytest.raises(UserError, match="order") as err:
        TrainConfig(corpus="x.csv", recipe="mgh", order=value)
    assert "\n" not in str(err.value)


def test_every_order_is_accepted_and_none_means_the_default():
    assert [TrainConfig(corpus="x.csv", recipe="mgh", order=o).order for o in ORDERS] == list(ORDERS)
    # configs saved before a setting existed hold None for "the recipe's default" (core.training.config._checked)
    assert TrainConfig(corpus="x.csv", recipe="mgh", order=None, bands=None).to_dict() == TrainConfig(
        corpus="x.csv", recipe="mgh").to_dict()
    assert set(ORDERS) == {"curriculum", "random", "reverse", "fixed:1", "fixed:2", "fixed:3", "fixed:4"}


# ---------------------------------------------------------------- schedule


def bands_by_step(order: str, seed: int = 0, total: int = 100) -> list[int]:
    """The band a fake loss holds at each step, as the callback sets it before the step (as the trainer calls it)."""
    loss = SimpleNamespace(band=None)
    callback = band_callback(loss, order, seed)
    seen = []
    for step in range(total):
        callback.on_step_begin(None, SimpleNamespace(global_step=step, max_steps=total), None)
        seen.append(loss.band)
    return seen


def test_curriculum_goes_from_n4_to_n1_by_quarters_and_reverse_the_other_way():
    assert bands_by_step("curriculum") == [4] * 25 + [3] * 25 + [2] * 25 + [1] * 25
    assert bands_by_step("reverse") == [1] * 25 + [2] * 25 + [3] * 25 + [4] * 25
    assert bands_by_step("curriculum", total=8) == [4, 4, 3, 3, 2, 2, 1, 1]
    assert bands_by_step("curriculum", total=1) == [4] and bands_by_step("reverse", total=1) == [1]
    assert bands_by_step("curriculum", total=3) == [4, 3, 2] and bands_by_step("reverse", total=3) == [1, 2, 3]
    for total in (4, 7, 10, 101):  # every band gets its share, in order, whatever the total
        steps = bands_by_step("curriculum", total=total)
        assert steps == sorted(steps, reverse=True) and steps[0] == 4 and steps[-1] == 1
        assert max(map(steps.count, range(1, 5))) - min(map(steps.count, range(1, 5))) <= 1


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_fixed_always_uses_its_band(k):
    assert bands_by_step(f"fixed:{k}", seed=k) == [k] * 100


def test_random_is_seeded_and_covers_every_band():
    first = bands_by_step("random", seed=0)
    assert first == bands_by_step("random", seed=0) and set(first) == {1, 2, 3, 4}
    assert first != bands_by_step("random", seed=1)
    assert min(first.count(b) for b in range(1, 5)) >= 10  # drawn evenly, 25 expected each
    assert band_at("random", 7, 100, seed=3) == band_at("random", 7, 10, seed=3)  # per step, not per total


def test_an_unknown_order_is_a_value_error():
    with pytest.raises(ValueError, match="unknown order"):
        band_at("sideways", 0, 10)


def test_band_phases_mark_each_quarter():
    assert band_phases("curriculum", 100) == [{"step": 0, "label": "N4"}, {"step": 25, "label": "N3"},
                                              {"step": 50, "label": "N2"}, {"step": 75, "label": "N1"}]
    assert [p["label"] for p in band_phases("reverse", 100)] == ["N1", "N2", "N3", "N4"]
    assert [p["step"] for p in band_phases("reverse", 100)] == [0, 25, 50, 75]
    for order in ("random", "fixed:1", "fixed:4"):
        assert band_phases(order, 100) == []


@pytest.mark.parametrize("order", ["curriculum", "reverse"])
@pytest.mark.parametrize("total", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 99, 100, 101, 1000])
def test_band_phases_are_exactly_where_the_schedule_changes_band(order, total):
    bands = [band_at(order, s, total) for s in range(total)]
    changes = [{"step": s, "label": f"N{b}"} for s, b in enumerate(bands) if s == 0 or b != bands[s - 1]]
    assert band_phases(order, total) == changes


@pytest.mark.parametrize("total", [0, 1, 2, 3])
def test_band_phases_of_tiny_runs_never_point_past_the_run(total):
    for order in ("curriculum", "reverse"):
        phases = band_phases(order, total)
        assert all(0 <= p["step"] < total and p["label"] == f"N{band_at(order, p['step'], total)}" for p in phases)


# ---------------------------------------------------------------- loss


COLUMNS = [
    ["the cat sat on the mat", "a dog ran in the park", "music played all night"],
    ["a cat on a mat", "the dog in a park", "the night of music"],
    ["the river near the house", "a tree by the road", "bread and water"],
    ["the king of the north", "a ship on the sea", "the city at night"],
    ["five red birds", "a long story", "the school bell"],
    ["the market was open", "rain in the morning", "a horse in the field"],
]


def features(model, columns: list[list[str]]) -> list[dict]:
    return [model.tokenize(texts) for texts in columns]


@pytest.fixture
def frozen(tiny_model):
    """The shared tiny model without dropout, so two forward passes give the same embeddings."""
    was_training = tiny_model.training
    tiny_model.eval()
    yield tiny_model
    tiny_model.train(was_training)


@pytest.mark.parametrize("band", [1, 2, 3, 4])
def test_banded_loss_is_mnrl_on_the_bands_column(frozen, band):
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    feats = features(frozen, COLUMNS)
    with torch.no_grad():
        got = BandedMNRLoss(frozen, scale=20.0, band=band)(feats, None)
        want = MultipleNegativesRankingLoss(frozen, scale=20.0)([feats[0], feats[1], feats[1 + band]], None)
        other = MultipleNegativesRankingLoss(frozen, scale=20.0)([feats[0], feats[1], feats[1 + band % 4 + 1]], None)
        cooler = BandedMNRLoss(frozen, scale=5.0, band=band)(feats, None)
    assert got.item() == pytest.approx(want.item(), rel=1e-6)
    assert abs(got.item() - other.item()) > 1e-5 and abs(got.item() - cooler.item()) > 1e-5


class Recording(torch.nn.Module):
    """The model, recording the token ids of every column it embeds."""

    def __init__(self, model) -> None:
        super().__init__()
        self.model = model
        self.seen: list[torch.Tensor] = []

    def forward(self, feature: dict) -> dict:
        self.seen.append(feature["input_ids"])
        return self.model(feature)


def test_only_the_current_bands_negative_is_embedded(frozen):
    from sentence_transformers.base.losses import column_merging_disabled

    recording = Recording(frozen)
    loss = BandedMNRLoss(recording, scale=20.0)
    feats = features(frozen, COLUMNS)
    embedded = []
    with torch.no_grad(), column_merging_disabled():  # one forward per column, so each is seen on its own
        for band in (4, 1, 3, 2):
            loss.band = band
            recording.seen.clear()
            loss(feats, None)
            embedded.append(recording.seen[:])
    for band, seen in zip((4, 1, 3, 2), embedded):
        assert len(seen) == 3
        for ids, column in zip(seen, (0, 1, 1 + band)):
            assert torch.equal(ids, feats[column]["input_ids"])
    assert loss.get_config_dict() == {"scale": 20.0, "band": 2}


@pytest.mark.parametrize("n_columns", [2, 3, 5, 7])
def test_a_batch_without_four_band_columns_is_a_value_error(frozen, n_columns):
    feats = features(frozen, (COLUMNS * 2)[:n_columns])
    with pytest.raises(ValueError, match=f"4 band negatives, got {n_columns} columns"):
        BandedMNRLoss(frozen)(feats, None)


@pytest.mark.parametrize("band", [0, 5, -1])
def test_a_band_outside_1_to_4_is_a_value_error(frozen, band):
    with pytest.raises(ValueError, match="band"):
        loss = BandedMNRLoss(frozen)
        loss.band = band
        loss(features(frozen, COLUMNS), None)


# ---------------------------------------------------------------- the recipe's examples and runs


THINGS = ["cat", "dog", "car", "tree", "house", "river", "music", "bread", "stone", "cloud"]
LABELS = ["animal", "place", "sound"]


def labelled_csv(tmp_path: Path) -> Path:
    """72 distinct texts in 3 classes, every sixth a test row (all of the first class): 12, 24 and 24 training
    texts, so 36 to 48 of other labels."""
    rows = [{"text": f"the {THINGS[i % 10]} and the {LABELS[i % 3]} near the {THINGS[(3 * i + 1) % 10]} {i}",
             "label": LABELS[i % 3], "split": "test" if i % 6 == 0 else "train"} for i in range(72)]
    path = tmp_path / "labelled.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_banded_examples_hold_six_text_columns_and_preview_one_anchor(tmp_path, tiny_model):
    corpus = load_corpus(labelled_csv(tmp_path))
    cfg = TrainConfig(corpus="x.csv", recipe="mgh", bands="1,2,3,4", threshold=-1.0, examples=50, order="reverse")
    dataset, stats = banded_examples(cfg, corpus, tiny_model, "banded")
    assert dataset.column_names == ["anchor", "positive", "n1", "n2", "n3", "n4"] and len(dataset) == 50
    assert stats["order"] == "reverse" and stats["edges"] == [1, 2, 3, 4] and stats["examples"] == 50
    preview = stats["preview"]
    assert [p["role"] for p in preview] == ["anchor", "positive", "N1", "N2", "N3", "N4"]
    assert [p["text"] for p in preview] == [dataset[0][c] for c in dataset.column_names]
    emb = unit_rows(encode(tiny_model, [p["text"] for p in preview]).embeddings)
    np.testing.assert_allclose([p["cosine"] for p in preview[2:]], emb[2:] @ emb[0], atol=1e-3)
    assert preview[2]["cosine"] >= preview[3]["cosine"] >= preview[4]["cosine"] >= preview[5]["cosine"]
    label = dict(zip(corpus.train_texts, corpus.train_labels))
    row = dataset[0]
    assert label[row["positive"]] == label[row["anchor"]] != label[row["n1"]]


class Recorder:
    """A Reporter (core.training.trainer) keeping what a run reports."""

    def __init__(self) -> None:
        self.fields: dict = {}
        self.losses: list[tuple[int, float]] = []

    def progress(self, **fields) -> None:
        self.fields.update(fields)

    def should_stop(self) -> bool:
        return False

    def log_loss(self, step: int, loss: float) -> None:
        self.losses.append((step, loss))

    def log_eval(self, point: dict) -> None:
        pass


@pytest.mark.parametrize("budget", [{"examples": 64, "max_steps": 8}, {"examples": 30, "epochs": 1.0}],
                         ids=["max_steps", "one_epoch_of_8_batches"])
def test_a_curriculum_run_trains_n4_to_n1_and_reports_its_phases(tmp_path, tiny_model_dir, monkeypatch, budget):
    """The trainer's own step count (state.max_steps) steers the bands; the phases drawn on the loss curve come from
    core.training.trainer.total_steps: both must say 8 steps, with max_steps or with an epoch of the examples."""
    from core.models.loading import load_model

    bands: list[int] = []
    forward = BandedMNRLoss.forward

    def recorded(self, sentence_features, labels):
        bands.append(self.band)
        return forward(self, sentence_features, labels)

    monkeypatch.setattr(BandedMNRLoss, "forward", recorded)
    cfg = TrainConfig(corpus=str(labelled_csv(tmp_path)), model=str(tiny_model_dir), recipe="mgh", order="curriculum",
                      bands="1,2,3,4", threshold=-1.0, batch_size=4, device="cpu", **budget)
    reporter = Recorder()
    result = run_training(cfg, reporter, tmp_path / "work")
    assert bands == [4, 4, 3, 3, 2, 2, 1, 1] and result["steps"] == 8
    assert reporter.fields["phases"] == [{"step": 0, "label": "N4"}, {"step": 2, "label": "N3"},
                                         {"step": 4, "label": "N2"}, {"step": 6, "label": "N1"}]
    assert reporter.losses and all(np.isfinite(loss) for _step, loss in reporter.losses)
    stats = result["examples"]
    assert stats["order"] == "curriculum" and len(stats["band_cosine"]) == 4 and len(stats["preview"]) == 6
    model = load_model(str(tmp_path / "work" / "model"), "cpu")
    assert np.isfinite(model.encode(["the cat near the river"])).all()
    card = (tmp_path / "work" / "model" / "README.md").read_text()
    assert "mgh" in card and "curriculum" in card


def test_cli_trains_mgh_in_reverse(tmp_path, tiny_model_dir, capsys):
    code = main(["train", str(labelled_csv(tmp_path)), "--model", str(tiny_model_dir), "--recipe", "mgh", "--order",
                 "reverse", "--bands", "1,2,3,4", "--threshold=-1", "--examples", "32", "--max-steps", "4",
                 "--batch-size", "4", "--json", "--foreground"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["status"] == "done"
    run = RunStore().get(out["run_id"])
    assert run.config["order"] == "reverse" and run.config["bands"] == "1,2,3,4"
    assert run.progress["phases"] == [{"step": s, "label": f"N{s + 1}"} for s in range(4)]
    assert run.progress["summary"]["steps"] == 4 and run.losses


@pytest.mark.parametrize(("args", "message"), [
    (["--order", "fixed:9"], "order must be one of"),
    (["--bands", "5,20,50"], "bands must be four increasing"),
    (["--bands", "nan,1,2,3"], "bands must be four increasing"),
    ([], "too small for the bands 5,20,50,100"),  # at most 48 other-label texts per anchor: refused before encoding
    (["--bands", "5,10,20,49"], "no training text has more than 48 other-label texts"),
])
def test_cli_refuses_a_bad_order_or_bands_in_one_line_without_a_run(tmp_path, args, message, capsys):
    assert main(["train", str(labelled_csv(tmp_path)), "--recipe", "mgh", *args]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.strip().splitlines() if not line.startswith("warning: ")]  # the test set's size
    assert "Traceback" not in err and message in err and len(errors) == 1
    assert RunStore().list() == []
