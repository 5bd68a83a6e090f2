"""Train page: choose a recipe, its margin, the examples and the budget; preview the examples; start a
background run (or a margin sweep) and watch it live. The run belongs to a worker process, so a reload
or a second tab shows the same run."""

import streamlit as st

import ui
from core.data.corpus import demo_documents_path, detect_columns, persist_table, read_table
from core.errors import UserError
from core.jobs.sweep import sweep_config
from core.training.recipes import RECIPES, Recipe
from core.training.trainer import POOLINGS, PRECISIONS, TrainConfig, prepare_examples
from ui import runs_view

GROUPS = {"Supervised": False, "Self-supervised": True}
DOC_SOURCES = ("Demo documents", "The current corpus", "Upload documents")
PREVIEW_ROWS = 20
DEFAULTS = TrainConfig(corpus="")
SELF_SUPERVISED_BUDGET = {"batch_size": 64, "lr": 2e-5}  # DESIGN §3.3

ui.page_setup("Train", ":material/model_training:")
store = runs_view.store()
shown = runs_view.current_run(store)
st.title("Train")
st.caption("Fine-tune a copy of the reference model in a background process. Supervised recipes train on "
           "examples mined from the labels with the frozen reference model; self-supervised ones on crops "
           "of multi-sentence documents.")


def _keep(key: str) -> dict:
    """Widget key arguments: the value survives a visit to another page."""
    return {"key": f"train:{key}", "persist_state": "session"}


def choose_recipe() -> Recipe:
    group = st.segmented_control("Objective", list(GROUPS), default="Supervised", required=True, **_keep("group"))
    names = [name for name, r in RECIPES.items() if r.self_supervised == GROUPS[group]]
    name = st.selectbox("Recipe", names, format_func=lambda n: RECIPES[n].title, **_keep(f"recipe:{group}"))
    return RECIPES[name]


def choose_margin(recipe: Recipe) -> dict:
    """The recipe's margin (or scale): a preset or a typed value; nothing for recipes without one."""
    if recipe.margin_name is None:
        st.caption(f"{recipe.title} has no margin to set.")
        return {"margin": None}
    options = sorted({*recipe.presets, recipe.default_margin})
    value = st.selectbox(recipe.margin_name.capitalize(), options, index=options.index(recipe.default_margin),
                         format_func=lambda m: f"{m:g}", accept_new_options=True,
                         help=f"Presets for {recipe.title}; type another value to use it. Default "
                              f"{recipe.default_margin:g}.", **_keep(f"margin:{recipe.name}"))
    try:
        margin = float(value)
    except (TypeError, ValueError):
        raise UserError(f"The {recipe.margin_name} must be a number, got '{value}'.") from None
    fields = {"margin": margin}
    if recipe.name == "triplet":
        fields["distance"] = st.selectbox("Distance", ["cosine", "euclidean"], help="Seed 000 used cosine "
                                          "distance; sentence-transformers' default is Euclidean.", **_keep("distance"))
    return fields


def documents_path(source: str) -> str | None:
    """TrainConfig.documents for the chosen source (None: the current corpus's texts)."""
    if source == DOC_SOURCES[0]:
        return str(demo_documents_path())
    if source == DOC_SOURCES[1]:
        return None
    file = st.file_uploader("Documents table (a text column of multi-sentence documents, and a label column)",
                            type=["csv", "tsv", "jsonl", "parquet"])
    if file is None:
        raise UserError("Upload a documents file, or choose the demo documents.")
    df, _warnings = read_table(file.getvalue(), file.name)
    return str(persist_table(df, detect_columns(df)))


def choose_examples(recipe: Recipe) -> dict:
    if recipe.self_supervised:
        source = st.radio("Documents", DOC_SOURCES, horizontal=True, **_keep("docs"))
        t_col, per_doc_col, n_col = st.columns(3)
        t = t_col.number_input("Sentences per crop (t)", 1, 10, DEFAULTS.crop_t, **_keep("crop_t"))
        per_doc = per_doc_col.number_input("Pairs per document", 1, 1000, DEFAULTS.pairs_per_doc,
                                           **_keep("pairs_per_doc"),
                                           help="Distinct pairs drawn from each document. More pairs give longer "
                                                "runs without repeating a pair; two pairs of one document in a "
                                                "batch count as negatives of each other.")
        n = n_col.number_input("Pairs (N)", 1, 1_000_000, DEFAULTS.examples, step=500, **_keep("pairs"))
        return {"documents": documents_path(source), "crop_t": int(t), "pairs_per_doc": int(per_doc),
                "examples": int(n)}
    k_col, th_col, n_col = st.columns(3)
    k = k_col.number_input("Neighbours (k)", 1, 100, DEFAULTS.mine_k, **_keep("k"),
                           help="Nearest same-label and other-label neighbours per anchor.")
    threshold = th_col.number_input("Cosine threshold", -1.0, 1.0, DEFAULTS.threshold, step=0.05,
                                    **_keep("threshold"), help="Neighbours below it are not used.")
    n = n_col.number_input("Examples (N)", 1, 1_000_000, DEFAULTS.examples, step=500, **_keep("examples"),
                           help="Subsampled deterministically (seed) from all mined examples.")
    return {"mine_k": int(k), "threshold": float(threshold), "examples": int(n)}


