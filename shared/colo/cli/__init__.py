"""The ``colo`` command line (entry point ``colo.cli.main:main``)."""
