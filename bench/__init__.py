"""Benchmarks and evaluations: development tools, run in development mode (DEBUG=1) unless the
caller says otherwise, as `make bench` and `make eval` do — `python -m bench.<name>` alone too."""

import os

os.environ.setdefault("DEBUG", "1")
