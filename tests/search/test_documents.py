"""Documents ranked as well as chunks (issue 22): the aggregation (MaxP / top-k sum) puts the
document whose best chunk is best first; the per-bank rule gives a bank of documents the
document recipe and a bank of conversation turns the chat recipe."""

from rcll.search.documents import classify, document_scores
from rcll.search.models import Candidate, RecallQuery
from rcll.search.recall import recall
from rcll.search.recipes import DEFAULT_RECIPE


def _c(ids_scores):
    return [Candidate(u, i, s) for i, (u, s) in enumerate(ids_scores, 1)]


def test_maxp_ranks_the_document_of_the_best_chunk_first():
    # doc A has the single best chunk (0.9); doc B has two good ones (0.8, 0.7)
    lists = {"dense": _c([("a1", 0.9), ("b1", 0.8), ("b2", 0.7), ("a2", 0.1)])}
    doc_of = {"a1": "A", "a2": "A", "b1": "B", "b2": "B"}
    maxp = document_scores(lists, doc_of, "maxp")["dense"]
    assert [(c.unit_id, c.rank, c.score) for c in maxp] == [("A", 1, 0.9), ("B", 2, 0.8)]
    # the sum of the top 2 chunks prefers B (1.5 against 1.0)
    top2 = document_scores(lists, doc_of, "sum", top=2)["dense"]
    assert [(c.unit_id, round(c.score, 6)) for c in top2] == [("B", 1.5), ("A", 1.0)]
    # a unit without a document is a document of its own
    alone = document_scores({"lexical": _c([("x", 2.0), ("a1", 1.0)])}, doc_of)["lexical"]
    assert [c.unit_id for c in alone] == ["x", "A"]


def test_bank_kind_of_turns_and_of_document_chunks():
    turns = [("Ana: My garden has tomatoes.", "chunk", 7), ("Ben: Basil too.", "chunk", 5),
             ("user: what did I buy?", "chunk", 80)]
    docs = [("Indexing of scientific abstracts\n\nA study of", "chunk", 140),
            ("The catalogue of a library holds", "chunk", 60), ("Ana: a quote", "chunk", 60)]
    assert classify(turns) == {"kind": "conversation", "turns": 3, "document_chunks": 0,
                               "sampled": 3}
    assert classify(docs) == {"kind": "documents", "turns": 1, "document_chunks": 2,
                              "sampled": 3}
    assert classify([])["kind"] == "conversation"
    # facts and short notes are no document chunks: a bank of them keeps the chat recipe
    assert classify([("Ana likes tomatoes", "fact", 4), ("Ben likes basil", "fact", 4)]
                    )["kind"] == "conversation"
    assert classify([("I hiked in the Alps with friends.", "chunk", 9)] * 5)["kind"] \
        == "conversation"


ABSTRACT_A = ("Automatic indexing of scientific abstracts assigns subject headings to each "
              "paper from the words of its abstract. ")
FILLER = "The library catalogue lists holdings by author and by shelf number. "


def _retain(client, bank, items):
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": items,
                                                                 "async": False})
    assert r.status_code == 200, r.get_json()


def test_document_bank_gets_the_document_recipe_and_ranks_documents(client, services):
    # doc-a: its second chunk is about indexing; doc-b and doc-c only mention it once
    long_a = "Library holdings\n\n" + FILLER * 40 + "\n\n" + ABSTRACT_A * 3
    _retain(client, "docs22", [
        {"content": long_a, "document_id": "doc-a"},
        {"content": "Shelving\n\n" + FILLER * 3 + "Indexing is mentioned here.",
         "document_id": "doc-b"},
        {"content": "Circulation\n\n" + FILLER * 2, "document_id": "doc-c"}])
    _retain(client, "chat22", [
        {"content": t, "document_id": f"t{i}"} for i, t in enumerate(
            ["Ana: I indexed the scientific abstracts today.", "Ben: Nice, which ones?",
             "Ana: The library ones, by subject headings."])])
    ctx = services.recall_context()
    res = recall(ctx, "docs22", RecallQuery(query="automatic indexing of scientific abstracts"))
    assert res.recipe == "document" and res.bank_kind["kind"] == "documents"
    assert res.aggregation == "maxp"
    docs = [d["document_id"] for d in res.documents]
    assert docs[0] == "doc-a" and set(docs) <= {"doc-a", "doc-b", "doc-c"}
    # results come document by document: every doc-a unit before any other document's
    firsts = [r["document_id"] for r in res.results]
    assert firsts[: firsts.count("doc-a")] == ["doc-a"] * firsts.count("doc-a")
    assert res.documents[0]["units"] == [r["id"] for r in res.results
                                         if r["document_id"] == "doc-a"]
    assert res.to_json()["aggregation"] == "maxp"
    chat = recall(ctx, "chat22", RecallQuery(query="which abstracts did Ana index?"))
    assert chat.recipe == DEFAULT_RECIPE and chat.bank_kind["kind"] == "conversation"
    assert chat.documents is None and "aggregation" not in chat.to_json()
    # a recipe named in the request is run whatever the bank's kind
    named = recall(ctx, "docs22", RecallQuery(query="indexing", recipe="full"))
    assert named.recipe == "full" and named.bank_kind is None


