"""The commands that compute in this process: evaluate, layers, maps, compare, published."""

from __future__ import annotations

import sys

from core.cli.common import (DISCOUNT, K_PARAM, LIST_SHAPE, TqdmPhases, columns_given, kind_of, kind_words,
                             load_labelled, refuse_flags, warn_corpus, warn_line)
from core.errors import UserError, shorten
from core.evaluation.headline import HEADLINE, intervals_text
from core.evaluation.uncertainty import figure_interval
from core.models.loading import DEFAULT_MODEL, SavedModel
from core.runs.store import RunStore


def cmd_evaluate(args) -> dict:
    """The reference evaluation of any corpus kind (core.evaluation.corpus_eval): P@k / S@k / kNN of labelled texts,
    STS Spearman of pairs, ordering of lists."""
    from core.data.kinds import KINDS, load_any
    from core.evaluation.corpus_eval import evaluate_corpus
    from core.evaluation.evaluate import EvalSettings

    k = K_PARAM.parse(K_PARAM.default if args.k is None else args.k)
    discount = DISCOUNT.parse(DISCOUNT.default if args.discount is None else args.discount)
    kind = kind_of(args)
    shape = LIST_SHAPE.parse(LIST_SHAPE.default if args.list_shape is None else args.list_shape)
    refuse_flags({"--list-shape": args.list_shape, "--k": args.k, "--discount": args.discount,
                  "--knn-metric": args.knn_metric}, kind, kind_words(args, kind))
    corpus = load_any(args.corpus, drop_leaked=args.drop_leaked, list_shape=shape, kind=kind, **columns_given(args))
    warn_corpus(corpus)
    model = SavedModel(args.model, args.device)  # loaded only if a figure is not cached
    judged = KINDS[kind].judged  # a reference model judges its figures (S@k)
    reference = model if not judged or args.reference in (None, args.model) else SavedModel(args.reference,
                                                                                          args.device)
    settings = EvalSettings(k=k, discount=discount, knn_metric=args.knn_metric or "euclidean")
    bars = TqdmPhases()
    try:
        result = evaluate_corpus(model, reference, corpus, settings, progress=bars,
                                 model_name=args.model or "all-MiniLM-L6-v2")
    finally:
        bars.close()
    if judged:
        result["reference"] = args.reference or result["model"]
        result["targets"] = corpus.target_split
        if result["k"] < k:  # the source pool is smaller than k: P@k / S@k were computed at the pool's size
            warn_line(f"P@k and S@k are computed at k = {result['k']}, not the {k} asked for: the source pool holds "
                      f"only {result['k']} training texts ({settings.pool_factor} per {corpus.target_split} text, at "
                      "most the training split).")
    _warn_interval(result)
    from core.evaluation.published import beside, corpus_keys, published

    figures = published(corpus_keys(corpus), warn=warn_line)  # stored with the corpus: `published`
    if not figures:
        return result
    ours = result.get("k"), result.get("discount")  # a pair or list result has neither, nor P@k / S@k figures
    caveats = {key: caveat for key, f in figures.items() if (caveat := beside(f, *ours))}
    return {**result, "published": {key: f.value for key, f in figures.items()},
            **({"published_caveats": caveats} if caveats else {})}


def _warn_interval(result: dict) -> None:
    """STS Spearman over fewer than FEW_SCORED_PAIRS pairs (fewer than MIN_SCORED_PAIRS are refused when the corpus
    is read) on stderr with its own 95% interval, which the figure alone does not show."""
    from core.data.pairs import FEW_SCORED_PAIRS

    n, value = result.get("n_pairs"), result.get("sts_spearman")
    if value is None or n is None or n >= FEW_SCORED_PAIRS:  # n_pairs: a pair corpus's STS
        return
    print(f"warning: STS Spearman {value:.2f} is computed on only {n} {result['target_split']} pairs: its 95% "
          f"interval, {_interval_text(result.get('sts_spearman_ci'))}, is wide; {FEW_SCORED_PAIRS} or more pairs "
          "narrow it.", file=sys.stderr)


def _interval_text(ci) -> str:
    low, high = ci if ci else (None, None)
    return "undefined" if low is None or high is None else f"{low:.1f} to {high:.1f}"


def _published_text(r: dict, key: str, share: bool = False) -> str:
    """" (published: 77.6)" beside a figure of evaluate's printout when the corpus has one stored, else "", with its
    caveat where it was measured at another k or discount than ours (core.evaluation.published.beside): " (published:
    63.0, measured at k = 16 with uniform weights, ours at k = 5 with linear discount)"; `share`: an accuracy as the
    line prints it, a share with 3 decimals ("0.912"), not as the cards do ("91.2%")."""
    value = (r.get("published") or {}).get(key)
    if value is None:
        return ""
    shown = f"{value:.3f}" if share else next(m for m in HEADLINE if m.key == key).text(value)
    caveat = (r.get("published_caveats") or {}).get(key)
    return f" (published: {shown}{f', {caveat}' if caveat else ''})"


