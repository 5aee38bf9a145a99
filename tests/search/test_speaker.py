"""The speaker step: a query naming (or, in a chat, addressed by) a speaker lifts that
speaker's turns; a query about both speakers, or about nobody, changes nothing."""

from dataclasses import replace

from rcll.search.models import RecallQuery
from rcll.search.recall import recall
from rcll.search.recipes import RECIPES, Step
from rcll.search.speaker import query_targets, unit_speaker

# Both speakers talk about their garden; Ana's shorter turn is the better BM25 match. Each
# speaker has 13 turns, so their names are common words the lexical channel drops.
TURNS = ["Ana: My garden has tomatoes.",
         "Ben: My garden has tomatoes and basil this year."]
TURNS += [f"{who}: Small talk number {i}." for i in range(12) for who in ("Ana", "Ben")]


def _retain(client, bank, texts):
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": [
        {"content": t, "document_id": f"t{i}", "context": "session 1"}
        for i, t in enumerate(texts)], "async": False})
    assert r.status_code == 200, r.get_json()


def test_speaker_of_a_unit_and_targets_of_a_query():
    assert unit_speaker("Caroline: I went to the support group.") == "caroline"
    assert unit_speaker("user: Can you try again?") == "user"
    assert unit_speaker("No label here, just text.") is None
    assert unit_speaker("Dr. Ana Lima: the results are in.") == "dr. ana lima"
    assert unit_speaker("Step 3: restart the server") is None  # a name has no digits
    assert unit_speaker("Time: 10:30 meeting") == "time"  # a one-word label counts
    people = {"caroline", "melanie"}
    assert query_targets("When did Caroline go to the LGBTQ support group?", people) == {"caroline"}
    assert query_targets("What do Caroline and Melanie both like?", people) == people
    assert query_targets("What did I buy?", people) == set()  # no user role in this bank
    chat = {"user", "assistant"}
    assert query_targets("What degree did I graduate with?", chat) == {"user"}
    assert query_targets("What was the hotel you recommended?", chat) == {"assistant"}
    assert query_targets("Can you remind me what you said?", chat) == chat
    assert query_targets("Which city is the capital?", chat) == set()


def test_speaker_step_lifts_the_named_speakers_turns(client, services):
    _retain(client, "spk1", TURNS)
    ctx = services.recall_context()
    recipes = {"lex": replace(RECIPES["lexical"], name="lex"),
               "lex+spk": replace(RECIPES["lexical"], name="lex+spk",
                                  steps=(Step.of("speaker", boost=0.25),
                                         *RECIPES["lexical"].steps))}

    def ask(query, recipe):
        q = RecallQuery(query=query).model_copy(update={"recipe": recipe})  # ad-hoc recipes
        res = recall(ctx, "spk1", q, recipes=recipes)
        return [r["text"].split(":")[0] for r in res.results], res.counts

    plain, _ = ask("What tomatoes are in Ben's garden?", "lex")
    lifted, counts = ask("What tomatoes are in Ben's garden?", "lex+spk")
    assert plain == ["Ana", "Ben"]  # "ben" dropped as common; the shorter turn first
    assert lifted == ["Ben", "Ana"]
    assert counts["speaker_targets"] == ["ben"] and counts["speaker_boosted"] == 1
    both, counts = ask("What tomatoes are in Ana's and Ben's gardens?", "lex+spk")
    assert counts["speaker_targets"] == ["ana", "ben"] and counts["speaker_boosted"] == 0
    assert both == plain