def test_chunk_context_reaches_lexical_and_dense_input_not_the_text(client, services,
                                                                     monkeypatch):
    from rcll.models.embedder import embed_input
    from rcll.retain import pipeline
    from rcll.retain.chunking import chunk_headings

    monkeypatch.setattr(pipeline, "CHUNK_CONTEXT", True)  # off by default (recipes.py)
    # a titled document long enough for several chunks; "Palimpsest" is only in the title
    body = "\n\n".join(f"Paragraph {i} describes shelving rules for the stacks in detail. " * 6
                       for i in range(12))
    content = "Palimpsest conservation\n\n" + body
    _retain(client, "ctx22", [{"content": content, "document_id": "doc-p"}])
    with services.pool.connection() as conn:
        rows = conn.execute(
            """SELECT u.id::text AS id, u.text, u.heading, c.index FROM memory_units u
               JOIN chunks c ON c.id = u.chunk_id WHERE u.bank_id = 'ctx22'
               ORDER BY c.index""").fetchall()
    assert len(rows) >= 2
    # the first chunk holds the title itself; every later one carries it as its heading
    assert rows[0]["heading"] is None and rows[0]["text"].startswith("Palimpsest")
    assert all(r["heading"] == "Palimpsest conservation" for r in rows[1:])
    assert all("Palimpsest" not in r["text"] for r in rows[1:])
    assert chunk_headings(content, [r["text"] for r in rows]) == [r["heading"] for r in rows]
    # dense input: heading, blank line, text; a unit without heading embeds its text alone
    assert embed_input(rows[1]["text"], rows[1]["heading"]) == \
        "Palimpsest conservation\n\n" + rows[1]["text"]
    assert embed_input("Ana: hello", None) == "Ana: hello"
    # lexical: the title word finds every chunk; the returned text is the chunk's own
    ctx = services.recall_context()
    res = recall(ctx, "ctx22", RecallQuery(query="palimpsest", recipe="document_lexical",
                                           limit=50))
    # (the chunks are near-duplicates: post-processing collapses them into the first found)
    found = [r["id"] for r in res.results] + [c for r in res.results for c in r["collapsed"]]
    assert sorted(found) == sorted(r["id"] for r in rows)
    texts = {r["id"]: r["text"] for r in rows}
    assert all(r["text"] == texts[r["id"]] for r in res.results)
    # a conversation gets no heading
    assert chunk_headings("Ana: hi\n\n" + "x " * 600, ["a", "b"]) == [None, None]


def test_bank_kind_of_a_bank_still_filling_is_not_cached(client, services):
    """A recall on a bank of fewer than KIND_SAMPLE units does not fix its kind for
    KIND_TTL_S: the documents retained after it are seen by the next recall."""
    from rcll.search.documents import bank_kind

    cache: dict = {}
    _retain(client, "fill22", [{"content": "Ana: hello there.", "document_id": "t0"}])
    with services.pool.connection() as conn:
        assert bank_kind(conn, "fill22", cache)["kind"] == "conversation"
        assert "fill22" not in cache
    _retain(client, "fill22", [{"content": f"Report {i}\n\n" + FILLER * 6 + ABSTRACT_A,
                                "document_id": f"d{i}"} for i in range(3)])
    with services.pool.connection() as conn:
        assert bank_kind(conn, "fill22", cache)["kind"] == "documents"