def choose_budget(recipe: Recipe) -> dict:
    group = "ss" if recipe.self_supervised else "sup"  # self-supervised runs have their own defaults
    defaults = {"batch_size": DEFAULTS.batch_size, "lr": DEFAULTS.lr,
                **(SELF_SUPERVISED_BUDGET if recipe.self_supervised else {})}
    row1, row2, row3 = st.columns(4), st.columns(4), st.columns(4)
    epochs = row1[0].number_input("Epochs", 0.1, 100.0, DEFAULTS.epochs, step=0.5, **_keep("epochs"))
    batch = row1[1].number_input("Batch size", 2, 4096, defaults["batch_size"], **_keep(f"batch:{group}"))
    lr = row1[2].number_input("Learning rate", 1e-7, 1.0, defaults["lr"], step=1e-5, format="%.1e",
                              **_keep(f"lr:{group}"))
    warmup = row1[3].number_input("Warm-up ratio", 0.0, 0.99, DEFAULTS.warmup_ratio, step=0.05, **_keep("warmup"))
    seed = row2[0].number_input("Seed", 0, 2**31 - 1, DEFAULTS.seed, **_keep("seed"))
    max_steps = row2[1].number_input("Max steps (0 = all)", 0, 10**7, DEFAULTS.max_steps, **_keep("max_steps"),
                                     help="Stop after this many batches, e.g. to compare crops by batch count.")
    eval_every = row2[2].number_input("Evaluate every n steps (0 = off)", 0, 10**6, DEFAULTS.eval_every,
                                      **_keep("eval_every"), help="P@k, S@k and kNN during training: the "
                                      "evaluation curve. Each evaluation encodes the test and pool texts.")
    pooling = row2[3].selectbox("Pooling", POOLINGS, help="'model' keeps the model's own pooling; 'ata' is "
                                "anchor-token-aware pooling (DESIGN §3.7).", **_keep("pooling"))
    layers = row3[0].number_input("Freeze first n layers", 0, 100, DEFAULTS.freeze_layers, **_keep("freeze_layers"))
    precision = row3[1].selectbox("Precision", PRECISIONS, help="fp16 / bf16 apply on a CUDA GPU only.",
                                  **_keep("precision"))
    row3[2].space("small")
    embeddings = row3[2].checkbox("Freeze embeddings", **_keep("freeze_embeddings"))
    return {"epochs": float(epochs), "batch_size": int(batch), "lr": float(lr), "warmup_ratio": float(warmup),
            "seed": int(seed), "max_steps": int(max_steps), "eval_every": int(eval_every), "pooling": pooling,
            "freeze_layers": int(layers), "precision": precision, "freeze_embeddings": embeddings}


