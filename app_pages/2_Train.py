"""Train page: choose a recipe, its margin, the examples and the budget (widgets generated from the recipe's
and the general settings' schema); preview the examples; start a background run (or a margin sweep) and watch
it live. The run belongs to a worker process, so a reload or a second tab shows the same run."""

from dataclasses import asdict
from pathlib import Path

import streamlit as st

import ui
from core.data.content import persist_table
from core.data.corpus import demo_documents_path, detect_columns
from core.data.kinds import KINDS, kind_of
from core.data.lists import load_lists, size_range
from core.data.negatives import load_negatives
from core.data.table import read_table
from core.errors import UserError
from core.jobs.ray_sweep import ray_available
from core.jobs.sweep import MAX_SEEDS, SEEDS, sweep_config
from core.training.config import GENERAL_PARAMS, TRACKERS, TrainConfig, general_default, nproc_choice
from core.training.listmle import LIST_SIZE
from core.training.paper_budget import paper_budget_note_for
from core.training.params import Param
from core.training.raoe import interval_text, self_distillation_note
from core.training.recipe import MINING, Recipe
from core.training.recipes import RECIPES
from ui import resources, run_control, run_panel
from ui.corpus_view import (
    EXAMPLE_TEXTS,
    band_preview_frame,
    band_ranks,
    list_preview_frame,
    with_text_labels,
)

GROUPS = {"Supervised": False, "Self-supervised": True}
DOC_SOURCES = ("Demo documents", "The current corpus", "Upload documents")
# A recipe's own training file (mgh's negatives, listmle's lists): the corpus's own data first (None), then the file
# the Generate page handed over, then an upload; each file read as its run will read it.
TRAINING_FILES = {
    "negatives": (("Mine bands from the corpus", "The generated negatives", "Upload a negatives file"),
                  "Negatives table (query, positive, negative_1..negative_4)", load_negatives),
    "lists": (("The corpus's own lists", "The generated lists", "Upload a list file"),
              "List table (list_id, rank, text)", load_lists),
}
ENGINES = ("Local", "Ray")
PREVIEW_ROWS = 20
EXAMPLE_COLUMNS = 4  # settings per row in the examples box: more squeeze their labels onto two lines
BUDGET = (("epochs", "batch_size", "lr", "warmup_ratio"), ("seed", "max_steps", "eval_every", "pooling"),
          ("freeze_layers", "top_layers", "precision", "freeze_embeddings"), ("card_examples", "report_to"))
KEYS = {"mine_k": "k", "batch_size": "batch", "warmup_ratio": "warmup", "documents": "docs"}  # widget keys kept

store = ui.run_store()
shown = run_control.current_run(store)
st.title("Train")
st.caption("Fine-tune a copy of the reference model in a background process. Supervised recipes train on "
           "examples mined from the labels with the frozen reference model (on a pair corpus: on its pairs; ListMLE: "
           "on ranked lists); self-supervised ones on crops of multi-sentence documents.")


def _keep(key: str) -> dict:
    """Widget key arguments: the value survives a visit to another page."""
    return {"key": f"train:{key}", "persist_state": "session"}


def choose_recipe(kind: str) -> Recipe:
    """The recipes that train on this corpus kind ("labelled", "pairs" or "lists"), grouped; groups without one are
    left out."""
    usable = {name: r for name, r in RECIPES.items() if kind in r.kinds}
    groups = [g for g, ss in GROUPS.items() if any(r.self_supervised == ss for r in usable.values())]
    own = "" if kind == "labelled" else f":{kind}"  # other choices, so their own remembered picks
    group = st.segmented_control("Objective", groups, default=groups[0], required=True, **_keep(f"group{own}"))
    names = [name for name, r in usable.items() if r.self_supervised == GROUPS[group]]
    name = st.selectbox("Recipe", names, format_func=lambda n: RECIPES[n].title, **_keep(f"recipe:{group}{own}"))
    return RECIPES[name]


def documents_path(source: str) -> str | None:
    """The documents setting for the chosen source (None: the current corpus's texts)."""
    if source == DOC_SOURCES[0]:
        return str(demo_documents_path())
    if source == DOC_SOURCES[1]:
        return None
    file = st.file_uploader("Documents table (a text column of multi-sentence documents, and a label column)",
                            type=["csv", "tsv", "jsonl", "parquet"])
    if file is None:
        raise UserError("Upload a documents file, or choose the demo documents.")
    df, _warnings = read_table(file.getvalue(), file.name)
    return str(persist_table(df, asdict(detect_columns(df)).values()))


