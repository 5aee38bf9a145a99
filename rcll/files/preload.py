"""Imported by the converters' fork server (:mod:`rcll.files.sandbox`,
``set_forkserver_preload``): warms what every file's child would otherwise build on its first
document (:func:`rcll.files.convert.warm`)."""

from rcll.files import convert

convert.warm()
