"""The benchmark's test module lives here; see test_sessions.py."""