def training_file_path(name: str, source: str) -> str | None:
    """A recipe's training-file setting (TRAINING_FILES): None (the corpus's own data), the file of that kind the
    Generate page handed over, or an upload, checked as the run will read it."""
    sources, upload_label, load = TRAINING_FILES[name]
    if source == sources[0]:
        return None
    handed = ui.state.generated()
    if source == sources[1]:
        if handed.get("kind") != name:
            raise UserError(f"No generated {name} yet: write them on the Generate page, or upload a file.")
        st.caption(f"Training on `{Path(handed['path']).name}`, the {name} the Generate page wrote.")
        return handed["path"]
    file = st.file_uploader(upload_label, type=["csv", "tsv", "jsonl", "parquet"])
    if file is None:
        raise UserError(f"Upload a {name} file, or choose the corpus's own data.")
    df, _warnings = read_table(file.getvalue(), file.name)
    path = persist_table(df, [str(c) for c in df.columns])
    load(path)  # its report's one-line refusal, here rather than in the worker
    return str(path)


def widget(param: Param, key: str, default: object, where=st, label: str | None = None) -> object:
    """The widget for one setting, from its schema: a checkbox, a choice, the knob's presets (a typed value is
    accepted), a documents source, a text box, or a number box within the setting's bounds; returns the parsed value."""
    label = label or param.label
    if param.type is bool:
        return where.checkbox(label, value=default, help=param.help, **_keep(key))
    if param.choices:
        return where.selectbox(label, param.choices, index=param.choices.index(default), help=param.help,
                               **_keep(key))
    if param.presets:
        options = sorted({*param.presets, default})
        value = where.selectbox(label, options, index=options.index(default), format_func=lambda m: f"{m:g}",
                                accept_new_options=True, help=param.help, **_keep(key))
        return param.parse(value)
    if param.file and param.name in TRAINING_FILES:
        # "Train on this" on the Generate page picks its negatives; its lists become the corpus instead
        handed = int(param.name == "negatives" and ui.state.generated().get("kind") == param.name)
        return training_file_path(param.name, where.radio(label, TRAINING_FILES[param.name][0], index=handed,
                                                          horizontal=True, help=param.help, **_keep(key)))
    if param.file:
        return documents_path(where.radio(label, DOC_SOURCES, horizontal=True, help=param.help, **_keep(key)))
    if param.type is str:
        return param.parse(where.text_input(label, value=default or "", help=param.help, **_keep(key)))
    number = param.type
    closed = {"min_value": None if param.low is None or param.low_open else number(param.low),
              "max_value": None if param.high is None or param.high_open else number(param.high)}
    value = where.number_input(label, value=number(default), step=number(param.step) if param.step else None,
                               help=param.help, **closed, **param.widget, **_keep(key))
    return param.parse(value)


def trackers_widget(param: Param, key: str, default: object, where=st) -> str:
    """report_to as a choice of any of the trackers (none chosen: none)."""
    chosen = where.multiselect(param.label, TRACKERS, default=[t for t in TRACKERS if t in str(default).split(",")],
                               placeholder="none", help=param.help, **_keep(key))
    return param.parse(",".join(chosen) or "none")


def key_of(name: str, recipe: Recipe) -> str:
    """A setting's widget key: the knob's is per recipe (its default and presets are), a budget setting that some
    recipes override is per objective group, the others are shared."""
    if name == recipe.knob:
        return f"{name}:{recipe.name}"
    if any(name in r.budget for r in RECIPES.values()):
        return f"{KEYS.get(name, name)}:{'ss' if recipe.self_supervised else 'sup'}"
    return KEYS.get(name, name)


def choose_knob(recipe: Recipe) -> dict:
    """The recipe's knob (margin or scale) and its other choices; a caption when it has no knob."""
    if recipe.knob is None:
        st.caption(f"{recipe.title} has no margin to set.")
    return {p.name: widget(p, key_of(p.name, recipe), p.default) for p in recipe.params
            if p.name == recipe.knob or p.choices}


