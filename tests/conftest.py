"""Test configuration: the real-server fixtures live in colo.testing."""

pytest_plugins = ["colo.testing.fixtures", "colo.testing.hang_guard"]