def cmd_published(args) -> dict:
    """The published figures stored with a corpus (core.evaluation.published), by its fingerprint: listed, or one
    or several set (--set METRIC=VALUE in the shown unit, repeated for several; --note their source, --k and
    --discount where a P@k or S@k was measured) or one removed (--remove METRIC)."""
    from core.data.kinds import load_any
    from core.evaluation.published import (
        AT_K,
        checked_metric,
        checked_note,
        checked_setting,
        checked_value,
        corpus_keys,
        figures_kind,
        published,
        remove_published,
        set_published,
    )

    if args.set is not None and args.remove is not None:
        raise UserError("Give --set or --remove, not both.")
    if args.note is not None and args.set is None:
        raise UserError("--note is the source of a figure you --set METRIC=VALUE; give it with --set.")
    if args.unit is not None and args.set is None:
        raise UserError("--unit says how a figure you --set METRIC=VALUE is given; give it with --set.")
    if (args.k is not None or args.discount is not None) and args.set is None:
        raise UserError("--k and --discount say where a P@k or S@k you --set METRIC=VALUE was measured; give them "
                        "with --set.")
    kind = kind_of(args)  # from the header only
    figures_to_set: dict[str, str] = {}
    for given in args.set or ():  # checked before the corpus is read: a bad value answers at once
        if "=" not in given:
            raise UserError(f"--set takes METRIC=VALUE, e.g. --set sts_spearman=77.6; got {shorten(given)}.")
        key, value = (part.strip() for part in given.split("=", 1))
        if key in figures_to_set:
            raise UserError(f"--set names {shorten(key)} twice; give each figure once.")
        checked_metric(key, kind)  # a metric the corpus never reports is refused before its value's unit is asked
        checked_value(key, value, args.unit)
        checked_note(args.note)
        checked_setting(key, args.k, args.discount)
        figures_to_set[key] = value
    if args.remove is not None:
        checked_metric(args.remove)
    shape = LIST_SHAPE.parse(LIST_SHAPE.default if args.list_shape is None else args.list_shape)
    refuse_flags({"--list-shape": args.list_shape}, kind, kind_words(args, kind))
    corpus = load_any(args.corpus, drop_leaked=args.drop_leaked, list_shape=shape, kind=kind, **columns_given(args))
    action = None
    if figures_to_set:
        action = {"set": [set_published(corpus_keys(corpus), key, value, args.note, kind=figures_kind(corpus),
                                        warn=warn_line, k=args.k, discount=args.discount, unit=args.unit).label()
                          for key, value in figures_to_set.items()]}
    elif args.remove is not None:
        action = {"removed": remove_published(corpus_keys(corpus), args.remove, warn=warn_line).label()}
    figures = published(corpus_keys(corpus), warn=warn_line)
    return {"corpus": str(args.corpus), "kind": corpus.kind, "fingerprint": corpus.fingerprint,
            "content_key": corpus.content_key, **(action or {}),
            "published": {key: {"value": f.value, "shown": f.text(), "note": f.note, "label": f.label(),
                                **({"k": f.k, "discount": f.discount} if key in AT_K else {})}
                          for key, f in figures.items()}}


def cmd_layers(args) -> dict:
    """kNN accuracy per layer; with --compare, also the run's model's and the linear CKA between the two."""
    from core.evaluation.evaluate import EvalSettings, compare_layers, evaluate_layers
    from core.runs.labels import run_reference

    corpus = load_labelled(args, "Layer-wise kNN accuracy classifies texts by their label")
    settings = EvalSettings(layer_metric=args.knn_metric)
    run = _finished_run(args.compare) if args.compare is not None else None
    name = args.model or (run_reference(run) if run is not None else DEFAULT_MODEL)
    model = SavedModel(name, args.device)  # loaded only if a state is not cached
    bars = TqdmPhases()
    try:
        if run is None:
            return {"model": name, "layers": evaluate_layers(model, corpus, settings, progress=bars)}
        tuned = SavedModel(run.artefacts["model"], args.device)
        return {"model": name, "run_id": run.id, "layers": compare_layers(model, tuned, corpus, settings, bars)}
    finally:
        bars.close()


