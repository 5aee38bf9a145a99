"""Issue 26's worst room/hall confusions (benchmarks/results/room_hall.txt): an OpenSSL key
HOWTO was auth/warning, a chat about Netflix ui/event; what the fallback gives."""

import pytest

from rcll.hierarchy import DEFAULT_HALL, DEFAULT_ROOM
from rcll.hierarchy.classifier import default_classifier


@pytest.mark.parametrize("text,want", [
    ("With this variant, you will be prompted for a protecting password. If you don't want "
     "your key to be protected by a password, remove the flag '-des3' from the command line "
     "above.", ("infrastructure", "procedure")),
    ("Tomás: I watched two episodes on Netflix yesterday, the home screen keeps recommending "
     "documentaries.", ("general", "event")),
    ("Calvin: I've never been to Boston before, but I hear the parks are amazing.",
     ("general", "fact")),
    ("Never commit the API key to the repository.", ("auth", "warning")),
    ("Evaluated by \"make check\" to pass options. Examples: $ make check TS_OPTS=utmp",
     ("pipeline", "procedure")),
])
def test_first_use_units(text, want):
    assert default_classifier().classify(text) == want


def test_fallback_is_general_fact_and_given_values_win():
    assert default_classifier().classify("A quiet afternoon.") == (DEFAULT_ROOM, DEFAULT_HALL)
    assert default_classifier().classify("A quiet afternoon.", "ops", None) == ("ops", "fact")
