"""Issue 22 item 4, "markup is not memory": table separator rows, rows of empty cells, rules
and link-only navigation lines never become units; a table's data rows and every word stay."""

from types import SimpleNamespace

from rcll.hierarchy.classifier import default_classifier
from rcll.models.tokenizer import TokenCounter
from rcll.retain.markup import is_markup_only, markup_only_line, strip_markup
from rcll.retain.models import RetainItem
from rcll.retain.pipeline import drafts_for

TOK = TokenCounter("all-MiniLM-L6-v2")
CTX = SimpleNamespace(tokens=TOK, classifier=default_classifier(), chunk_max_tokens=40)

TABLE_DOC = """# Packages

| Package | Version | Licence |
| --- | :---: | ---: |
| bash | 5.2.15 | GPL-3+ |
|  |  |  |
| coreutils | 9.1 | GPL-3+ |
| zlib |  | Zlib |

[Top](#top) | [Previous](intro.html) | [Next](usage.html)

* * *

The table lists what the image ships.
---
See [the Debian policy](https://www.debian.org/doc/debian-policy/) for details.
"""


def test_separator_rows_empty_rows_rules_and_navigation_are_dropped_data_rows_kept():
    out = strip_markup(TABLE_DOC)
    assert out.splitlines() == [
        "# Packages", "",
        "| Package | Version | Licence |",
        "| bash | 5.2.15 | GPL-3+ |",
        "| coreutils | 9.1 | GPL-3+ |",
        "| zlib |  | Zlib |", "",
        "The table lists what the image ships.", "",
        "See [the Debian policy](https://www.debian.org/doc/debian-policy/) for details."]


def test_the_line_rule_on_real_values():
    for line in ("| --- | --- |", "|:--|--:|", "|  |  |", "* * *", "---", "===", "##",
                 "[Top](#top)", "[Top](#top) | [Next](next.html)", "« [Prev](a.html) · [Up](b.html) »",
                 "![](logo.png)", "———", "│ ├── │"):
        assert markup_only_line(line), line
    for line in ("| bash | 5.2 |", "[Debian](https://www.debian.org/)", "![diagram of the stack](s.png)",
                 "Note: --- is a rule", "", "42", "é"):
        assert not markup_only_line(line), line


def test_code_blocks_and_plain_text_are_untouched():
    code = "Before.\n```\n}\n---\n| - |\n```\nAfter."
    assert strip_markup(code) == code
    prose = "Alice: hi.\n\n\nBob: hello — again."
    assert strip_markup(prose) is prose


def test_markup_only_text_is_empty():
    assert strip_markup("| --- | --- |\n|  |  |\n") == ""
    assert is_markup_only("| --- | --- |") and is_markup_only("* * *\n\n[Top](#top)")
    assert not is_markup_only("| a | b |")


def test_drafts_hold_no_separator_rows_and_keep_all_cleaned_text():
    drafts = drafts_for(RetainItem(content=TABLE_DOC), CTX)
    texts = [d.text for d in drafts]
    assert len(texts) > 1  # 40 tokens: the document is split
    joined = "\n".join(texts)
    assert "---" not in joined and "|  |  |" not in joined and "[Top](#top)" not in joined
    for row in ("| bash | 5.2.15 | GPL-3+ |", "| coreutils | 9.1 | GPL-3+ |", "| zlib |  | Zlib |"):
        assert row in joined
    assert "".join(joined.split()) == "".join(strip_markup(TABLE_DOC).split())
    assert not any(is_markup_only(t) for t in texts)


def test_an_item_of_markup_only_gives_no_units():
    assert drafts_for(RetainItem(content="| --- | --- |\n|  |  |\n* * *"), CTX) == []


def test_a_chunk_split_out_of_a_long_navigation_line_is_not_a_unit(services):
    """A line of words and table pipes too long for one chunk splits at spaces; a piece
    holding only ``--- | --- |`` is dropped, the pieces with words are kept."""
    from rcll.retain.models import RetainItem
    from rcll.retain.pipeline import drafts_for

    line = " ".join(["Intro", *(["| --- |"] * 400), "Outro", "words", "here"])
    drafts = drafts_for(RetainItem(content=line), services.retain_context())
    assert drafts, "the words must stay"
    assert all(any(ch.isalnum() for ch in d.text) for d in drafts)
    assert "Intro" in drafts[0].text and "Outro" in drafts[-1].text


def test_a_job_names_the_items_that_made_no_units(client, worker):
    """Stop 36 finding: an item of markup only ended its job ``succeeded`` with 0 units and
    nothing said so; the job's counts now name it (``items_without_units``,
    ``without_units``), and the job still succeeds: it did what it was asked."""
    from tests.conftest import wait_job

    bank = "markup-only-items"
    items = [{"content": "| --- | --- |\n|  |  |\n", "document_id": "seps.md"},
             {"content": "The ferry leaves pier nine at 22:40.", "document_id": "ferry.md"}]
    op = client.post(f"/v1/default/banks/{bank}/memories", json={"items": items}).get_json()
    job = wait_job(client, bank, op["operation_id"])
    assert job["state"] == "succeeded", job
    assert job["counts"]["units_created"] == 1
    assert job["counts"]["items_without_units"] == 1
    assert job["counts"]["without_units"] == ["seps.md"]
