"""Reading a Prometheus text page in tests (prometheus_client's own parser)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def samples(text: str) -> list[tuple[str, dict, float]]:
    """Every sample of the page: ``(name, labels, value)``."""
    return [(s.name, dict(s.labels), s.value)
            for fam in text_string_to_metric_families(text) for s in fam.samples]


def families(text: str) -> set[str]:
    """The family names on the page (counters without their ``_total``)."""
    return {fam.name for fam in text_string_to_metric_families(text)}


def value(text: str, name: str, **labels) -> float:
    """The sum of the samples called ``name`` whose labels include ``labels``; 0 if none."""
    return sum(v for n, lab, v in samples(text)
               if n == name and all(lab.get(k) == w for k, w in labels.items()))
