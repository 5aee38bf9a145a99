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


def test_a_daemonic_process_still_converts_in_a_warm_child(monkeypatch):
    """A Celery pool process is daemonic to multiprocessing; conversion still works there,
    in a warm child (no fall back to a fresh interpreter)."""
    import multiprocessing.process as mp_process

    def no_fresh(*_a):
        raise AssertionError("fell back to a fresh interpreter")

    monkeypatch.setattr(sandbox, "_convert_fresh", no_fresh)

    config = mp_process.current_process()._config
    config["daemon"] = True
    try:
        got = sandbox.convert_bounded(docs.pdf(["Gamma three."]), "g.pdf", None,
                                      convert.DEFAULT_LIMITS)
    finally:
        config.pop("daemon", None)
    assert [s.page for s in got] == [1] and "Gamma three." in got[0].text
    assert sandbox._warm_context() is not None
