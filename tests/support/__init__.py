"""Test harness shared by the tests, `make trials` and benchmarks/: real benchmark runs in scratch
workspaces, SIGKILL trials, and finished fake runs for the report tests. Never part of the installed package."""
