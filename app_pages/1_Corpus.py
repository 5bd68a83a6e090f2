"""Corpus page: load a labelled corpus, a pair corpus or a list corpus, read its validation report, and score the
reference model on it (P@k / S@k on labels, STS Spearman on scored pairs, ordering accuracy and Kendall tau on
ranked lists)."""

from dataclasses import asdict

import streamlit as st

import ui
from core.data.content import recent_uploads
from core.data.corpus import Columns, detect_columns
from core.data.kinds import KINDS, kind_of, table_kind
from core.data.lists import ListColumns, detect_list_columns, list_summary, size_range
from core.data.pairs import PairColumns, detect_pair_columns, pair_summary
from core.data.table import DEFAULT_MAX_BYTES, ColumnError
from core.errors import UserError
from core.evaluation.corpus_eval import evaluate_corpus
from core.evaluation.evaluate import EvalSettings
from core.evaluation.headline import DISCOUNTS, HEADLINE
from core.evaluation.published import (
    AT_K,
    K_MAX,
    UNITS,
    ambiguous,
    corpus_keys,
    figure_sets,
    figures_kind,
    published,
    remove_published,
    set_published,
)
from core.models.encode import count_overlong
from core.training.config import LIST_SHAPES
from ui.corpus_view import (
    balance_figure,
    column_advice,
    corpus_frame,
    list_frame,
    pair_frame,
    pick_note,
)
from ui.layout import escaped, literal
from ui.per_class_view import per_class_results
from ui.run_panel import interval_caption, published_caption
from ui.state import Table

SOURCES = ("Demo corpus", "Upload a file", "Paste a table", "A recent upload")
FILE_TYPES = ["csv", "tsv", "tab", "txt", "jsonl", "ndjson", "json", "parquet", "pq"]
NO_SPLIT = "(none: hold out 10%)"
NO_COLUMN = "(none)"
PREVIEW_ROWS = 1000
DROP_LEAKED = "drop_leaked"  # the leakage checkbox's key: drawn in the report, read before the corpus is built
SETTINGS = EvalSettings()
ORDERING = {m.key: m for m in HEADLINE if m.key in ("ordering_accuracy", "kendall_tau")}

st.title("Corpus")
st.caption("One text and one label per row, plus an optional split column (train / test / validation); "
           "without one, a stratified 10% is held out with seed 0. A table with text1 and text2 columns is a pair "
           "corpus: a similarity score and / or an NLI label (entailment, neutral, contradiction) per pair. "
           "A table with list_id and rank columns is a list corpus: one row per list member, rank 1 the anchor, "
           "then its members from most to least related. Texts are never sent anywhere.")


