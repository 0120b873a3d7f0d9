"""Test helpers: a fake monotonic clock and an in-memory datagram network."""
