"""Generate page: write the data seeds 003 and 004 train on with a language model (a local causal LM folder, or
an OpenAI-compatible server such as vLLM, llama.cpp or Ollama): ranked lists by directional control, or four graded
hard negatives per query. A generation runs in a background worker like a training run (core.generation.job), shows
its latest items as they arrive, its quality by the reference model once done, and offers its file to train on."""

import os
from pathlib import Path

import pandas as pd
import streamlit as st

import ui
from core.analysis.generation_plots import list_curve_figure, negatives_figure
from core.data.content import persist_table
from core.data.lists import detect_list_columns
from core.data.provenance import generator_text
from core.data.table import DEFAULT_MAX_BYTES, read_table
from core.generation.engines import API_KEY_ENV
from core.generation.job import generation_config
from core.generation.lists import DEFAULT_LAMBDA, DEFAULT_STEPS, METHODS
from core.generation.negatives import CLARITIES, DIFFICULTIES, QUERY_LENGTHS, QUERY_TYPES
from core.generation.quality import PUBLISHED_NEGATIVES
from core.jobs import launch
from ui.feedback import guard
from ui.nav import TRAIN
from ui.run_control import corpus_fields
from ui.run_panel import REFRESH_S, live_run

KIND_LABELS = {"lists": "Ranked lists (seed 003)", "negatives": "Hard negatives (seed 004)"}
ENGINES = ("Local model folder", "OpenAI-compatible server")
FILE_TYPES = ["csv", "tsv", "jsonl", "parquet"]

store = ui.run_store()
st.title("Generate training data")
st.caption("Seed 003 post-trains on ranked lists a language model writes by directional control; seed 004 trains on "
           "four hard negatives per query in decreasing similarity. Both are written here, one item at a time, each "
           "kept as soon as it is done: a cancelled or crashed generation continues where it stopped. The same "
           "from a terminal: `python -m core generate lists|negatives SOURCE --model DIR --out FILE`.")

kind = st.segmented_control("What to write", list(KIND_LABELS), format_func=KIND_LABELS.get, default="lists",
                            required=True, key="generate_kind")
with st.container(border=True):
    st.markdown("**Source**: " + ("a table of sentences (a `text` column): each starts a list" if kind == "lists"
                                  else "a table of queries (a `query` column, and a `positive` column if you have "
                                       "the relevant documents; the model writes them otherwise)"))
    upload = st.file_uploader("Source table", type=FILE_TYPES, max_upload_size=DEFAULT_MAX_BYTES // 2**20,
                              key=f"generate_source:{kind}")
    source = None
    if upload is not None:
        with guard("Reading the source"):
            df, _warnings = read_table(upload.getvalue(), upload.name)
            st.caption(f"{len(df):,} rows; columns {', '.join(map(str, df.columns))}.")
            source = persist_table(df, [str(c) for c in df.columns])

with st.container(border=True):
    engine = st.radio("Language model", ENGINES, horizontal=True, key="generate_engine")
    if engine == ENGINES[0]:
        model = st.text_input("Model folder", key="generate_model", placeholder="/models/Meta-Llama-3-8B-Instruct",
                              help="A causal LM folder with its tokenizer (config.json, weights, tokenizer files); "
                                   "on a CUDA GPU in bf16 (fp16 where bf16 is missing), else on the CPU.")
        endpoint = None
    else:
        endpoint = st.text_input("Server URL", key="generate_endpoint", placeholder="http://localhost:8000/v1")
        model = st.text_input("Model name", key="generate_served", placeholder="the name the server serves")
        st.caption(f"A key, if the server needs one, is read from the {API_KEY_ENV} environment variable of the "
                   f"app's process ({'set' if os.environ.get(API_KEY_ENV) else 'not set'}); it is never stored.")

with st.container(border=True):
    columns = st.columns(4)
    if kind == "lists":
        method = columns[0].selectbox("Method", METHODS, key="generate_method", help="directional: each sentence "
                                      "guided away from the one two steps back (a local model only); stepwise: "
                                      "λ = 0; single: the whole list from one prompt")
        lam = columns[1].number_input("λ", 0.0, 100.0, DEFAULT_LAMBDA, 0.1, key="generate_lambda",
                                      disabled=method != "directional")
        steps = columns[2].number_input("Steps", 1, 200, DEFAULT_STEPS, key="generate_steps",
                                        help="sentences after the source")
        settings = {"method": method, "lam": float(lam), "steps": int(steps)}
    else:
        settings = {"query_type": columns[0].selectbox("Query type", QUERY_TYPES, index=2, key="generate_qtype"),
                    "query_length": columns[1].selectbox("Query length", QUERY_LENGTHS, index=1, key="generate_qlen"),
                    "difficulty": columns[2].selectbox("Difficulty", DIFFICULTIES, index=1, key="generate_diff"),
                    "clarity": columns[3].selectbox("Clarity", CLARITIES, key="generate_clarity")}
    more = st.columns(4)
    limit = more[0].number_input("Items (0: all)", 0, 10_000_000, 0, key="generate_limit")
    concurrency = more[1].number_input("Requests at once", 1, 64, 4, key="generate_concurrency",
                                       disabled=endpoint is None, help="a server answers several; a local model one")
    seed = more[2].number_input("Seed", 0, 2**31 - 1, 0, key="generate_seed")
    out_name = more[3].text_input("File name", f"generated_{kind}.csv", key=f"generate_out:{kind}")

