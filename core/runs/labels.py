"""How a run is named wherever it appears: pickers, legends, tables, filters, the sidebar, trade-off points.

One home, so every page names a run the same way; what a recipe's knob is called (margin, scale) and its
default come from the recipe registry, never from a copy.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Collection, Iterable
from pathlib import Path

from core.runs.store import Run
from core.storage import corpora_dir
from core.training.config import resolved
from core.training.recipes import RECIPES

_SAVED_COPY = re.compile(r"[0-9a-f]{16}")  # data.content.persist_table's content-hash file names
# Settings of where and how a run was executed or exported, not of what it trained: two runs differing only there
# trained the same model, so labels never name them. trade_off_only leaves out figures, and changes none.
_NOT_TRAINING = frozenset({"device", "nproc", "nnodes", "node_rank", "master_addr", "master_port", "eval_every",
                           "card_examples", "report_to", "trade_off_only"})


def knob_value(config: dict) -> float | None:
    """The value of the recipe's knob (margin or scale) in a train config: its own, else the recipe's default;
    None when the recipe has no knob (an unknown recipe: the config's "margin", as saved)."""
    recipe = RECIPES.get(config.get("recipe", ""))
    if recipe is None:
        return config.get("margin")
    if recipe.knob_param is None:
        return None
    value = config.get(recipe.knob)
    return recipe.knob_param.default if value is None else value


def knob_name(recipe: str) -> str | None:
    """What a recipe's knob is called in labels ('margin', 'scale'); None without one."""
    knob = RECIPES[recipe].knob_param if recipe in RECIPES else None
    return knob.phrase if knob else None


def recipe_text(run: Run) -> str:
    if run.kind == "sweep":
        return ", ".join(run.config.get("recipes", []))
    return str(run.config.get("recipe", ""))


def recipes_of(run: Run) -> list[str]:
    """The recipes a run trained with: one, or a sweep's several."""
    return list(run.config.get("recipes", [])) if run.kind == "sweep" else [str(run.config.get("recipe", ""))]


def corpus_path(run: Run) -> str | None:
    """The corpus file a run trained on (a sweep: its base config's), as saved in its config."""
    config = run.config.get("base", {}) if run.kind == "sweep" else run.config
    corpus = config.get("corpus") if isinstance(config, dict) else None
    return str(corpus) if corpus else None


def corpus_names(runs: Iterable[Run]) -> dict[str, str]:
    """A readable name for each corpus file the runs trained on: the name a run recorded for it (the newest; an
    upload's file name), else the file's stem, or 'saved table <hash>' for an unnamed saved copy of an upload. Two
    files that would share a name are told apart by their hash or path, so a filter never merges two corpora."""
    recorded: dict[str, str] = {}
    for run in sorted(runs, key=lambda r: r.created, reverse=True):
        path = corpus_path(run)
        if path is not None and not recorded.get(path):  # unseen, or seen only without a name so far
            recorded[path] = run.corpus_name or ""
    names = {path: name or (f"saved table {_saved_hash(path)}" if _saved_hash(path) else Path(path).stem or path)
             for path, name in recorded.items()}
    shared = {name for name in names.values() if list(names.values()).count(name) > 1}
    return {path: f"{name} ({_saved_hash(path) or path})" if name in shared else name for path, name in names.items()}


def _saved_hash(path: str) -> str | None:
    """The start of the content hash of a saved copy of an upload (data.content.persist_table); None for another
    file."""
    file = Path(path)
    if file.parent.name == corpora_dir().name and _SAVED_COPY.fullmatch(file.stem):
        return file.stem[:8]
    return None


def select_runs(runs: Iterable[Run], recipes: Collection[str] = (), corpora: Collection[str] = (),
                tags: Collection[str] = ()) -> list[Run]:
    """The runs that match every filter given, an empty filter matching all: one of the recipes (a sweep by any of
    its own), one of the corpus files, one of the tags."""
    return [run for run in runs
            if (not recipes or set(recipes_of(run)) & set(recipes))
            and (not corpora or corpus_path(run) in corpora)
            and (not tags or set(run.tags) & set(tags))]


def knob_text(run: Run) -> str:
    """'margin 0.1', 'scale 20', 'margins 0.1, 1' for a sweep; '' when the recipe has no knob."""
    if run.kind == "sweep":
        names = {knob_name(r) for r in run.config.get("recipes", [])} - {None}
        first = (run.config.get("recipes") or [""])[0]
        key = RECIPES[first].knob if first in RECIPES else "margin"
        values = [knob_value({"recipe": first, key: m}) for m in run.config.get("margins", [])]
        shown = ", ".join("default" if v is None else f"{v:g}" for v in values)
        return f"{'/'.join(sorted(names)) or 'margin'}s {shown}" if shown else ""
    name, value = knob_name(run.config.get("recipe", "")), knob_value(run.config)
    if name is None or value is None:
        return ""
    return f"{name} {value:g}"


def shown_text(run: Run) -> str:
    """The settings the recipe names in labels beside its knob ('order curriculum'); '' for none or a sweep."""
    recipe = RECIPES.get(run.config.get("recipe", ""))
    if recipe is None or run.kind == "sweep":
        return ""
    return " · ".join(f"{recipe.param(name).phrase} {run.config.get(name, recipe.param(name).default)}"
                      for name in recipe.shown)


def own_settings_text(run: Run, sep: str = " · ") -> str:
    """The recipe's own settings that are not at their default, beyond its knob and shown settings ('teacher score'):
    what tells a run apart from its recipe's other runs wherever it stands alone (the run panel's header, the export
    folder's name), with no other runs to compare with; '' for none or a sweep."""
    recipe = RECIPES.get(run.config.get("recipe", ""))
    if recipe is None or run.kind == "sweep":
        return ""
    named = {recipe.knob, *recipe.shown}
    return sep.join(f"{p.name.replace('_', ' ')} {_setting_text(run.config[p.name])}" for p in recipe.params
                    if p.name not in named and p.name in run.config and run.config[p.name] != p.default)


def _setting_text(value: object) -> str:
    """A setting's value as labels show it: a file or model folder by its name, a number without trailing zeros."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, default=str)
    text = str(value)
    return Path(text).name or text if "/" in text else text


def differences(runs: Iterable[Run], ignore: Collection[str] = ()) -> dict[str, str]:
    """Per train run, the settings in which it differs from the other runs of its recipe among `runs` ('teacher
    score', 'seed 1 · lr 0.0001'), beyond its knob and the recipe's shown settings, which its label always names;
    '' where it differs in none. Settings are compared as each run trained (defaults filled in, the reference
    resolved), so a setting left at its default is not a difference, and one a run leaves empty is not named for it;
    `ignore`: settings the caller shows apart."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        if run.kind != "sweep":
            groups.setdefault(str(run.config.get("recipe", "")), []).append(run)
    out: dict[str, str] = {}
    for recipe, group in groups.items():
        configs = {r.id: {k: _setting_text(v) for k, v in resolved(r.config).items()} for r in group}
        shown = {run_id: dict(config) for run_id, config in configs.items()}
        _corpus_settings(group, configs, shown)
        named = {RECIPES[recipe].knob, *RECIPES[recipe].shown} if recipe in RECIPES else set()
        keys = [k for k in dict.fromkeys(k for c in configs.values() for k in c)
                if k not in named | _NOT_TRAINING | set(ignore) and len({c.get(k, "–") for c in configs.values()}) > 1]
        for r in group:  # a setting this run leaves empty is no name for it ("label col –")
            out[r.id] = " · ".join(f"{k.replace('_', ' ')} {value}" for k in keys
                                   if (value := shown[r.id].get(k, "–")) != "–")
    return out


def _corpus_settings(group: list[Run], configs: dict[str, dict], shown: dict[str, dict]) -> None:
    """The corpus setting compared by the content the runs read (the corpus fingerprint a finished run recorded for
    its file), so an upload's copy and the original file are one corpus, and shown by its name (corpus_names), never
    by the copy's hash."""
    names = corpus_names(group)
    read = {corpus_path(r): fingerprint for r in group
            if (fingerprint := ((r.progress or {}).get("summary") or {}).get("corpus", {}).get("fingerprint"))}
    for r in group:
        path = corpus_path(r)
        if path is not None:
            configs[r.id]["corpus"] = read.get(path, path)
            shown[r.id]["corpus"] = names.get(path, path)


def run_label(run: Run, differs: str = "") -> str:
    """Recipe, knob, shown settings, what else `differs` from the runs beside it (differences), and id ('triplet ·
    margin 0.1 · <id>'); a sweep says so, an unfinished run its status."""
    parts = [f"sweep of {recipe_text(run)}" if run.kind == "sweep" else recipe_text(run) or run.kind,
             knob_text(run), shown_text(run), differs, run.id, "" if run.status == "done" else run.status]
    return " · ".join(p for p in parts if p)


def run_labels(runs: Iterable[Run]) -> dict[str, str]:
    """run_label of each run, naming every setting in which it differs from the other runs shown with it."""
    runs = list(runs)
    differ = differences(runs)
    return {r.id: run_label(r, differ.get(r.id, "")) for r in runs}


def run_reference(run: Run) -> str:
    """The model a run was compared against while training: its reference, else its base model."""
    return run.config.get("reference") or run.config["model"]


def duration_s(run: Run) -> float | None:
    """Wall time from start to finish (to now while running)."""
    if run.started is None:
        return None
    return (run.finished or time.time()) - run.started
