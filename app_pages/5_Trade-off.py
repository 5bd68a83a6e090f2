"""Trade-off page: polarity P@k vs semantic similarity S@k for every run, and the live margin slider; STS Spearman
and list ordering before -> after for the runs that report them."""

import time

import streamlit as st

import ui
from core.analysis.plots import sts_change_figure, tradeoff_figure
from core.analysis.tradeoff import (
    MARGIN_STEPS,
    approximate_ci,
    change_table,
    margin_constraint_share,
    margin_share_figure,
    metric_changes,
    mined_triplet_counts,
    published_for,
    seed_groups,
    tradeoff_points,
    triplet_count_note,
)
from core.data.kinds import kind_of
from core.errors import UserError
from core.evaluation.headline import HEADLINE
from core.evaluation.published import corpus_keys, published, shown_beside
from core.evaluation.uncertainty import ERROR_BARS
from core.jobs.quick import QUICK_RECIPE, quick_run, quick_text, quick_top_layers
from core.training.config import GENERAL_PARAMS
from ui.layout import escaped
from ui.run_control import corpus_fields, corpus_name, keep_warm
from ui.run_panel import progress_text

POLL_S = 0.5  # while a quick run trains: its point should show within moments of it finishing
DISCOUNT = GENERAL_PARAMS["discount"]
BAR_CHOICES = {"ci": "95% CI of the mean", "se": "Standard error", "sd": "SD over targets"}  # ERROR_BARS, short

st.title("Trade-off")
st.caption("**P@k**: rank-weighted share (unless the rank discount is none) of a held-out text's k nearest "
           "training texts that share its label (class separation). **S@k**: their cosine to it under the reference "
           "model (kept meaning), weighted alike. Both ×100, "
           "the mean over the held-out texts (targets). Up and to the right is better; the dashed line is the "
           "Pareto front. Each point is labelled with its recipe and margin (m) or scale (s); the marker shape is "
           "its budget.")

runs = ui.run_store()


def sts_section(fingerprint: str) -> None:
    """STS Spearman before -> after of the runs on the session's corpus that report it (runs on scored pairs, or
    given an STS corpus), named; nothing when none does."""
    rows = metric_changes(runs, "sts_spearman", fingerprint)
    if not rows:
        return
    st.subheader("STS Spearman")
    st.caption("Runs on this corpus that report it (a pair corpus with scores, or runs given one as their STS "
               "corpus): how well the cosine ranks the target pairs like their gold score, before and after training "
               "(×100), with each figure's 95% interval.")
    sts = next(m for m in HEADLINE if m.key == "sts_spearman")
    for corpus in dict.fromkeys(r["corpus"] for r in rows):
        group = [r for r in rows if r["corpus"] == corpus]
        st.markdown(f"**On {escaped(group[0]['corpus_name'])}** · {len(group)} run{'s' if len(group) > 1 else ''}")
        ui.plot(sts_change_figure(group, published_for(group, "sts_spearman")), "sts_spearman",
                key=f"sts_plot:{corpus}")
        shown = f"%.{sts.digits}f"  # the change with the figures' precision: 2.0 read "2" beside "77.2"
        st.dataframe([{"run": r["name"], "before": sts.rounded(r["before"]), "after": sts.rounded(r["after"]),
                       "change": sts.shown_change(r["before"], r["after"]),
                       "change, 95% CI, p (paired)": r["paired"] or "–"} for r in group], hide_index=True,
                     column_config={"before": st.column_config.NumberColumn(format=shown),
                                    "after": st.column_config.NumberColumn(format=shown),
                                    "change": st.column_config.NumberColumn(format=shown.replace("%", "%+"))})
    st.caption("The change's 95% interval and p-value are paired over the same test pairs (bootstrap, 1,000 "
               "resamples): an interval that holds 0 is not a change this test set can show.")


def ordering_section(fingerprint: str) -> None:
    """Ordering accuracy and Kendall tau before -> after of the runs on the session's corpus that report them (list
    recipes' runs); nothing when none does."""
    rows = change_table(runs, ("ordering_accuracy", "kendall_tau"), fingerprint)
    if not rows:
        return
    st.subheader("List ordering")
    st.caption("Runs of a list recipe (ListMLE), on their held-out lists, before → after training: the share of "
               "lists whose members the model's cosines to the anchor put in exactly the list order (ordering "
               "accuracy), and the mean Kendall tau between that cosine order and the list order. Each change is shown "
               "with its 95% interval and p-value, paired over the same held-out lists (bootstrap).")
    st.dataframe(rows, hide_index=True)


