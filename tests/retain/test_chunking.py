from rcll.hierarchy.classifier import default_classifier
from rcll.models.tokenizer import TokenCounter
from rcll.retain.chunking import chunk_text

TOK = TokenCounter("all-MiniLM-L6-v2")


def test_short_item_is_one_chunk():
    assert chunk_text("Alice: hi there.", 512, TOK.count_many) == ["Alice: hi there."]


def test_conversation_turns_are_never_split():
    long_turn = "Bob: " + " ".join(f"word{i}" for i in range(200))
    text = f"Alice: short one.\n{long_turn}\nAlice: another short one.\nBob: bye."
    chunks = chunk_text(text, 50, TOK.count_many)
    assert long_turn in chunks  # longer than the limit, still whole
    assert all(c.count("Bob:") <= 1 for c in chunks)
    assert "".join(chunks).replace("\n", "") == text.replace("\n", "")


def test_prose_is_packed_to_the_limit():
    text = "\n\n".join(f"Paragraph {i} says something about topic {i}." for i in range(40))
    chunks = chunk_text(text, 64, TOK.count_many)
    assert len(chunks) > 1
    assert all(TOK.count(c) <= 64 for c in chunks)


def test_classifier_first_match_and_explicit_values_win():
    c = default_classifier()
    assert c.classify("Never deploy on Friday") == ("deployment", "warning")
    assert c.classify("I love painting sunsets") == ("general", "preference")
    assert c.classify("Never deploy on Friday", room="hr", hall="fact") == ("hr", "fact")
    assert c.classify("lorem ipsum") == ("general", "fact")


def test_a_single_long_turn_is_one_chunk():
    turn = "assistant: " + " ".join(f"Sentence {i} ends here." for i in range(200))
    assert chunk_text(turn, 64, TOK.count_many) == [turn]


def test_label_lines_inside_one_turn_do_not_split_it():
    turn = "assistant: Here is the plan.\n" + "\n".join(
        f"Step {i}: Do thing number {i} with care and attention to detail." for i in range(60))
    turn += "\nNote: one more thing.\nNote: and another."
    assert chunk_text(turn, 64, TOK.count_many) == [turn]