def choose_table() -> Table | None:
    """The table the user gives now (a failed parse shows its message), or None while there is none."""
    current = ui.state.table()
    source = st.radio("Source", SOURCES, horizontal=True, key="corpus_source", persist_state="session")
    if source == SOURCES[0]:
        return ui.state.demo_table()
    if source == SOURCES[1]:
        file = st.file_uploader("CSV, TSV, JSON Lines or Parquet, with a header row", type=FILE_TYPES,
                                max_upload_size=DEFAULT_MAX_BYTES // 2**20)
        if file is not None:
            with st.spinner(f"Reading {file.name} ({file.size / 2**20:.1f} MB)…", show_time=True):
                return ui.state.upload_table(file)
        if current is not None and current.source == "upload":
            st.caption(f"Using the uploaded file {literal(current.name)}; upload another one to replace it.")
            return current
        return None
    if source == SOURCES[3]:
        recent = recent_uploads()
        if not recent:
            st.caption("No upload is kept yet: each file you upload is kept in this app's home and listed here, so a "
                       "browser reload does not lose it.")
            return None
        picked = st.selectbox("Recent uploads, newest first", range(len(recent)), key="corpus_recent",
                              format_func=lambda i: recent[i]["name"])
        return ui.state.recent_table(recent[picked])
    text = st.text_area("Paste a table with a header row (CSV, TSV or semicolon-separated)", height=150,
                        key="corpus_paste", persist_state="session",
                        placeholder="text,label\nThe striker scored twice in extra time.,sport\n…")
    if not text or not text.strip():
        return None
    with st.spinner("Reading the pasted table…", show_time=True):
        return ui.state.pasted_table(text)


def _index(options: list[str], name: str | None) -> int | None:
    return options.index(name) if name in options else None


def choose_columns(table: Table, _kind) -> tuple[Columns, bool, bool] | None:
    """Column pickers pre-filled with what detect_columns finds (the columns, drop duplicates, drop leaked texts);
    None until text and label are picked, with a note above the pickers naming the column(s) still to pick."""
    names = [str(c) for c in table.df.columns]
    try:
        detected = asdict(detect_columns(table.df))
    except ColumnError as exc:
        detected = exc.found  # what was found pre-fills its picker; the note names the rest until picked
    note = st.empty()
    text_box, label_box, split_box, dedupe_box = st.columns([2, 2, 2, 1.3], vertical_alignment="bottom")
    text = text_box.selectbox("Text column", names, index=_index(names, detected.get("text")),
                              key=f"text_col:{table.key}", persist_state="session", placeholder="Pick a column")
    label = label_box.selectbox("Label column", names, index=_index(names, detected.get("label")),
                                key=f"label_col:{table.key}", persist_state="session", placeholder="Pick a column")
    splits = [NO_SPLIT, *names]
    split = split_box.selectbox("Split column", splits, index=_index(splits, detected.get("split")) or 0,
                                key=f"split_col:{table.key}", persist_state="session")
    dedupe = dedupe_box.checkbox("Drop duplicates", key="drop_duplicates", persist_state="session",
                                 help="Keep only the first copy of a text that appears more than once.")
    unpicked = tuple(role for role, column in (("text", text), ("label", label)) if column is None)
    if unpicked:
        note.info(pick_note(unpicked))
        return None
    if len({text, label, split}) < 3:
        st.error("The text, label and split columns must be different columns.")
        return None
    columns = Columns(text=text, label=label, split=None if split == NO_SPLIT else split)
    return columns, dedupe, bool(st.session_state.get(DROP_LEAKED, False))


def pick_roles(table: Table, detect, roles: dict[str, tuple[str, bool]], none: str) -> dict | None:
    """One picker per role (title, required), pre-filled with what `detect` finds; the picks (None for an optional
    role left at `none`), or None with a line saying why until the required roles have distinct columns."""
    names = [str(c) for c in table.df.columns]
    try:
        detected, problem = detect(table.df), None
    except UserError as exc:
        detected, problem = None, exc
    note = st.empty()  # filled below while a required role is unpicked
    picked = {}
    for box, (role, (title, required)) in zip(st.columns(len(roles)), roles.items()):
        options = names if required else [none, *names]
        index = _index(options, getattr(detected, role) if detected else None)
        value = box.selectbox(title, options, index=index if required else index or 0,
                              key=f"{role}_col:{table.key}", persist_state="session", placeholder="Pick a column")
        picked[role] = None if value == none else value
    missing = [title.lower() for role, (title, required) in roles.items() if required and picked[role] is None]
    if missing:
        lead = "" if problem is None else f"{escaped(problem)} "
        note.info(f"{lead}Pick the {' and the '.join(missing)}.")
        return None
    chosen = [c for c in picked.values() if c is not None]
    if len(set(chosen)) < len(chosen):
        st.error("Each role needs a different column.")
        return None
    return picked


def choose_pair_columns(table: Table, _kind) -> tuple[PairColumns, bool, bool] | None:
    """Pickers for a pair table: (columns, drop duplicates, drop leaked pairs), None until the mapping is usable.
    Pairs that repeat are kept (the report counts them), so duplicates are never dropped."""
    roles = {"text1": ("Text1 column", True), "text2": ("Text2 column", True), "score": ("Score column", False),
             "label": ("Label column", False), "split": ("Split column", False)}
    picked = pick_roles(table, detect_pair_columns, roles, NO_COLUMN)
    if picked is not None and picked["score"] is None and picked["label"] is None:
        st.info("Pick a score column, a label column or both.")
        return None
    return None if picked is None else (PairColumns(**picked), False, bool(st.session_state.get(DROP_LEAKED, False)))


def choose_list_columns(table: Table, _kind) -> tuple[ListColumns, bool, bool, str] | None:
    """Pickers for a list table and its shape: (columns, drop duplicates, drop leaked texts, shape), None until the
    mapping is usable. A list holds its members once each, so no duplicate is dropped."""
    roles = {"list_id": ("List id column", True), "rank": ("Rank column", True), "text": ("Text column", True),
             "split": ("Split column", False)}
    picked = pick_roles(table, detect_list_columns, roles, NO_SPLIT)
    shape = st.radio("List shape", tuple(LIST_SHAPES), captions=tuple(LIST_SHAPES.values()), horizontal=True,
                     key=f"list_shape:{table.key}", persist_state="session",
                     help="Which rows of a list have a known order: what ListMLE trains and the ordering metrics "
                          "score (see Definitions, ListMLE post-training).")
    drop_leaked = bool(st.session_state.get(DROP_LEAKED, False))
    return None if picked is None else (ListColumns(**picked), False, drop_leaked, shape)


def choose_role_columns(table: Table, kind) -> tuple[object, bool, bool] | None:
    """Pickers for a kind without pickers of its own (core.data.kinds.register): one per role of the kind, its
    required roles first to pick; (columns, drop duplicates, drop leaked items)."""
    roles = {role: (f"{role.replace('_', ' ').capitalize()} column", role in kind.required) for role in kind.roles}
    picked = pick_roles(table, kind.detect, roles, NO_COLUMN)
    drop_leaked = bool(st.session_state.get(DROP_LEAKED, False))
    return None if picked is None else (kind.column_type(**picked), False, drop_leaked)


def choose_kind(table: Table):
    """The kind the table is read as: the one its column names suggest, or the one the user picks, whose roles the
    pickers below then map (a pair file in its release's own names, SICK's sentence_A and sentence_B, reads as
    labelled texts by its names alone)."""
    names = list(KINDS)
    detected = table_kind(table.df)
    picked = st.radio("Read the table as", names, index=names.index(detected), horizontal=True,
                      format_func=lambda name: KINDS[name].title, key=f"corpus_kind:{table.key}",
                      persist_state="session", help="Detected from the column names; pick another kind to map "
                      "its columns yourself.")
    return KINDS[picked]


def choose_model() -> None:
    current = ui.state.model_name()
    typed = st.text_input("Reference model", value=current,
                          help="A local sentence-transformers directory, or a packaged model such as "
                               "all-MiniLM-L6-v2 (a Hugging Face id when online). Used for token counts and "
                               "the evaluation below.")
    if typed and typed.strip() != current:
        with ui.guard("Switching the model") as outcome:
            ui.state.set_model_name(typed)
        if not outcome.failed:
            st.rerun()


def overlong(corpus) -> tuple[int, int] | None:
    """(texts longer than the model's limit, the limit in tokens), once per corpus and model. Tokenizing 100k
    texts takes seconds, so it shows a progress bar where it is called."""
    cache, key = ui.state.session_cache("overlong"), (corpus.fingerprint, ui.state.model_name())
    if key not in cache:
        with ui.guard("Counting over-long texts"), ui.progress_bar("Loading the model…") as bar:
            model = ui.get_model()
            count = count_overlong(model, kind_of(corpus).texts(corpus),
                                   progress=lambda d, t: bar("Counting tokens", d, t))
            cache[key] = count, model.max_seq_length
    return cache.get(key)


def overlong_card(where, corpus) -> None:
    """Filled in last (`where` is an st.empty in the report's cards), so the rest of the report shows at once; a
    failed count keeps its error box under a "–"."""
    with where.container():
        too_long = overlong(corpus)
        if too_long is None:
            st.metric("Over-long texts", "–", border=True)
            return
    where.metric("Over-long texts", f"{too_long[0]:,}", border=True,
                 help=f"Longer than the model's {too_long[1]} tokens; truncated when encoded.")


CARDS_PER_ROW = 4  # six or seven in one row cut labels short at 1,400 px ("Over-long te...")


def report_cards(n: int) -> list:
    """`n` slots for the report's metric cards, in rows of at most CARDS_PER_ROW."""
    return [slot for _ in range(0, n, CARDS_PER_ROW) for slot in st.columns(CARDS_PER_ROW)][:n]


def show_report(corpus) -> None:
    report = corpus.report
    cards = report_cards(6)
    cards[0].metric("Rows read", f"{report.rows_read:,}", border=True)
    cards[1].metric("Rows kept", f"{report.rows_kept:,}", border=True)
    cards[2].metric("Empty texts", f"{report.empty_dropped:,}", border=True, help="Rows dropped: no text.")
    cards[3].metric("Missing labels", f"{report.missing_label_dropped:,}", border=True,
                    help="Rows dropped: a text without a label.")
    cards[4].metric("Duplicates", f"{duplicates_shown(report):,}", border=True, help=duplicates_help(report))
    overlong_slot = cards[5].empty()
    st.caption(f"{len(corpus.classes)} classes · {len(corpus.train_texts):,} train and {len(corpus.test_texts):,} "
               f"{corpus.target_split} texts · split: {report.split_source}")
    for warning in report.warnings:
        st.warning(escaped(warning))
    if report.leaked:
        show_leakage(corpus)
    chart, preview = st.columns(2)
    with chart:
        st.markdown("**Class balance**")
        st.plotly_chart(balance_figure(corpus), config={"displayModeBar": False})
    with preview:
        frame = corpus_frame(corpus)
        st.markdown(f"**Preview** · first {min(PREVIEW_ROWS, len(frame)):,} of {len(frame):,} texts")
        st.dataframe(frame.head(PREVIEW_ROWS), height=340, hide_index=True)
    overlong_card(overlong_slot, corpus)


def duplicates_shown(report) -> int:
    """The repeated texts of the training split, which training reads (the whole file's for a report without
    per-split counts)."""
    return next(iter(report.duplicates_by_split.values()), report.duplicates)


def duplicates_help(report) -> str:
    """The repeats of each split a run reads, train first, with the texts each holds under several labels; and
    what dropping them does."""
    counts = [f"{n:,} in {name} ({report.conflicting_by_split.get(name, 0):,} texts under different labels)"
              for name, n in report.duplicates_by_split.items()]
    where = f"Repeated texts: {', '.join(counts)}; {report.duplicates:,} over the whole file. " if counts else ""
    return where + ("Dropped." if report.duplicates_dropped else "Kept; tick Drop duplicates to remove them.")


def show_leakage(corpus) -> None:
    """Target items (texts, pairs, lists) that are also training items, which a model can score by memory; the
    checkbox drops them from the target split. It is read before the corpus is built (choose_columns and the pair
    and list pickers), so it stays while the report shows items to drop or dropped. Pairs and lists that only share
    a text with training items (core.data.leakage) get their own warning: nothing drops those."""
    report, target = corpus.report, corpus.target_split
    if report.leaked:
        examples = [_leak_example(e) for e in report.leaked_examples]
        if report.leaked > len(examples):
            examples.append("…")
        done = (f"; dropped from the {target} split" if report.leaked_dropped
                else ", so a model can score them by memory")
        st.warning(f"**{corpus.leakage()}**{done}. For example:\n" + "\n".join(f"- {e}" for e in examples),
                   icon=":material/content_copy:")
        st.checkbox(f"Drop them from the {corpus.target_split} split", key=DROP_LEAKED, persist_state="session",
                    help="The training rows and the split of every other row stay as they are; the corpus "
                         "fingerprint changes, so cached results of the two versions never mix.")
    sharing = corpus.sharing()
    if sharing:
        examples = [_leak_example(t) for t in report.shared_examples]
        st.warning(f"**{sharing}**, so a model may score them partly by memory; only exact repeats can be dropped. "
                   "Shared, for example:\n" + "\n".join(f"- {e}" for e in examples), icon=":material/join_inner:")


def _leak_example(example) -> str:
    """A leaked text, or a leaked pair as two texts, as code spans cut to one short line."""
    if isinstance(example, str):
        return literal(example if len(example) <= 80 else example[:79] + "…")
    return " · ".join(literal(t if len(t) <= 60 else t[:59] + "…") for t in example)


def show_pair_report(corpus) -> None:
    report = corpus.report
    st.markdown(f"**Pair corpus**: {pair_summary(corpus)}")
    cards = report_cards(7)
    cards[0].metric("Rows read", f"{report.rows_read:,}", border=True)
    cards[1].metric("Pairs kept", f"{report.rows_kept:,}", border=True,
                    help="Rows with both texts and a score or label; the line below says which of them are used.")
    cards[2].metric("Empty texts", f"{report.empty_dropped:,}", border=True, help="Rows dropped: text1 or text2 empty.")
    cards[3].metric("Missing values", f"{report.missing_score_dropped + report.missing_label_dropped:,}", border=True,
                    help=f"Rows dropped: {report.missing_score_dropped:,} without a score, "
                         f"{report.missing_label_dropped:,} without a label.")
    cards[4].metric("Duplicates", f"{report.duplicates:,}", border=True, help="Pairs that appear more than once; kept.")
    leak_card(cards[5], corpus, "pairs", "have a text that also occurs in a training pair")
    overlong_slot = cards[6].empty()
    unused = report.rows_kept - len(corpus.train) - len(corpus.test)
    st.caption(f"{len(corpus.train):,} train and {len(corpus.test):,} {corpus.target_split} pairs"
               + (f" · {unused:,} kept pairs in a split neither trained on nor evaluated (a validation split beside "
                  "a test split)" if unused else "") + f" · split: {report.split_source}")
    for warning in report.warnings:
        st.warning(escaped(warning))
    show_leakage(corpus)
    frame = pair_frame(corpus)
    st.markdown(f"**Preview** · first {min(PREVIEW_ROWS, len(frame)):,} of {len(frame):,} pairs")
    st.dataframe(frame.head(PREVIEW_ROWS), height=340, hide_index=True)
    overlong_card(overlong_slot, corpus)


def leak_card(card, corpus, units: str, shares: str) -> None:
    """The target pairs or lists that are also training ones, with the softer figure (sharing a text) in its help."""
    report = corpus.report
    card.metric(f"Leaked {units}", f"{report.leaked:,}", border=True,
                help=f"{corpus.target_split.capitalize()} {units} that are also training {units} "
                     f"({'dropped' if report.leaked_dropped else 'kept'}); {report.shared:,} {shares}, these "
                     "included.")


def show_list_report(corpus) -> None:
    report = corpus.report
    st.markdown(f"**List corpus**: {list_summary(corpus)}")
    cards = report_cards(7)
    cards[0].metric("Rows read", f"{report.rows_read:,}", border=True)
    cards[1].metric("Lists kept", f"{report.lists_kept:,}", border=True)
    cards[2].metric("List sizes", size_range(*corpus.summary()["list_size"]), border=True,
                    help="Texts per list, the anchor included.")
    cards[3].metric("Train lists", f"{len(corpus.train):,}", border=True)
    cards[4].metric(f"{corpus.target_split.capitalize()} lists", f"{len(corpus.test):,}", border=True,
                    help="The lists the ordering is scored on.")
    leak_card(cards[5], corpus, "lists", "have an anchor that also occurs in a training list")
    overlong_slot = cards[6].empty()
    st.caption(f"{len(corpus.train):,} train and {len(corpus.test):,} {corpus.target_split} lists · "
               f"split: {report.split_source}")
    for warning in report.warnings:
        st.warning(escaped(warning))
    show_leakage(corpus)
    ids = (corpus.train.ids + corpus.test.ids)[:PREVIEW_ROWS]
    where = {list_id: "train" for list_id in corpus.train.ids}
    picked = st.selectbox("Preview list", ids, format_func=lambda i: f"{i} ({where.get(i, corpus.target_split)})",
                          key=f"preview_list:{corpus.fingerprint}")
    st.dataframe(list_frame(corpus, picked), hide_index=True)
    overlong_card(overlong_slot, corpus)


def reference_result(corpus, label: str, score) -> dict | None:
    """The reference model's evaluation of the corpus: computed once per corpus and model, when the button is
    pressed; the button goes once the result is there."""
    model_name = ui.state.model_name()
    results, key = ui.state.session_cache("reference_eval"), (corpus.fingerprint, model_name)
    if key not in results:
        slot = st.empty()
        if slot.button(label, type="primary", icon=":material/play_arrow:"):
            with ui.guard("The evaluation"), ui.progress_bar("Loading the model…") as bar:
                results[key] = score(ui.get_model(), model_name, bar)
            if key in results:
                slot.empty()
    return results.get(key)


def show_sts_evaluation(corpus) -> None:
    st.subheader("Reference evaluation")
    if corpus.columns.score is None:
        st.info("STS Spearman needs a score column; this corpus has NLI labels only (RAOE recipes still train on "
                "them).")
        return
    st.caption(f"**STS Spearman**: rank correlation between the reference model's cosine of each "
               f"{corpus.target_split} pair and its gold score, x100.")
    r = reference_result(corpus, "Run STS evaluation",
                         lambda model, model_name, bar: evaluate_corpus(model, model, corpus, progress=bar,
                                                                        model_name=model_name))
    if r is not None:
        st.columns(4)[0].metric("STS Spearman", f"{r['sts_spearman']:.1f}", border=True,
                                help=f"Over {r['n_pairs']:,} {r['target_split']} pairs.")
        interval_caption(r)
        published_caption(r, (corpus_keys(corpus),))


def show_list_evaluation(corpus) -> None:
    st.subheader("Reference evaluation")
    rows = "the first member to each other member" if corpus.shape == "star" else "each member to each one after it"
    st.caption(f"For each {corpus.target_split} {corpus.shape} list, the reference model's cosine of {rows}. "
               "**Ordering accuracy**: share of lists whose cosines put the members in exactly the list order. "
               "**Kendall tau**: rank correlation between the cosine order and the list order (1 = the same order, "
               "-1 = reversed), mean over the lists.")
    r = reference_result(corpus, "Run ordering evaluation",
                         lambda model, model_name, bar: evaluate_corpus(model, model, corpus, progress=bar,
                                                                        model_name=model_name))
    if r is not None:
        for card, (key, metric) in zip(st.columns(4), ORDERING.items()):
            card.metric(metric.short, metric.text(r[key]), border=True,
                        help=f"Over {r['n_lists']:,} {r['target_split']} lists.")
        interval_caption(r)
        published_caption(r, (corpus_keys(corpus),))


def show_evaluation(corpus) -> None:
    st.subheader("Reference evaluation")
    st.caption(f"**P@{SETTINGS.k}**: rank-weighted share of a {corpus.target_split} text's {SETTINGS.k} nearest "
               f"training texts that share its label (class separation). **S@{SETTINGS.k}**: their cosine to it "
               "under the reference model (kept meaning). Both x100.")
    r = reference_result(corpus, "Run reference evaluation",
                         lambda model, model_name, bar: evaluate_corpus(model, model, corpus, SETTINGS, progress=bar,
                                                                        model_name=model_name))
    if r is None:
        return
    cards = st.columns(4)
    cards[0].metric(f"P@{r['k']}", f"{r['polarity']:.1f}", border=True, help="Class separation (polarity).")
    cards[1].metric(f"S@{r['k']}", f"{r['similarity']:.1f}", border=True, help="Kept meaning (similarity).")
    cards[2].metric(f"kNN accuracy (k={SETTINGS.knn_k})", f"{100 * r['knn_accuracy']:.1f}%", border=True,
                    help=f"Majority vote of the nearest of {r['n_knn_train']:,} training texts "
                         f"({SETTINGS.knn_metric} distance).")
    cards[3].metric("Linear probe accuracy", f"{100 * r['linear_accuracy']:.1f}%", border=True,
                    help="Logistic regression trained on the frozen training embeddings.")
    interval_caption(r)
    published_caption(r, (corpus_keys(corpus),))
    st.caption(f"Standard deviation over {r['n_queries']:,} targets: P {r['polarity_sd']:.1f}, "
               f"S {r['similarity_sd']:.1f} · pool of {r['n_pool']:,} training texts")
    st.markdown("**Per class**")
    per_class_results(r, None, key="corpus:per_class", name=f"reference-{corpus.name}")


def show_kind_report(corpus) -> None:
    """The report of a kind without a report of its own: its cards, how it was split, warnings and leakage."""
    kind, report = kind_of(corpus), corpus.report
    cards = report_cards(4)
    cards[0].metric("Rows read", f"{report.rows_read:,}", border=True)
    for card, (label, value, about) in zip(cards[1:3], kind.cards(corpus)):
        card.metric(label, value, border=True, help=about)
    st.caption(f"{kind.caption(corpus, literal)} · split: {report.split_source}")
    for warning in report.warnings:
        st.warning(escaped(warning))
    show_leakage(corpus)
    overlong_card(cards[3].empty(), corpus)


def show_kind_evaluation(corpus) -> None:
    """The reference evaluation of a kind without a section of its own: a card per headline figure it reports."""
    st.subheader("Reference evaluation")
    r = reference_result(corpus, "Run reference evaluation",
                         lambda model, model_name, bar: evaluate_corpus(model, model, corpus, SETTINGS, progress=bar,
                                                                        model_name=model_name))
    if r is None:
        return
    reported = figure_sets()[figures_kind(corpus)][1]
    shown = [m for m in HEADLINE if m.key in reported and r.get(m.key) is not None]
    for card, metric in zip(st.columns(4), shown):
        card.metric(metric.short.format(k=r.get("k", "k")), metric.text(r[metric.key]), border=True)
    interval_caption(r)
    published_caption(r, (corpus_keys(corpus),))


# Each kind's pickers, report and evaluation on this page; a kind registered without its own (core.data.kinds) gets
# the pickers of its roles, its cards and a card per headline figure it reports.
VIEWS = {"labelled": (choose_columns, show_report, show_evaluation),
         "pairs": (choose_pair_columns, show_pair_report, show_sts_evaluation),
         "lists": (choose_list_columns, show_list_report, show_list_evaluation)}
KIND_VIEW = (choose_role_columns, show_kind_report, show_kind_evaluation)


def show_published(corpus) -> None:
    """Figures published for this test set elsewhere (a paper's, a leaderboard's), kept with the corpus by its
    content fingerprint (core.evaluation.published) and drawn beside ours on the run panels and the Trade-off page:
    pick a figure this corpus kind reports, enter it as the cards show it (a P@k or S@k with the k and rank discount
    it was measured at, so one beside ours at another says so), save; remove a stored one."""
    metric_of = {m.key: m for m in HEADLINE}
    with st.expander("Published figures", icon=":material/menu_book:"):
        st.caption("A reference figure for this exact test set (\"published: 77.6\"), entered as the cards show "
                   "it (an accuracy in %: 85.0 for 85 %). It is kept with this corpus, by its content, and drawn "
                   "beside ours: under a run's metric cards and on the Trade-off page.")
        kind = figures_kind(corpus)
        words, metrics = figure_sets()[kind]
        if not metrics:
            st.caption(f"{words} reports no STS Spearman (it has no gold scores), so there is no "
                       "published figure to keep beside ours.")
            return
        pick, value_box, note_box = st.columns([2, 1, 3], vertical_alignment="bottom")
        key = pick.selectbox("Figure", metrics, key=f"published_metric:{corpus.fingerprint}",
                             format_func=lambda k: metric_of[k].short.format(k="k")
                             + (" (%)" if metric_of[k].percent else ""))
        digits = metric_of[key].digits
        value = value_box.number_input("Published value", value=None, step=10.0 ** -digits,
                                       format=f"%.{digits + 1}f", key=f"published_value:{key}",
                                       placeholder="e.g. 77.6" if digits == 1 else "e.g. 0.512")
        note = note_box.text_input("Source", max_chars=200, key="published_note",
                                   placeholder="e.g. Reimers & Gurevych 2019, table 2")
        unit = None
        if value is not None and ambiguous(key, value):  # 0.85 for 85 %, or 0.85 itself: the user says which
            scaled = "%" if metric_of[key].percent else " (x100)"
            unit = st.radio(f"{value:g} is", UNITS, index=None, horizontal=True, key=f"published_unit:{key}",
                            format_func=lambda u: f"a fraction: saved as {value * 100:g}{scaled}" if u == "fraction"
                            else f"as the cards show it: saved as {value:g}")
        depth = weighting = None
        if key in AT_K:
            depth_box, weighting_box, _ = st.columns([1, 1, 4], vertical_alignment="bottom")
            depth = depth_box.number_input("Measured at k", min_value=1, max_value=K_MAX, value=16, step=1,
                                           key="published_k", help="The retrieval depth the figure was computed at: "
                                           "beside ours at another k it is shown with that caveat.")
            weighting = weighting_box.selectbox("Rank discount", DISCOUNTS, key="published_discount",
                                                help="How it weighted the k neighbours: linear, or none (uniform "
                                                     "weights, each 1/k); see docs/definitions.md, P@k and S@k.")
        if st.button("Save figure", icon=":material/save:", key="published_save"):
            with ui.guard("Saving the published figure") as outcome:
                if value is None:
                    raise UserError(f"Enter the published {metric_of[key].short.format(k='k')} first, e.g. 77.6.")
                set_published(corpus_keys(corpus), key, value, note, kind=kind, warn=st.warning, k=depth,
                              discount=weighting, unit=unit)
            if not outcome.failed:
                st.toast(f"Saved the published {metric_of[key].short.format(k='k')}.", icon=":material/check:")
        stored = published(corpus_keys(corpus), warn=st.warning)
        if not stored:
            st.caption("None stored for this corpus yet.")
        for stored_key, figure in stored.items():
            line, remove = st.columns([5, 1], vertical_alignment="center")
            line.markdown(escaped(figure.label()))
            if remove.button("Remove", key=f"published_remove:{stored_key}", icon=":material/delete:"):
                with ui.guard("Removing the published figure") as outcome:
                    remove_published(corpus_keys(corpus), stored_key)
                if not outcome.failed:
                    st.rerun()


table: Table | None = None
source_col, model_col = st.columns([3, 2])
with source_col, ui.guard("Reading the table") as read:
    table = choose_table()
with model_col:
    choose_model()
built = None
if table is not None:
    kind = choose_kind(table)
    choice = VIEWS.get(kind.name, KIND_VIEW)[0](table, kind)
    if choice is not None:
        with ui.guard("Building the corpus") as built:
            try:
                changed = ui.state.use_table(table, *choice)  # with a progress bar while it validates
            except ColumnError as exc:
                raise UserError(column_advice(exc)) from None  # the page's wording: its pickers, not CLI flags
            if changed:
                st.rerun()  # the sidebar, drawn before, must show the new corpus
elif ui.state.corpus() is not None:
    st.info(f"The current corpus stays {literal(ui.state.corpus().name)} until you give another table.")

corpus = ui.state.corpus()
unused = table is not None and ui.state.table() is not None and ui.state.table().key != table.key
failed = read.failed or (built is not None and built.failed)
if corpus is None or failed or unused:
    if unused and not failed:  # its columns are still to pick
        st.info(f"The current corpus stays {literal(corpus.name)} until this table's columns are picked.")
    st.stop()  # under a table that could not be read, built or mapped, another corpus's report would read as its own
st.subheader(f"Validation report · {literal(corpus.name)}")
_, show_kind_report_of, show_evaluation_of = VIEWS.get(corpus.kind, KIND_VIEW)
show_kind_report_of(corpus)
show_evaluation_of(corpus)
show_published(corpus)
