"""Reproductions page: each seed paper's headline experiment with its claims, the published figure beside ours
(95% interval) and what we do differently; a reproduction runs in a background worker like any run
(core.reproduce), so closing the tab loses nothing."""

import pandas as pd
import streamlit as st

import ui
from core.data.provenance import generation_text
from core.jobs import launch
from core.reproduce import EXPERIMENTS
from core.reproduce.job import latest, reproduction_config
from core.reproduce.report import ours_text, published_text
from ui.feedback import guard
from ui.run_panel import live_run

store = ui.run_store()
st.title("Reproductions")
st.caption("Each seed paper's headline experiment as a few training runs on the paper's public data. Every row is a "
           "claim: the paper's figure, ours with its 95% interval, and the settings that differ from the paper "
           "(a smaller budget, another model). The same from a terminal: `python -m core reproduce NAME --data DIR "
           "[--quick]`.")
data = st.text_input("Data folder", key="reproduce_data", persist_state="session",
                     placeholder="the folder with sst2.csv, stsb.csv, snli.csv, trec.csv, bbc_news.csv",
                     help="Each experiment reads its files from here; the files each needs are listed with it.")
quick = st.toggle("Quick (a small budget: minutes on a CPU)", value=True, key="reproduce_quick")
model = ui.state.model_name()
st.caption(f"Every arm trains `{model}`, the model chosen on the Corpus page. A claim that one arm beats another is "
           "their paired difference on the same test items (95% interval and p-value); beside it stands the paper's "
           "difference for the same comparison, with the paper's model and benchmark named where they are not ours. "
           "An absolute published figure stands beside ours only where model, benchmark and metric are the same; "
           "otherwise it is named in the notes.")

for experiment in EXPERIMENTS.values():
    done, active, ended = latest(store, experiment.name)
    with st.container(border=True):
        st.subheader(experiment.title)
        st.caption(experiment.paper)
        st.markdown("Reads " + "; ".join(f"`{s.file}` ({s.described})" for s in experiment.sources))
        generator = None
        if experiment.generation is not None:
            generator = st.text_input(
                "Generator (optional)", key=f"reproduce:{experiment.name}:generator", persist_state="session",
                placeholder="a local language model folder, or http://localhost:8000/v1",
                help=f"Train on {experiment.generation.paper.split(' (')[0]} written by this language model first, "
                     f"as the paper did; empty: {experiment.generation.substitute.split(' (')[0]}, a substitute. "
                     "A server's model is the one it lists; the terminal's --generator-model picks another.")
        if done is not None:
            result = done.metrics_after or {}
            if result.get("generated"):
                st.caption(f"Every arm trained on {generation_text(result['generated'])}.")
            st.table(pd.DataFrame([{"claim": r["claim"], "published": published_text(r), "ours [95% CI]":
                                    ours_text(r), "differs from the paper": r["differs"] or "–"}
                                   for r in result.get("rows", [])]).set_index("claim"))
            st.caption("A difference row (\"A - B\") is paired: both arms scored the same test items; its p-value "
                       "is the bootstrap's (docs/definitions.md, Paired comparisons).")
            model_used = f" with `{result['model']}`" if result.get("model") else ""
            st.caption(f"{'Quick' if result.get('quick') else 'Full'} reproduction `{done.id}`{model_used}; its "
                       "arms are runs on the Runs page.")
        elif active is None and ended is None:
            st.caption("Not run yet on this machine.")
        if ended is not None and active is None:
            st.error(f"The latest reproduction `{ended.id}` {ended.status}"
                     + (f": {ended.error}" if ended.error else "."), icon=":material/error:")
        if active is not None:
            live_run(store, active.id, key=f"reproduce:{experiment.name}")
        elif st.button(f"Run {experiment.name}", key=f"reproduce:{experiment.name}:start",
                       icon=":material/play_arrow:", disabled=not data.strip()):
            with guard(f"Starting the {experiment.name} reproduction"):
                run_id = store.create("reproduce", reproduction_config(experiment.name, data.strip(), quick, model,
                                                                       generator=(generator or "").strip() or None))
                launch.start(store, run_id)
                st.rerun()
