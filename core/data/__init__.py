"""Data: what a run learns from, read and checked before any model sees it.

- ``table``: what every corpus kind reads through (CSV / TSV / JSONL / Parquet / pasted tables to a DataFrame,
  column-name checks, text / label / split cleaning, the seeded hold-out, the leakage normalisation): ``read_file``,
  ``read_table``, ``read_pasted``, ``clean_texts``, ``split_by_column``, ``leak_text``, ``ColumnError``.
- ``corpus``: labelled corpora (detect the text and label columns, validation report, stratified split):
  ``load_corpus``, ``build_corpus``, ``Corpus``.
- ``pairs``: pair corpora (text1, text2, score and / or NLI label), and the NLI lists of their premises:
  ``load_pairs``, ``nli_lists``, ``PairCorpus``.
- ``lists``: ranked lists (an anchor, then members from most to least related) from a list file, NLI pairs or a
  labelled corpus: ``load_lists``, ``neighbour_lists``, ``ListCorpus``.
- ``negatives``: rows of (query, positive, four negatives hardest first), seed 004's generated data, which the mgh
  recipe trains on with --negatives and a model is scored on by reranking: ``load_negatives``, ``NegativesCorpus``.
- ``provenance``: where a training file came from: the sidecar `python -m core generate` writes beside its file,
  read back in brief for a run's record and model card: ``sidecar_path``, ``generation_summary``,
  ``generation_text``, ``generator_text``.
- ``leakage``: target pairs and lists that repeat a training item or share a text with one (the labelled
  corpus counts its own): ``find_leaks``, ``drop_leaked_rows``.
- ``content``: a table's content whatever its file format (per-column fingerprints; what differs between two),
  and the pages' saved copy of an upload's columns: ``Content``, ``persist_table``, ``saved_copy_path``.
- ``kinds``: which kind a file holds and loading it as that kind (or as one the user forces, ``checked_kind``):
  ``CorpusKind``, ``KINDS``, ``register``, ``kind_of``, ``corpus_kind``, ``load_any``, ``column_settings``.
- ``crops``: self-supervised pairs from multi-sentence documents: ``load_documents``, ``crop_pairs``,
  ``dropout_pairs``.
- ``mining``: label-aware examples mined with a frozen reference model: ``mine``, ``MiningSettings``,
  ``active_share``.
- ``bands``: multi-granularity hard negatives, one other-label text per band of reference-cosine rank:
  ``mine_bands``, ``band_negatives``, ``BandSettings``, ``parse_edges``.
- ``demo``: writes the demo corpus and documents in ``assets/``: ``write_demo``.
"""
