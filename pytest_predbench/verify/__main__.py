"""`python -m pytest_predbench.verify [--json] CERT.json ...`: the same as `predbench verify`."""

import sys

from pytest_predbench.cli import main

if __name__ == "__main__":
    sys.exit(main(["verify", *sys.argv[1:]]))