def show_preview(recipe: Recipe, fields: dict, clicked: bool) -> None:
    """Mine (or crop) with the current settings when asked; counts and the first rows stay until a setting
    that changes the examples changes."""
    corpus = ui.state.corpus()
    model = ui.state.model_name()
    key = (corpus.fingerprint, model, recipe.example_format, fields.get("mine_k"), fields.get("threshold"),
           fields["examples"], fields["seed"], fields.get("documents"), fields.get("crop_t"),
           fields.get("pairs_per_doc"))
    cache = ui.state.session_cache("example_preview")
    if clicked:
        with ui.guard("Preparing the examples"), ui.progress_bar("Loading the reference model…") as bar:
            cfg = TrainConfig(corpus=corpus.name, **fields)
            reference = None if recipe.self_supervised else ui.get_model()
            dataset, stats = prepare_examples(cfg, corpus, reference,
                                              progress=lambda d, t: bar("Encoding with the reference model", d, t))
            cache.clear()
            cache[key] = stats, dataset.select(range(min(PREVIEW_ROWS, len(dataset)))).to_pandas()
    if key not in cache:
        return
    stats, frame = cache[key]
    cards = st.columns(4)
    if recipe.self_supervised:
        cards[0].metric("Documents", f"{stats['documents']:,}", border=True)
        cards[1].metric("Skipped documents", f"{stats['skipped_docs']:,}", border=True,
                        help="Too few sentences of 100-250 characters to form the chunks.")
        cards[2].metric("Pairs used", f"{stats['examples']:,}", border=True)
    else:
        cards[0].metric("Available", f"{stats['available']:,}", border=True,
                        help=f"{stats['format']} examples mined, after removing repeats.")
        cards[1].metric("Used (N)", f"{stats['examples']:,}", border=True)
        cards[2].metric("Anchors", f"{stats['anchors']:,}", border=True)
        cards[3].metric("Removed by threshold", f"{stats['anchors_removed_by_threshold']:,}", border=True,
                        help=f"Anchors with no same-label or no other-label neighbour at cosine >= "
                             f"{stats['threshold']:g}: {stats['anchors_without_positive']:,} without a positive, "
                             f"{stats['anchors_without_negative']:,} without a negative.")
    st.caption(f"First {len(frame)} of {stats['examples']:,}")
    st.dataframe(frame, hide_index=True)


def sweep_panel(recipe: Recipe, base: dict | None) -> None:
    with st.expander("Margin sweep", icon=":material/tune:"):
        if recipe.margin_name is None:
            st.caption(f"{recipe.title} has no margin to sweep.")
            return
        st.caption(f"Trains and evaluates one run per {recipe.margin_name} with the settings above, one after "
                   "another in one background process; mining and the reference evaluation happen once.")
        typed = st.text_input(f"{recipe.margin_name.capitalize()}s (comma-separated)",
                              value=", ".join(f"{m:g}" for m in recipe.presets), key=f"train:sweep:{recipe.name}")
        if st.button("Start sweep", icon=":material/play_arrow:", disabled=base is None, key="train:sweep:start"):
            with ui.guard("Starting the sweep") as outcome:
                try:
                    margins = [float(m) for m in typed.split(",") if m.strip()]
                except ValueError:
                    raise UserError(f"Give the {recipe.margin_name}s as numbers separated by commas.") from None
                runs_view.start_run("sweep", sweep_config({**runs_view.corpus_fields(), **base}, [recipe.name],
                                                          margins))
            if not outcome.failed:
                st.rerun()


corpus = ui.state.corpus()
if corpus is None:
    st.info("No corpus is loaded yet; load one on the Corpus page first.")
    st.page_link("pages/1_Corpus.py", label="Go to the Corpus page", icon=":material/table_view:")
    st.stop()

fields: dict | None = {}
recipe_box, examples_box = st.columns([2, 3])
with recipe_box.container(border=True):
    st.markdown("**Recipe**")
    recipe = choose_recipe()
    with ui.guard("Reading the margin") as margin_check:
        fields.update(choose_margin(recipe))
with examples_box.container(border=True):
    st.markdown("**Documents**" if recipe.self_supervised else "**Mining**")
    with ui.guard("Reading the documents") as examples_check:
        fields.update(choose_examples(recipe))
    preview = st.button("Preview crops" if recipe.self_supervised else "Preview examples", icon=":material/preview:",
                        key="train:preview", disabled=examples_check.failed)
preview_area = st.container()  # filled below: the examples depend on the budget's seed too
with st.container(border=True):
    st.markdown("**Budget**")
    fields.update(choose_budget(recipe))
if margin_check.failed or examples_check.failed:
    fields = None
else:
    model = ui.state.model_name()
    fields.update(model=model, reference=model, recipe=recipe.name)
    with preview_area:
        show_preview(recipe, fields, preview)

busy = shown is not None and shown.active
with ui.guard("Preparing a worker"):
    runs_view.keep_warm()
start_col, sweep_col = st.columns([1, 3])
if start_col.button("Start training", type="primary", icon=":material/play_arrow:", disabled=fields is None or busy,
                    help="The shown run is still going; cancel it or wait." if busy else None):
    with ui.guard("Starting the run") as outcome:
        runs_view.start_run("train", TrainConfig.from_dict({**runs_view.corpus_fields(), **fields}).to_dict())
    if not outcome.failed:
        st.rerun()
with sweep_col:
    sweep_panel(recipe, None if busy else fields)

st.subheader("Run")
if shown is None:
    st.info("No run selected. Start one above; finished runs are listed on the Runs & export page.")
else:
    runs_view.live_run(store, shown.id)
