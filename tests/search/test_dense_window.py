"""Issue 5 fault 15: chunks fit the embedder's window, so a sentence at the end of a long
text is found by the dense channel."""

FILLER = " ".join(
    f"In chapter {i} the committee reviewed the annual budget, the staffing plan and the "
    f"schedule of regional meetings, and noted no objections from member {i}." for i in range(12))
TARGET = "The spare key to the boathouse is hidden under the blue flowerpot by the door."


def test_chunk_size_follows_the_embedders_window(services):
    # all-MiniLM-L6-v2 reads 256 word pieces (sentence_bert_config.json) incl. [CLS], [SEP]
    assert services.tokens.max_input_tokens == 254
    assert services.chunk_tokens == min(services.settings.chunk_max_tokens, 254)


def test_sentence_at_end_of_long_text_found_by_dense_channel(client, services):
    bank = "dense-window"
    text = FILLER + " " + TARGET
    assert 300 < services.tokens.count(text) < 500  # one chunk at 512, truncated at 256
    items = [{"content": text, "document_id": "minutes"}] + [
        {"content": c, "document_id": f"d{i}"} for i, c in enumerate([
            "The garden shed was repainted green last spring.",
            "Lake rowing lessons start at nine on Saturdays.",
            "The front door lock was replaced after the storm.",
            "Our neighbour keeps chickens behind the garage.",
        ])]
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": items, "async": False})
    assert r.get_json()["state"] == "succeeded"
    res = client.post(f"/v1/default/banks/{bank}/memories/recall", json={
        "query": "where is the spare key to the boathouse hidden?", "channels": "dense"}).get_json()
    top = res["results"][0]
    assert top["document_id"] == "minutes" and TARGET in top["text"], res["results"][:2]
    assert top["ranks"]["dense"] == 1
