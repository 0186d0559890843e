"""The performance scripts behind `make perf`: run each as `python -m benchmarks.<name>` from the checkout."""
