from rcll.hierarchy.classifier import default_classifier
from rcll.models.tokenizer import TokenCounter
from rcll.retain.chunking import chunk_text

TOK = TokenCounter("all-MiniLM-L6-v2")


def test_short_item_is_one_chunk():
    assert chunk_text("Alice: hi there.", 512, TOK.count_many) == ["Alice: hi there."]


def test_conversation_turns_split_only_when_longer_than_the_limit():
    # changed with issue 5 fault 5: a turn longer than the limit is split, label kept
    long_turn = "Bob: " + " ".join(f"word{i}" for i in range(200))
    text = f"Alice: short one.\n{long_turn}\nAlice: another short one.\nBob: bye."
    chunks = chunk_text(text, 50, TOK.count_many)
    assert all(TOK.count(c) <= 50 for c in chunks)
    bob = [c for c in chunks if "word" in c]
    assert len(bob) > 1 and all(c.startswith("Bob: word") for c in bob)
    squash = "".join("".join(chunks).split()).replace("Bob:", "")
    assert squash == "".join(text.split()).replace("Bob:", "")


def test_prose_is_packed_to_the_limit():
    text = "\n\n".join(f"Paragraph {i} says something about topic {i}." for i in range(40))
    chunks = chunk_text(text, 64, TOK.count_many)
    assert len(chunks) > 1
    assert all(TOK.count(c) <= 64 for c in chunks)


def test_classifier_matches_as_ignorecase_did_on_every_case(tmp_path):
    """Lower-case patterns search the lower-cased text; a pattern with an upper-case letter
    (``\\S``, a capital) keeps re.IGNORECASE on the text itself: every pattern file entry
    classifies as the re.IGNORECASE compile of it would."""
    import re

    from rcll.hierarchy.classifier import compile_pattern, load

    rx, on_lower = compile_pattern(r"\b(deploy(ed|s)?|roll(ed)? back)\b")
    assert on_lower and rx.flags & re.I == 0
    rx, on_lower = compile_pattern(r"\bv\S+ release\b")  # \S is not \s: not lower-cased
    assert not on_lower and rx.flags & re.I
    path = tmp_path / "patterns.toml"
    path.write_text("[[rooms]]\nname = 'ops'\npattern = '\\bv\\S+ release\\b'\n"
                    "[[rooms]]\nname = 'deployment'\npattern = '\\bdeploy(ed)?\\b'\n"
                    "[[halls]]\nname = 'warning'\npattern = '\\bnever\\b'\n")
    c = load(path)
    assert c.classify("The V2.1 RELEASE went out") == ("ops", "fact")
    assert c.classify("v 2 release") == ("general", "fact")  # \S+ needs a non-space
    assert c.classify("NEVER Deployed on a Friday") == ("deployment", "warning")
    shipped = load()
    texts = ["Never DEPLOY on Friday", "The OAuth TOKEN expired", "I LOVE painting sunsets",
             "Postgres MIGRATIONS failed in CI", "We talked about the Trip to Lisbon"]
    ignorecase = [(name, re.compile(rx.pattern, re.I)) for name, rx, _ in shipped.rooms]
    for t in texts:
        want = next((n for n, r in ignorecase if r.search(t)), "general")
        assert shipped.classify(t)[0] == want


def test_classifier_first_match_and_explicit_values_win():
    c = default_classifier()
    assert c.classify("Never deploy on Friday") == ("deployment", "warning")
    assert c.classify("I love painting sunsets") == ("general", "preference")
    assert c.classify("Never deploy on Friday", room="hr", hall="fact") == ("hr", "fact")
    assert c.classify("lorem ipsum") == ("general", "fact")


def test_a_single_long_turn_is_split_with_its_label():
    # changed with issue 5 fault 5: it was one chunk over the limit
    turn = "assistant: " + " ".join(f"Sentence {i} ends here." for i in range(200))
    chunks = chunk_text(turn, 64, TOK.count_many)
    assert len(chunks) > 1
    assert all(c.startswith("assistant: Sentence") and TOK.count(c) <= 64 for c in chunks)


def test_label_lines_inside_one_turn_do_not_split_it():
    turn = "assistant: Here is the plan.\n" + "\n".join(
        f"Step {i}: Do thing number {i} with care and attention to detail." for i in range(60))
    turn += "\nNote: one more thing.\nNote: and another."
    chunks = chunk_text(turn, 64, TOK.count_many)  # one turn, split only for length
    assert all(c.startswith("assistant: ") and TOK.count(c) <= 64 for c in chunks)
    assert "".join(c.removeprefix("assistant: ") for c in chunks).replace("\n", "") == \
        turn.removeprefix("assistant: ").replace("\n", "")
