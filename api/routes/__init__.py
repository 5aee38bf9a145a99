"""One module per endpoint family."""