def choose_examples(recipe: Recipe, kind: str) -> dict:
    """The recipe's other settings (mining, or documents and crops) and the number of examples; a pair corpus's
    examples are its own pairs, so nothing is mined and the mining settings are left out (so is the list size,
    which only applies to lists built from a labelled corpus)."""
    mined = KINDS[kind].mined  # a labelled corpus's examples are mined, and its lists built from neighbours
    params = [p for p in recipe.params if p.name != recipe.knob and not p.choices
              and not (not mined and p in MINING) and not (not mined and p is LIST_SIZE)]
    fields = {p.name: widget(p, key_of(p.name, recipe), p.default) for p in params if p.file}
    numbers = [p for p in params if not p.file]
    per_row = EXAMPLE_COLUMNS if len(numbers) + 1 > EXAMPLE_COLUMNS else len(numbers) + 1
    columns = [col for start in range(0, len(numbers) + 1, per_row) for col in st.columns(per_row)]
    fields |= {p.name: widget(p, key_of(p.name, recipe), p.default, col) for p, col in zip(numbers, columns)}
    examples = GENERAL_PARAMS["examples"]
    fields["examples"] = widget(examples, "pairs" if recipe.self_supervised else "examples",
                                general_default("examples", recipe), columns[len(numbers)],
                                "Pairs (N)" if recipe.self_supervised else "Lists (N)" if recipe.lists
                                else examples.label)
    return fields


def choose_budget(recipe: Recipe) -> dict:
    fields = {}
    for row in BUDGET:  # the trackers' chips need room: in a quarter they were cut ("rboard")
        for name, col in zip(row, st.columns([1, 2, 1] if "report_to" in row else 4)):
            if GENERAL_PARAMS[name].type is bool:
                col.space("small")
            make = trackers_widget if name == "report_to" else widget
            fields[name] = make(GENERAL_PARAMS[name], key_of(name, recipe), general_default(name, recipe), col)
    processes = nproc_choice(resources.gpu_count())
    if processes is not None:  # two or more GPUs: one run over several processes (PyTorch DDP)
        fields["nproc"] = widget(processes, "nproc", processes.default, st.columns(4)[0])
    return fields


def show_preview(recipe: Recipe, fields: dict, clicked: bool) -> None:
    """Mine (or crop) with the current settings when asked; counts and the first rows stay until a setting
    that changes the examples changes."""
    corpus = ui.state.corpus()
    model = ui.state.model_name()
    knob = None if recipe.lists else recipe.knob  # a list recipe's knob (w) sets its targets, so its preview
    key = (corpus.fingerprint, model, recipe.name, fields["examples"], fields["seed"],
           *(fields.get(p.name) for p in recipe.params if p.name != knob))
    cache = ui.state.session_cache("example_preview")
    if clicked:
        with ui.guard("Preparing the examples"), ui.progress_bar("Loading the reference model…") as bar:
            cfg = TrainConfig(corpus=corpus.name, **fields)
            reference = None if recipe.self_supervised else ui.get_model()
            dataset, stats = recipe.build_examples(cfg, corpus, reference,
                                                   progress=lambda d, t: bar("Encoding with the reference model",
                                                                             d, t))
            cache.clear()
            cache[key] = stats, dataset.select(range(min(PREVIEW_ROWS, len(dataset)))).to_pandas()
    if key not in cache:
        return
    stats, frame = cache[key]
    if recipe.lists is not None:
        show_list_preview(stats)
        return
    if recipe.example_format == "banded":
        show_band_preview(stats)
        return
    cards = st.columns(4)
    if recipe.self_supervised:
        cards[0].metric("Documents", f"{stats['documents']:,}", border=True)
        cards[1].metric("Skipped documents", f"{stats['skipped_docs']:,}", border=True,
                        help="Too few sentences of 100-250 characters to form the chunks.")
        cards[2].metric("Pairs used", f"{stats['examples']:,}", border=True)
    elif kind_of(corpus).train_pairs(corpus) is not None or recipe.example_format == "ranked pairs":
        # the corpus's own pairs, or RAOE's pairs (mined or the corpus's)
        cards[0].metric("Pairs used", f"{stats['examples']:,}", border=True, help=f"Source: {stats['source']}.")
        if stats.get("gated_share") is not None:
            cards[1].metric("Gated share", f"{stats['gated_share']:.0%}", border=True,
                            help="Share of the pairs whose angle term is on (see Definitions, RAOE).")
        if stats.get("warning"):
            st.warning(stats["warning"])
        st.caption("label = [s, l]: the teacher's score s and the ordinal label l (0 = most related)."
                   if "label" in frame else "score: the pair's gold score rescaled to [0, 1].")
    else:
        cards[0].metric("Available", f"{stats['available']:,}", border=True,
                        help=f"{stats['format']} examples mined, after removing repeats.")
        cards[1].metric("Used (N)", f"{stats['examples']:,}", border=True)
        cards[2].metric("Anchors", f"{stats['anchors']:,}", border=True)
        cards[3].metric("Removed by threshold", f"{stats['anchors_removed_by_threshold']:,}", border=True,
                        help=f"Anchors with no same-label or no other-label neighbour at cosine >= "
                             f"{stats['threshold']:g}: {stats['anchors_without_positive']:,} without a positive, "
                             f"{stats['anchors_without_negative']:,} without a negative.")
    widths = None
    if kind_of(corpus).mined and not recipe.self_supervised:
        frame = with_text_labels(frame, corpus)
        widths = {c: st.column_config.TextColumn(width="medium") for c in EXAMPLE_TEXTS}  # labels in view too
    st.caption(f"First {len(frame)} of {stats['examples']:,}")
    st.dataframe(frame, hide_index=True, column_config=widths)


