"""predbench: a pytest-driven benchmark of AI bug-finding in problem-reductions rules.

Importing this package must stay cheap: it is loaded as a pytest plugin in every run.
"""

__version__ = "0.1.0"
