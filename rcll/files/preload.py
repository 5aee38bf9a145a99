"""Imported by the converters' fork server (:mod:`rcll.files.sandbox`,
``set_forkserver_preload``): warms what every file's child would otherwise build on its first
document (:func:`rcll.files.convert.warm`). A warm-up that fails is logged and leaves the
children to build it themselves: the server must start whatever happens here."""

import logging

from rcll.files import convert

try:
    convert.warm()
except Exception as exc:  # noqa: BLE001 - the server must not die of its warm-up
    logging.getLogger(__name__).warning("converter warm-up failed: %s: %s",
                                        type(exc).__name__, exc)