def show_list_preview(stats: dict) -> None:
    """A list recipe's lists and its first list's targets; its m0..mL + label rows are not shown (the label is a
    packed target matrix)."""
    cards = st.columns(4)
    cards[0].metric("Lists used", f"{stats['examples']:,}", border=True, help=f"From the {stats['source']}.")
    cards[1].metric("List sizes", size_range(*stats["list_size"]), border=True,
                    help="Texts per list, the anchor included.")
    cards[2].metric("Teacher already in list order", f"{stats['teacher_in_order']:.0%}", border=True,
                    help="Share of the lists whose cosines under the teacher already fall in the list order, on the "
                         "rows the ordering metrics score (a star list's anchor, every anchor of a chain list).")
    cards[3].metric("Target in list order", f"{stats['target_in_order']:.0%}", border=True,
                    help="The same share for the training target: how much the nudge (w) reorders the teacher. "
                         "At w <= 0.5 it cannot reverse two neighbours the teacher swaps (see Definitions).")
    st.markdown("**First list**: its members after the anchor (rank 1)")
    st.dataframe(list_preview_frame(stats), hide_index=True)
    st.caption("rank: the list's order (never the teacher's); teacher cosine and rank: the teacher's similarity to "
               "the anchor and the order it gives. "
               + ("target = the list order itself (target 'order'); the teacher is left out."
                  if stats["target"] == "order" else
                  "target = the teacher's cosine nudged toward the list order by log(w·|gap| + 1), up where the list "
                  "ranks the member higher than the teacher does, down where lower; gap = its cosine minus the "
                  "cosine of the member at the list place where the teacher ranks it.")
               + " The model learns to rank the members by target (ListMLE); see Definitions.")


def show_band_preview(stats: dict) -> None:
    """The multi-granularity recipe's rows and its bands' difficulty (mean reference cosine, hardest first), then
    one anchor with its positive and four negatives; the rows hold all four, the order picks one per step."""
    cards = st.columns(4)
    cards[0].metric("Anchors used", f"{stats['anchors_used']:,}", border=True,
                    help=f"Of {stats['anchors']:,} anchors: {stats['anchors_without_positive']:,} have no same-label "
                         f"positive at cosine >= {stats['threshold']:g}, {stats['anchors_without_band']:,} fewer "
                         f"than {stats['edges'][-1]:,} other-label texts to fill the bands.")
    cards[1].metric("Rows available", f"{stats['available']:,}", border=True,
                    help=f"One row per anchor and positive (up to {stats['k']} positives per anchor).")
    cards[2].metric("Rows used (N)", f"{stats['examples']:,}", border=True)
    ranks = band_ranks(stats["edges"])
    for band, (card, cosine, rank) in enumerate(zip(st.columns(4), stats["band_cosine"], ranks), start=1):
        card.metric(f"N{band} mean cosine", f"{cosine:.3f}", border=True,
                    help=f"Mean reference cosine of the rows' N{band} negatives, drawn among the anchor's other-label "
                         f"texts of cosine rank {rank}.")
    st.markdown("**One anchor**: its positive and its four negatives")
    st.dataframe(band_preview_frame(stats, corpus), hide_index=True)
    st.caption(f"Every row keeps one negative per band of the reference model's cosine rank among texts of other "
               f"labels (N1 = ranks {ranks[0]}, hardest, to N4 = ranks {ranks[-1]}, easiest); each training step "
               f"trains on the band the order ('{stats['order']}') picks for it. See Definitions.")