def before_after_sections(fingerprint: str) -> None:
    """The sections of the runs on the corpus with this fingerprint, the session's: never another corpus's runs."""
    sts_section(fingerprint)
    ordering_section(fingerprint)


corpus = ui.state.corpus()
if corpus is not None and not kind_of(corpus).judged:
    before_after_sections(corpus.fingerprint)  # the P@k / S@k parts below need labels
corpus = ui.require_corpus("Trade-off")
context = (ui.state.model_name(), corpus.fingerprint)  # what cached shares and quick runs belong to
# (margin, trained every layer) -> run id
quick_runs: dict[tuple[float, bool], str] = ui.state.session_cache("quick_runs").setdefault(context, {})
k_box, discount_box, bars_box = st.columns([1, 1, 2])
k = int(k_box.number_input("k (neighbours retrieved per text)", min_value=1, max_value=100, value=16, step=1,
                           key="tradeoff_k", persist_state="session",
                           help="Changing k rescores every run from cached embeddings; nothing is re-encoded."))
discount = discount_box.selectbox(DISCOUNT.label, DISCOUNT.choices, key="tradeoff_discount", persist_state="session",
                                  help=DISCOUNT.help + " Changing it rescores from cached embeddings too.")
bars = bars_box.segmented_control(
    "Error bars", list(ERROR_BARS), format_func=BAR_CHOICES.get, default="ci", required=True, key="tradeoff_bars",
    persist_state="session",
    help="How well each run's mean is known: the bootstrap 95% confidence interval of the mean over targets (1,000 "
         "resamples) or its standard error; or how much single targets differ (standard deviation, about 22 points "
         "for P), which swamps every difference between runs. The runs share their targets, so overlapping "
         "intervals do not by themselves rule out a real difference; a sweep with several seeds shows how far "
         "training alone moves a point.")


def trade_off_plot() -> None:
    points = None
    with ui.guard("Scoring the runs"), ui.progress_bar("Loading the reference model…") as bar:
        points = tradeoff_points(runs, corpus, ui.get_model(), k, load_model=ui.get_model, progress=bar,
                                 memo=ui.state.session_cache("tradeoff_points"), discount=discount)
    if points is None:
        return
    shown = seed_groups(points)
    figures = published(corpus_keys(corpus))  # stored on the Corpus page: a point, or a line when only P or S is
    ui.plot(tradeoff_figure(shown, k, bars, figures, discount), f"tradeoff_k{k}_{discount}", key="tradeoff_plot")
    approximate = approximate_ci(shown) if bars == "ci" else []
    if approximate:
        many = len(approximate) > 1
        st.caption(f"Run{'s' if many else ''} {', '.join(f'`{r}`' for r in approximate)} "
                   f"{'were' if many else 'was'} evaluated before ContrastLab kept the bootstrap interval: "
                   f"{'their' if many else 'its'} bars are the normal approximation, mean ± 1.96 standard errors "
                   "from the stored standard deviation (marked in the hover).")
    if any(p.get("n_seeds", 1) > 1 for p in shown):
        st.caption("A point that stands for several runs of one configuration with different seeds is their mean, "
                   "drawn larger, its bars the seeds' lowest and highest scores: how far training alone moves it.")
    drawn = [f for key, f in figures.items() if key in ("polarity", "similarity")]
    if drawn:
        st.caption("Published on this test set (purple): "
                   + "; ".join(escaped(shown_beside(f, k, discount)) for f in drawn) + ".")
    if len(points) == 1:
        st.info("Only the reference model so far: train a model on the Train page, or a quick model at a margin "
                "below, and its point appears here.", icon=":material/info:")