active = next((r for r in store.list(with_losses=False) if r.kind == "generate" and r.active), None)
if active is None and st.button("Generate", icon=":material/play_arrow:", type="primary",
                                disabled=source is None or not (model or "").strip()):
    with guard("Starting the generation"):
        config = generation_config(kind, str(source), out_name.strip(), model.strip(), endpoint, settings,
                                   seed=int(seed), concurrency=int(concurrency), limit=int(limit) or None,
                                   reference=ui.state.model_name(),
                                   check_against=corpus_fields() if ui.state.corpus() is not None else None)
        run_id = store.create("generate", config)
        launch.start(store, run_id)
        st.rerun()


def show_preview(items: list[dict]) -> None:
    for item in reversed(items):
        if "members" in item:
            ended = f" (ended early: {item['ended']})" if item.get("ended") else ""
            st.markdown(" → ".join(f"`{m}`" for m in item["members"]) + ended)
        else:
            negatives = "; ".join(f"N{k}: `{t}`" for k, t in enumerate(item["negatives"], 1))
            st.markdown(f"**{item['query']}** — {negatives or item.get('error') or ''}")


if active is not None:
    live_run(store, active.id, key="generate")

    @st.fragment(run_every=REFRESH_S)
    def latest_items() -> None:
        run = store.get(active.id)
        if run.active:
            st.caption("Latest items")
            show_preview(run.progress.get("preview", []))
        else:
            st.rerun()

    latest_items()

done = next((r for r in store.list(with_losses=False) if r.kind == "generate" and r.status == "done"), None)
if done is not None and active is None:
    result = done.metrics_after or {}
    counts, quality = result.get("counts", {}), result.get("quality", {})
    st.subheader(f"Latest generation: {result.get('kind', '?')}")
    made = (f"{counts.get('lists', 0):,} lists, {counts.get('sentences', 0):,} sentences"
            if result.get("kind") == "lists" else f"{counts.get('rows', 0):,} rows")
    dropped = ", ".join(f"{n:,} {why}" for why, n in counts.get("dropped", {}).items() if n) or "none"
    st.caption(f"{made} from {counts.get('finished', 0):,} source items in {result.get('seconds', 0)} s; dropped: "
               f"{dropped}. Written by {generator_text(result.get('generator', {}))}.")
    if "leakage" in counts:
        leak = counts["leakage"]
        examples = f" (e.g. {', '.join(f'`{t}`' for t in leak['examples'][:3])})" if leak["leaked"] else ""
        (st.warning if leak["leaked"] else st.caption)(
            f"Leakage: {leak['leaked']:,} of the {leak['of']:,} written texts are test texts of the corpus "
            f"`{leak['corpus']}`{examples}; a model trained on them scores those by memory.")
    if quality:
        if result.get("kind") == "lists":
            st.plotly_chart(list_curve_figure({result["settings"]["method"]: quality}), key="generate_curve")
            monotone = quality.get("monotone", {})
            st.caption(f"Cosine to the anchor by position, by the reference model (95% intervals). Lists whose "
                       f"cosines fall at every step: {monotone.get('count', 0):,} of {monotone.get('n', 0):,}.")
        else:
            st.plotly_chart(negatives_figure(quality, PUBLISHED_NEGATIVES), key="generate_negatives")
            st.caption("Mean cosine to the query by the reference model (95% intervals); the published means are "
                       "seed 004's Table 4 with another embedding model, so only their order compares.")
    path = Path(done.artefacts.get("generated", ""))
    if path.is_file():
        st.download_button("Download the file", path.read_bytes(), file_name=path.name, icon=":material/download:")
        st.dataframe(pd.read_csv(path, nrows=50) if path.suffix == ".csv" else pd.read_parquet(path).head(50))
        if st.button("Train on this", icon=":material/model_training:", key="generate_train"):
            ui.state.set_generated(result.get("kind"), path)
            if result.get("kind") == "lists":  # the lists are the corpus a list recipe trains on
                with guard("Loading the lists as the corpus"):
                    table = ui.state.recent_table({"path": str(path), "name": path.name})
                    ui.state.use_table(table, detect_list_columns(table.df))
            st.switch_page(TRAIN.path)