def sweep_panel(recipe: Recipe, base: dict | None) -> None:
    knob = recipe.knob_param
    with st.expander("Margin sweep", icon=":material/tune:"):
        if knob is None:
            st.caption(f"{recipe.title} has no margin to sweep.")
            return
        name = knob.phrase
        st.caption(f"Trains and evaluates one run per {name} (and seed) with the settings above in one background "
                   "sweep; mining and the reference evaluation happen once.")
        engine = "local"
        if ray_available():
            engine = st.radio("Engine", ENGINES, horizontal=True, key="train:sweep:engine", help="Local: one "
                              "configuration after another in one background process. Ray: each configuration a "
                              "Ray task on a local Ray instance, as many at once as there are CPUs (or GPUs); "
                              "`python -m core sweep --engine ray --address` runs one on a cluster.").lower()
        values, seeds = st.columns([3, 1])
        typed = values.text_input(f"{knob.label}s (comma-separated)",
                                  value=", ".join(f"{m:g}" for m in knob.presets), key=f"train:sweep:{recipe.name}")
        n_seeds = seeds.number_input(SEEDS.label, min_value=int(SEEDS.low), max_value=MAX_SEEDS,
                                     value=SEEDS.default, step=1, help=SEEDS.help, key="train:sweep:seeds")
        if st.button("Start sweep", icon=":material/play_arrow:", disabled=base is None, key="train:sweep:start"):
            with ui.guard("Starting the sweep") as outcome:
                run_control.start_run("sweep", sweep_config({**run_control.corpus_fields(), **base}, [recipe.name],
                                                            knob.parse_list(typed), n_seeds, engine))
            if not outcome.failed:
                st.rerun()


corpus = ui.state.corpus()
if corpus is None:
    st.info("No corpus is loaded yet; load one on the Corpus page first.")
    st.page_link("app_pages/1_Corpus.py", label="Go to the Corpus page", icon=":material/table_view:")
    st.stop()
mines = kind_of(corpus).mined

fields: dict | None = {}
recipe_box, examples_box = st.columns([2, 3])
with recipe_box.container(border=True):
    st.markdown("**Recipe**")
    recipe = choose_recipe(corpus.kind)
    with ui.guard("Reading the margin") as margin_check:
        fields.update(choose_knob(recipe))
    interval_note = st.empty()  # RAOE's I_eff, once the budget below gives the batch
with examples_box.container(border=True):
    st.markdown("**Documents**" if recipe.self_supervised else "**Mining**" if mines else "**Examples**")
    with ui.guard("Reading the documents") as examples_check:
        fields.update(choose_examples(recipe, corpus.kind))
    note = "teacher" in fields and self_distillation_note(fields["teacher"], ui.state.model_name(), None)
    if note:
        st.info(note, icon=":material/school:")
    preview = st.button("Preview crops" if recipe.self_supervised else "Preview examples", icon=":material/preview:",
                        key="train:preview", disabled=examples_check.failed)
preview_area = st.container()  # filled below: the examples depend on the budget's seed too
with st.container(border=True):
    st.markdown("**Budget**")
    with ui.guard("Reading the budget") as budget_check:
        fields.update(choose_budget(recipe))
    if recipe.paper_budget is not None:  # only then: the note's ETA needs the model loaded
        with ui.guard("Estimating the paper's budget"):
            budget_note = paper_budget_note_for(recipe, ui.get_model(), corpus)
            if budget_note:
                st.caption(budget_note)
if "interval" in fields and "batch_size" in fields:
    interval_note.caption(interval_text(fields["interval"], fields["batch_size"]))
if margin_check.failed or examples_check.failed or budget_check.failed:
    fields = None
else:
    model = ui.state.model_name()
    fields.update(model=model, reference=model, recipe=recipe.name)
    with preview_area:
        show_preview(recipe, fields, preview)

busy = shown is not None and shown.active
with ui.guard("Preparing a worker"):
    run_control.keep_warm()
start_col, sweep_col = st.columns([1, 3])
if start_col.button("Start training", type="primary", icon=":material/play_arrow:", disabled=fields is None or busy,
                    help="The shown run is still going; cancel it or wait." if busy else None):
    with ui.guard("Starting the run") as outcome:
        cfg = TrainConfig.from_dict({**run_control.corpus_fields(), **fields})
        recipe.check_corpus(cfg, corpus)
        run_control.start_run("train", cfg.to_dict())
    if not outcome.failed:
        st.rerun()
with sweep_col:
    sweep_panel(recipe, None if busy else fields)

st.subheader("Run")
if shown is None:
    st.info("No run selected. Start one above; finished runs are listed on the Runs & export page.")
else:
    run_panel.live_run(store, shown.id)
