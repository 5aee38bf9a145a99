"""The ``rcll`` command line. Starts the API and workers as processes; never imports Flask
or Celery itself."""
