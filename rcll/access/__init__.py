"""Multi-agent access (spec §7): who the caller is, what it may do on which bank, and the
audience/purpose rule every candidate query applies (:mod:`rcll.search.scope`)."""
