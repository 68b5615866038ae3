"""Test kit: fixtures that start real nats-server and redis-server on free ports."""
