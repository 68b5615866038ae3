"""pytest fixtures (real servers); filled in by the test kit."""