def margin_slider() -> float | None:
    """The margin picked on the slider, after showing how many mined triplets it keeps active."""
    margin = st.select_slider("Triplet margin", MARGIN_STEPS, value=0.1, key="tradeoff_margin",
                              format_func=lambda m: f"{m:g}", persist_state="session")
    cache = ui.state.session_cache("margin_shares")
    if context not in cache:
        with ui.guard("Mining triplets"), st.spinner("Mining triplets with the reference model…"):
            model = ui.get_model()
            cache[context] = (dict(margin_constraint_share(model, corpus, list(MARGIN_STEPS))),
                              mined_triplet_counts(model, corpus))
    if context not in cache:
        return None
    shares, (available, n_triplets) = cache[context]
    text, chart = st.columns([2, 3])
    text.markdown(f"**{shares[margin]:.0%}** of the {n_triplets:,} mined triplets are active at margin "
                  f"**{margin:g}** under the reference model.")
    text.caption("Active: d(anchor, positive) + margin > d(anchor, negative), so the triplet still pushes during "
                 "training. Cosine distances lie in [0, 2]: from a margin of 2 on, every triplet keeps pushing.")
    text.caption(triplet_count_note(available, n_triplets))
    with chart:
        ui.plot(margin_share_figure(list(shares.items()), margin), "active_triplets", key="margin_share")
    return margin


def start_quick(margin: float, full: bool = False) -> None:
    """Start (or find) the quick run, then redraw: a run that is already done belongs on the plot above."""
    with ui.guard("Starting the quick model") as outcome:
        base = {**corpus_fields(), "model": ui.state.model_name(), "recipe": QUICK_RECIPE}
        quick_runs[margin, full] = quick_run(runs, base, margin, full=full, corpus_name=corpus_name())
    if not outcome.failed:
        st.rerun()


def quick_status() -> None:
    """This session's quick runs while they train; once one finishes the whole page reruns so its point shows."""
    watched = {key for key, run_id in quick_runs.items() if _active(run_id)}

    @st.fragment(run_every=POLL_S if watched else None)
    def panel() -> None:
        for (margin, full), run_id in sorted(quick_runs.items()):
            try:
                run = runs.get(run_id)
            except UserError:
                continue  # deleted on the Runs page
            name = f"{quick_text(run.config) or 'quick'} model at margin {margin:g}"
            if run.active:
                fraction, text = progress_text(run)
                elapsed = time.time() - run.created
                st.progress(fraction, text=f"{name[0].upper()}{name[1:]} · {text} · {elapsed:.0f} s so far")
            elif (margin, full) in watched:
                st.rerun()  # it just finished: redraw the page, with its point on the plot
            elif run.status == "done":
                retrain = run.config.get("top_layers") and (margin, True) not in quick_runs
                line, button = st.columns([4, 1]) if retrain else (st, None)
                line.caption(f"The {name} is on the plot as `{run.id}`"
                             f"{' (only its top layers trained)' if retrain else ''}.")
                if button and button.button("Retrain fully", key=f"full_{margin:g}", icon=":material/replay:",
                                            help="Train the same point with every layer, in the background."):
                    start_quick(margin, full=True)
            else:
                st.warning(f"The {name} {run.status}: {run.error or 'no model was saved'}. "
                           "Press the button to train it again.")

    panel()


def _active(run_id: str) -> bool:
    try:
        return runs.get(run_id).active
    except UserError:
        return False


trade_off_plot()
st.subheader("Margin")
top = quick_top_layers(ui.state.model_name())  # 0 where the model cannot (not BERT-style, or too few layers)
st.caption("What a triplet margin does, before any training: the share of the reference model's mined "
           "triplets whose constraint is still active. Train a quick model at the margin (256 triplets, one epoch"
           + (f", only the top {top} layers, from the frozen layers' cached output) to see where it lands on the plot "
               f"above; it is marked \"top-{top} quick\" there, and one click retrains it with every layer."
               if top else ", every layer: this model has no top-layer fast path) to see where it lands on the plot "
               "above; it is marked \"quick\" there.")
           + " A quick model is scored by P@k and S@k only, the two figures the plot shows.")
picked = margin_slider()
if picked is not None:
    if st.button(f"Train quick model at margin {picked:g}", icon=":material/bolt:", key="quick_train"):
        start_quick(picked)
    quick_status()
before_after_sections(corpus.fingerprint)
with ui.guard("Preparing a worker"):
    keep_warm()  # last: its imports would slow the scoring and mining above on a small CPU
