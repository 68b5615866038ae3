"""Colo common library: message types, subjects, codec, bus, store, runtime, settings."""

__version__ = "0.1.0"
