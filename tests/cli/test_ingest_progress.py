"""rcll ingest's progress in units and its summary (issue 22 item 3): the job's
``progress`` fields (rcll.store.jobs.unit_progress) and the CLI's figures from them."""

from datetime import UTC, datetime, timedelta

from rcll.cli.ingest_progress import measure, summary
from rcll.store.jobs import to_json, unit_progress

T0 = datetime(2026, 1, 5, 12, 0, 0, tzinfo=UTC)


def _job(**kw):
    base = {"id": "00000000-0000-0000-0000-000000000001", "bank_id": "b", "kind": "retain",
            "state": "running", "stage": "embed", "counts": {}, "error": None,
            "started_at": T0, "finished_at": None, "created_at": T0}
    return {**base, **kw}


def test_units_while_embedding_give_rate_and_eta():
    job = _job(counts={"items": 23, "units_created": 1184, "units_embedded": 296})
    p = unit_progress(job, now=T0 + timedelta(seconds=80))
    assert p == {"units_total": 1184, "units_done": 296, "units_per_s": 3.7, "eta_s": 240.0}


def test_before_chunking_the_total_is_unknown_and_after_the_end_all_are_done():
    assert unit_progress(_job(stage="chunk", counts={"items": 4, "items_done": 1}),
                         now=T0 + timedelta(seconds=5)) == {
        "units_total": None, "units_done": 0, "units_per_s": None, "eta_s": None}
    assert unit_progress(_job(stage="convert", counts={"files": 1})) ["units_total"] is None
    done = _job(state="succeeded", stage="done", finished_at=T0 + timedelta(seconds=50),
                counts={"units_created": 200, "units_embedded": 200})
    assert unit_progress(done) == {"units_total": 200, "units_done": 200, "units_per_s": 4.0,
                                   "eta_s": 0.0}
    out = to_json(done)
    assert out["unit_progress"]["units_done"] == 200 and out["status"] == "completed"


def test_cli_total_is_exact_when_chunked_and_estimated_by_bytes_otherwise():
    latest = {
        "a": {"state": "succeeded", "unit_progress": {"units_total": 100, "units_done": 100}},
        "b": {"state": "running", "unit_progress": {"units_total": 300, "units_done": 60}},
        "c": {"state": "running", "unit_progress": {"units_total": None, "units_done": 0}},
        "f": {"state": "running", "unit_progress": {"units_total": 40, "units_done": 0}},
    }
    sizes = {"a": ("items", 25_000), "b": ("items", 75_000), "c": ("items", 50_000),
             "f": ("files", 100_000), "g": ("files", 50_000)}
    p = measure(["a", "b", "c", "f", "g"], latest, sizes, elapsed_s=40.0)
    # c: 50 KB at 400 units / 100 KB = 200; g (not polled yet): 50 KB at 40 / 100 KB = 20
    assert (p.done, p.total, p.exact, p.jobs_done, p.jobs) == (160, 660, False, 1, 5)
    assert p.units_per_s == 4.0 and p.eta_s == 125.0
    latest["c"]["unit_progress"] = {"units_total": 210, "units_done": 0}
    latest["g"] = {"state": "failed", "unit_progress": {"units_total": None, "units_done": 0}}
    p = measure(["a", "b", "c", "f", "g"], latest, sizes, elapsed_s=40.0)
    assert (p.total, p.exact, p.jobs_done) == (650, True, 2)


def test_summary_counts_stored_units_and_rates_over_the_real_elapsed_time():
    final = [{"state": "succeeded", "counts": {"units_created": 1184, "units_skipped": 0}},
             {"state": "succeeded", "counts": {"units_created": 40, "units_skipped": 0}},
             {"state": "failed", "counts": {"files": 1, "files_failed": 1}}]
    line = summary(final, n_item_ops=1, n_items=23, n_files=2, elapsed_s=200.0)
    assert line == ("23 items → 1224 new units, 0 already stored; 2 document files, "
                    "1 converted, 0.01 files/s; 6.1 units/s over 200.0 s")


def test_summary_names_the_items_that_made_no_units():
    """Stop 36 finding: a markup-only file ended its job with 0 units and the summary said
    nothing, though a changed file that turned markup-only also lost its earlier units."""
    final = [{"state": "succeeded", "counts": {"units_created": 3, "units_skipped": 0,
                                               "items_without_units": 2,
                                               "without_units": ["nav.md", "seps.md"]}}]
    line = summary(final, n_item_ops=1, n_items=5, n_files=0, elapsed_s=0)
    assert line == ("5 items → 3 new units, 0 already stored\n2 item(s) made no units (only "
                    "markup, navigation or boilerplate; an earlier version of the same "
                    "document is no longer live): nav.md, seps.md")
