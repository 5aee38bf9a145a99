"""Issue 5 fault 5: no chunk is longer than the limit, whatever the shape of the text."""

import random

import pytest

from rcll.models.tokenizer import TokenCounter
from rcll.retain.chunking import chunk_text

TOK = TokenCounter("all-MiniLM-L6-v2")


def _log(n: int) -> str:
    return "\n".join(f"2026-01-01 12:00:{i % 60:02d} INFO worker-{i % 7} processed request "
                     f"id={i * 7919} path=/api/v1/items/{i} status=200 duration_ms={i % 97}"
                     for i in range(n))


def _shapes() -> dict[str, str]:
    rnd = random.Random(5)
    words = [rnd.choice(["alpha", "beta", "gamma", "delta", "omega", "server", "restart"])
             for _ in range(6000)]
    return {
        "600_log_lines": _log(600),
        "one_long_line": " ".join(words),
        "one_line_no_spaces": "".join(words),
        "cjk_without_spaces": "服务器迁移计划在下周开始执行并且需要所有团队配合" * 400,
        "cjk_with_full_stops": "服务器迁移计划在下周开始。所有团队需要配合！" * 400,
        "giant_turn": "Alice: hi.\nBob: " + " ".join(words) + "\nAlice: ok.\nBob: bye.",
        "giant_turn_alone": "assistant: " + _log(300),
        "long_paragraphs": "\n\n".join(" ".join(words[i:i + 900]) for i in range(0, 6000, 900)),
        "base64_blob": "".join(rnd.choice("ABCDEFabcdef0123456789+/") for _ in range(50_000)),
        "mixed_sentences": " ".join(f"Sentence {i} talks about {w}." for i, w in
                                    enumerate(words[:3000])),
    }


def _squash(s: str) -> str:
    return "".join(s.split())


@pytest.mark.parametrize("limit", [254, 64])
@pytest.mark.parametrize("name", list(_shapes()))
def test_no_chunk_exceeds_the_limit(name, limit):
    text = _shapes()[name]
    chunks = chunk_text(text, limit, TOK.count_many)
    sizes = TOK.count_many(chunks)
    assert len(chunks) > 1
    assert max(sizes) <= limit, (name, max(sizes))
    if name.startswith("giant_turn"):
        label = "Bob: " if name == "giant_turn" else "assistant: "
        parts = [c for c in chunks if c.startswith(label)]
        assert len(parts) > 1
        lab = _squash(label)  # the label is repeated on each part; the rest is covered
        assert "".join(_squash(c) for c in chunks).replace(lab, "") == \
            _squash(text).replace(lab, "")
    else:  # the chunks cover the input, in order
        assert "".join(_squash(c) for c in chunks) == _squash(text)


def test_600_line_log_is_not_one_unit():
    text = _log(600)
    assert TOK.count(text) > 18_000
    chunks = chunk_text(text, 512, TOK.count_many)
    assert max(TOK.count_many(chunks)) <= 512
    assert all("\n" in c for c in chunks[:-1])  # split at lines, not inside them
    assert sum(c.count("\n") + 1 for c in chunks) == 600