def cmd_maps(args) -> dict:
    """The Maps page's maps (same code path and cache): the reference map, and with --run the run's fine-tuned map
    started from it, written to --out as HTML, PNG and Parquet."""
    from core.analysis.maps import MAX_POINTS, map_data, output_dir, write_maps
    from core.analysis.projection import neighbours_kept
    from core.runs.labels import run_reference

    max_points = MAX_POINTS.parse(MAX_POINTS.default if args.max_points is None else args.max_points)
    out = output_dir(args.out)
    run = _finished_run(args.run) if args.run is not None else None
    corpus = load_labelled(args, "Maps colour texts by their label")
    reference = SavedModel(args.model or (run_reference(run) if run is not None else DEFAULT_MODEL), args.device)
    tuned = SavedModel(run.artefacts["model"], args.device) if run is not None else None
    bars = TqdmPhases()
    try:
        data = map_data(reference, tuned, corpus, args.method, max_points, progress=bars)
    finally:
        bars.close()
    files = write_maps(data, out)
    aligned = data.tuned_map is not None
    return {"n_points": len(data), "seconds_reference": round(data.ref_seconds, 2),
            "seconds_aligned": round(data.tuned_seconds, 2) if aligned else None,
            "neighbours_kept": round(neighbours_kept(data.ref_map, data.tuned_map), 4) if aligned else None,
            "method": args.method, "run_id": run.id if run is not None else None, "files": [str(f) for f in files]}


def _finished_run(run_id: str):
    """A run whose model can be loaded, or a UserError saying why not."""
    run = RunStore().get(run_id)  # a UserError when there is none
    if run.status != "done" or "model" not in run.artefacts:
        raise UserError(f"Run {run_id} is {run.status} and has no model to compare; pick a finished training run.")
    return run


def _compared(store: RunStore, run_id: str):
    """A run with figures to compare: a finished training run (its evaluation after training)."""
    run = store.get(run_id)  # a UserError when there is none
    if run.damaged:
        raise UserError(f"Run {run_id} has a {run.error}; its figures cannot be compared.")
    if run.status != "done" or not run.metrics_after:
        raise UserError(f"Run {run_id} is {run.status} and has no evaluation after training to compare; pick a "
                        "finished training run (python -m core runs lists them).")
    return run


def cmd_compare(args) -> dict:
    """Paired differences, run B - run A, of every figure both runs report on the same test items, with their 95%
    intervals and p-values (core.evaluation.paired); one run: its figures after training - before."""
    from core.evaluation.paired import compared

    store = RunStore()
    a = _compared(store, args.run_a)
    if args.run_b is None:
        before, after, names = a.before or {}, a.metrics_after, (f"{a.id} before", f"{a.id} after")
    else:
        b = _compared(store, args.run_b)
        before, after, names = a.metrics_after, b.metrics_after, (a.id, b.id)
    result = compared(before, after)  # stored: the per-class table below reads the same computation
    if not result["metrics"] and not result["notes"]:
        raise UserError(f"{names[0]} and {names[1]} report no figure in common (one is a labelled-text run, the "
                        "other a pair or list run?); compare runs on the same corpus.")
    from core.evaluation.per_class import RECALL_CI, per_class_frame  # sklearn: only where it is needed

    classes = per_class_frame(before, after)  # per class: its changes with their paired intervals, where it has any
    return {"a": names[0], "b": names[1], "k": before.get("k"), "metrics": result["metrics"],
            "notes": result["notes"], "classes": classes.to_dict("records") if RECALL_CI in classes else []}


def print_evaluate(r: dict) -> None:
    """An evaluation's figures as lines, by the corpus kind's printer: the three kinds here have their own, one
    registered later (core.data.kinds) gets its headline figures with their intervals."""
    PRINTERS.get(r["kind"], _print_figures)(r)


def _print_lists(r: dict) -> None:
    print(f"list corpus; model {r['model']}  (targets: {r['target_split']}, n={r['n_lists']} "
          f"{r['list_shape']} lists)")
    print(f"ordering accuracy {100 * r['ordering_accuracy']:.1f}%{_published_text(r, 'ordering_accuracy')}   "
          f"Kendall tau {r['kendall_tau']:.3f}{_published_text(r, 'kendall_tau')}")
    _print_intervals(r)


def _print_pairs(r: dict) -> None:
    print(f"pair corpus; model {r['model']}  (targets: {r['target_split']}, n={r['n_pairs']} pairs)")
    value = r["sts_spearman"]
    print("no score column, so no STS Spearman" if value is None else
          f"STS Spearman x100 {value:.2f} (95% CI {_interval_text(r.get('sts_spearman_ci'))})"
          f"{_published_text(r, 'sts_spearman')}")


def _print_figures(r: dict) -> None:
    print(f"{r['kind']} corpus; model {r['model']}  (targets: {r.get('target_split', 'test')})")
    print("   ".join(f"{m.short.format(k=r.get('k', 'k'))} {m.text(r[m.key])}{_published_text(r, m.key)}"
                     for m in HEADLINE if r.get(m.key) is not None))
    _print_intervals(r)


