"""Repository root. The benchmark's machinery is the predbench plugin (pytest_predbench.plugin,
loaded through its pytest11 entry point); its test module is bench_sessions/test_sessions.py."""
