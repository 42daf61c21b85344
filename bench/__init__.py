"""Commands that measure, report and probe the submission: each file is one, run from the
repository's root as `python3 -m bench.NAME` (bench/README.md lists them); the libraries they
share are in tools/."""