def _print_labelled(r: dict) -> None:
    print(f"model {r['model']}  (S judged by {r['reference']}; targets: {r['targets']}, n={r['n_queries']}, "
          f"pool={r['n_pool']})")
    print(f"P@{r['k']} {r['polarity']:.1f} (sd {r['polarity_sd']:.1f}){_published_text(r, 'polarity')}   "
          f"S@{r['k']} {r['similarity']:.1f} (sd {r['similarity_sd']:.1f}){_published_text(r, 'similarity')}   "
          f"rank discount {r['discount']}")
    print(f"kNN accuracy {r['knn_accuracy']:.3f} (n_train={r['n_knn_train']})"
          f"{_published_text(r, 'knn_accuracy', True)}   "
          f"linear probe {r.get('linear_accuracy', float('nan')):.3f}{_published_text(r, 'linear_accuracy', True)}")
    _print_intervals(r)


PRINTERS = {"labelled": _print_labelled, "pairs": _print_pairs, "lists": _print_lists}


def _print_intervals(r: dict) -> None:
    """Each figure's 95% interval, in the unit the pages show it (core.evaluation.headline.intervals_text)."""
    text = intervals_text(r, r.get("k", "k"))
    if text:
        print(f"95% intervals: {text}")


def print_published(r: dict) -> None:
    for label in r.get("set", []):
        print(f"stored: {label}")
    if "removed" in r:
        print(f"removed: {r['removed']}")
    where = f"{r['corpus']} ({r['kind']}, fingerprint {r['fingerprint']})"
    if not r["published"]:
        print(f"no published figures for {where}; add one with --set METRIC=VALUE --note SOURCE")
        return
    print(f"published figures for {where}:")
    for f in r["published"].values():
        print(f"  {f['label']}")


def print_layers(r: dict) -> None:
    print(f"model {r['model']}" + (f" vs run {r['run_id']}" if "run_id" in r else ""))
    for row in r["layers"]:
        line = f"layer {row['layer']:>2}  kNN accuracy {row['knn_accuracy']:.3f}{_bounds(row, 'knn_accuracy')}"
        if "cka" in row:
            line += (f"  fine-tuned {row['knn_accuracy_tuned']:.3f}{_bounds(row, 'knn_accuracy_tuned')}  "
                     f"CKA {row['cka']:.3f}")
        print(line)
    print("[...]: 95% interval over the test texts (Wilson)")


def _bounds(row: dict, key: str) -> str:
    """" [0.912, 0.951]": a layer's accuracy interval as the line prints the accuracy; "" where it is undefined."""
    bounds = figure_interval(row, key)
    return f" [{bounds[0]:.3f}, {bounds[1]:.3f}]" if bounds else ""


def print_maps(r: dict) -> None:
    print(f"{r['n_points']:,} texts; reference map {r['seconds_reference']:.1f} s"
          + (f", fine-tuned map {r['seconds_aligned']:.1f} s (keeps {r['neighbours_kept']:.1%} of each point's 10 "
             f"nearest map neighbours)" if r["seconds_aligned"] is not None else ""))
    for path in r["files"]:
        print(path)


def print_compare(r: dict) -> None:
    from core.evaluation.headline import HEADLINE, p_text

    metric = {m.key: m for m in HEADLINE}
    print(f"b = {r['b']}, a = {r['a']}; b - a with its paired 95% interval (bootstrap over the test items)")
    for d in r["metrics"]:
        m = metric[d["name"]]
        extra = "" if d["mcnemar_p"] is None else f" (McNemar {p_text(d['mcnemar_p'])})"
        print(f"  {m.short.format(k=r.get('k') or 'k'):<18} {m.text(d['a'])} -> {m.text(d['b'])}  "
              f"{m.difference_text(d['delta'], d['ci_low'], d['ci_high'], d['p_value'])}{extra}  n = {d['n']}")
    for note in r["notes"]:
        print(f"  note: {note}")
    if r.get("classes"):
        from core.evaluation.paired import FEW_ITEMS, MIN_ITEMS
        from core.evaluation.per_class import CHANGE_CI, RECALL_CI

        print(f"per class: b - a, paired over the class's own test texts (no interval below {MIN_ITEMS} of them, "
              f"rough below {FEW_ITEMS})")
        for row in r["classes"]:
            p = next(c.removesuffix(f" {CHANGE_CI}") for c in row if c.startswith("P@") and c.endswith(CHANGE_CI))
            print(f"  {row['class']} (n = {row['n']}): kNN recall {row['kNN recall change']:+.1f} pp "
                  f"{row[RECALL_CI]}; {p} {row[f'{p} change']:+.1f} {row[f'{p} {CHANGE_CI}']}")
