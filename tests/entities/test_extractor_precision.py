"""Precision and recall of the deterministic entity extractor on the hand-labelled sample."""

import json
from pathlib import Path

import pytest

from rcll.entities.extractor import extract, normalize
from rcll.eval.datasets import locomo_turn_text

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "data" / "entities_labelled.json"
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo10_memories.jsonl"
MIN_PRECISION = 0.95  # measured 0.987 on the tuning items (rcll/entities/extractor.py), less a margin
MIN_RECALL = 0.92  # measured 0.961
MIN_HELDOUT_PRECISION = 0.93  # first measured 0.976 on the 30 held-out turns
# issue 26's first-use sentences (benchmarks/results/entities_labelled.txt): 0.929 / 0.565
# before sentence-initial names were found, 1.000 / 0.957 after
MIN_FIRST_USE_PRECISION = 0.95
MIN_FIRST_USE_RECALL = 0.90


def _turns() -> dict[str, str]:
    if not LOCOMO.exists():
        pytest.skip(f"LoCoMo not found at {LOCOMO}")
    with LOCOMO.open() as f:
        return {t["memory_id"]: locomo_turn_text(t) for t in map(json.loads, f)}


def _score(items: list[dict], turns: dict[str, str]) -> tuple[float, float, list, list]:
    tp = fp = fn = 0
    extras, misses = [], []
    for it in items:
        text = it.get("text") or turns[it["id"]]
        gold = {normalize(e) for e in it["entities"]}
        got = {normalize(m.surface) for m in extract(text)}
        tp, fp, fn = tp + len(got & gold), fp + len(got - gold), fn + len(gold - got)
        extras += [(it["id"], g) for g in got - gold]
        misses += [(it["id"], g) for g in gold - got]
    return tp / (tp + fp), tp / (tp + fn), extras, misses


def test_extractor_precision_and_recall_on_labelled_sample():
    sample = json.loads(SAMPLE.read_text())
    turns = _turns()
    assert len(sample["items"]) == 125 and len(sample["heldout"]) == 30
    precision, recall, extras, misses = _score(sample["items"], turns)
    h_precision, h_recall, h_extras, _ = _score(sample["heldout"], turns)
    print(f"\nextractor, 125 labelled texts: precision {precision:.3f}, recall {recall:.3f}; "
          f"30 held-out turns: precision {h_precision:.3f}, recall {h_recall:.3f}"
          f"\nfalse positives: {extras + h_extras}\nmissed: {misses}")
    assert precision >= MIN_PRECISION
    assert recall >= MIN_RECALL
    assert h_precision >= MIN_HELDOUT_PRECISION


def test_first_use_sentences_kept_apart_from_the_tuning_set():
    sample = json.loads(SAMPLE.read_text())
    assert len(sample["first_use"]) == 40
    assert not {it["id"] for it in sample["first_use"]} & {it["id"] for it in sample["items"]}
    precision, recall, extras, misses = _score(sample["first_use"], {})
    print(f"\nfirst-use sentences: precision {precision:.3f}, recall {recall:.3f}"
          f"\nfalse positives: {extras}\nmissed: {misses}")
    assert precision >= MIN_FIRST_USE_PRECISION
    assert recall >= MIN_FIRST_USE_RECALL


@pytest.mark.parametrize("text,want", [
    ("Marisol: Tigran from procurement said the Iran shipment is delayed again.",
     {"marisol", "tigran", "iran"}),
    ("Priya said the Lisbon lease ends in May.", {"priya", "lisbon"}),
    ("Kofi: Gabriel said the Lagos launch moves to June.", {"kofi", "gabriel", "lagos"}),
    ("Ingrid and Farah will cover the night shift.", {"ingrid", "farah"}),
    # sentence-initial words that are not names stay refused
    ("Remember to rotate the keys before Friday.", set()),
    ("Tips: keep the backup drive offline and label it.", set()),
    ("Warning: the certificate expires in three days.", set()),
    ("Everyone said the demo went well. Photos from the trip are up.", set()),
    ("Doctors said everything is fine. Yoga's been really awesome.", set()),
    ("Alert from PagerDuty: disk usage above 90%", {"pagerduty"}),
])
def test_names_opening_a_sentence_or_after_a_speaker(text, want):
    assert {m.normalized for m in extract(text)} == want


def test_speaker_from_metadata_and_prefix():
    names = {m.normalized: m.entity_type for m in extract("Hey there!", {"speaker": "Caroline"})}
    assert names == {"caroline": "person"}
    got = {m.normalized for m in extract("Jon: Way to go, Gina! See you in Room 101.")}
    assert got == {"jon", "gina", "room 101"}


def test_numbered_names_keep_their_number():
    got = {m.normalized: m.entity_type for m in extract("INC-4471 hit vol-7 and Room 102 today.")}
    assert got == {"inc 4471": "numbered", "vol 7": "numbered", "room 102": "numbered"}


def test_stop_words_days_and_months_are_not_entities():
    assert extract("Monday was great. I think May is busy. Thanks, we will see!") == []


def test_a_name_after_an_honorific_is_the_same_name_wherever_it_stands():
    """An honorific's period does not end a sentence: "Dr. Smith" is one name whether a
    reporting verb follows it or not (LongMemEval: three turns naming the user's therapist
    gave "Smith" once, from "Dr. Smith suggested", and nothing for the other two or the
    question, so the graph channel favoured one turn)."""
    from rcll.entities.extractor import extract

    texts = ["I see Dr. Smith every week, and she's been helping me.",
             "I have a therapy session with Dr. Smith coming up soon.",
             'Dr. Smith suggested I learn to say "no".',
             "How often do I see my therapist, Dr. Smith?"]
    for text in texts:
        assert [(m.normalized, m.entity_type) for m in extract(text)] == [("dr smith", "person")]
    assert [m.normalized for m in extract("Mrs. Okafor met Mr. Lee and Dr. Jane Smith.")] == [
        "mrs okafor", "mr lee", "dr jane smith"]
    assert [(m.normalized, m.entity_type) for m in extract("We flew to St. Louis.")] == [
        ("st louis", "name")]
