"""Benchmark tables: run every (row, seed) of an experiment file and write a Markdown table.

An experiment file (TOML, under ``experiments/``) declares the rows of one results table::

    title = "Reference methods"
    doc = "docs/results.md"          # the table is written here (relative to the repo)
    out = "runs/platform"            # one run folder per row and seed
    seeds = [0, 1, 2]
    notes = "free text placed above the table"
    doc_title = "..."                # optional: heading when several files share `doc`

    [defaults]                       # fgl run flags or run-config keys shared by all rows
    rounds = 100

    [[row]]
    group = "Cora (Louvain, 10 clients, GCN)"
    method = "fedavg"
    dataset = "Cora"
    partition = "louvain"
    clients = 10
    paper = 81.9                     # optional: the paper's number(s) for this row
    set = { "local-epochs" = 3 }     # optional: extra run-config overrides
    inprocess = true                 # optional: `fgl run --inprocess` (no Ray; small graphs)

``columns = ["acc", "minority", ...]`` (top level, optional) picks the metric columns
from :data:`COLUMNS`; the default is the accuracy/F1 set.

Paired comparisons: a row may carry an ``id``, and another row ``versus = "<id>"``; the
metrics named in ``paired = ["acc-last5", ...]`` (top level) then get a second table with
the per-seed differences (row minus its ``versus`` row, same seed) and their mean with a 95 %
t-interval.

``fgl bench FILE`` runs each row and seed with ``fgl run`` (``--jobs N``: N at a time;
skipping runs whose ``summary.json`` already exists, so an interrupted benchmark resumes), then
writes the table: mean ± population std over seeds of each metric column, time per round and
per run, with the exact command of each row.

Run records: run folders stay on the machine that ran them, so each finished run's numbers
(the values some table column reads, and the probes: 1-2 KB) are also written to
``<doc stem>.runs.jsonl`` beside the document, one line per command and seed. A table is
rendered from the run folders and, for seeds without one here, from the records; a recorded
run is not run again. So a benchmark split over machines or sessions completes its rows, and a
page can be rewritten anywhere.


The package: :mod:`~fgl_flower.bench.experiment` (files, rows, commands),
:mod:`~fgl_flower.bench.runner` (``fgl run`` per row and seed), :mod:`~fgl_flower.bench.records`
(the ``.runs.jsonl`` records), :mod:`~fgl_flower.bench.columns` (metric columns) and
:mod:`~fgl_flower.bench.render` (the Markdown).
"""

from fgl_flower.bench.columns import (
    COLUMNS,
    DEFAULT_COLUMNS,
    Column,
    eval_history,
    fedstar_std,
    first_round_reaching,
)
from fgl_flower.bench.experiment import (
    OUTCOME_NEUTRAL_KEYS,
    Experiment,
    Row,
    check_run_folders,
    doc_command,
    doc_sections,
    load_experiment,
    record_key,
    select_rows,
)
from fgl_flower.bench.records import (
    RECORD_KEYS,
    Records,
    collect,
    load_records,
    records_path,
    run_record,
    sync_records,
)
from fgl_flower.bench.render import (
    KEPT,
    Kept,
    kept_lines,
    paired_differences,
    render,
    write_docs,
)
from fgl_flower.bench.runner import run_experiment
from fgl_flower.stats import t_interval

__all__ = [
    "COLUMNS",
    "DEFAULT_COLUMNS",
    "KEPT",
    "OUTCOME_NEUTRAL_KEYS",
    "RECORD_KEYS",
    "Column",
    "Experiment",
    "Kept",
    "Records",
    "Row",
    "check_run_folders",
    "collect",
    "doc_command",
    "doc_sections",
    "eval_history",
    "fedstar_std",
    "first_round_reaching",
    "kept_lines",
    "load_experiment",
    "load_records",
    "paired_differences",
    "record_key",
    "records_path",
    "render",
    "run_experiment",
    "run_record",
    "select_rows",
    "sync_records",
    "t_interval",
    "write_docs",
]
