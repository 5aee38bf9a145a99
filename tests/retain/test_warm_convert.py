"""Conversion in children forked from a warm fork server (rcll.files.sandbox): the same
sections as a fresh interpreter gives, and the server is made once per process."""

from rcll.files import convert, sandbox
from tests.retain import file_docs as docs


def test_warm_children_give_the_fresh_childs_sections():
    data = docs.pdf(["Alpha one.", "Beta two."])
    warm = sandbox.convert_bounded(data, "m.pdf", None, convert.DEFAULT_LIMITS)
    ctx = sandbox._warm_context()
    assert ctx is not None and ctx.get_start_method() == "forkserver"
    assert sandbox._warm_context() is ctx  # one server per process
    fresh = sandbox._convert_fresh(data, "m.pdf", None, convert.DEFAULT_LIMITS)
    assert [(s.text, s.page, s.pages) for s in warm] == [(s.text, s.page, s.pages)
                                                         for s in fresh]
    assert [s.page for s in warm] == [1, 2] and "Alpha one." in warm[0].text
