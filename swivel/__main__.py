"""`python -m swivel ...` runs the same command line as the `swivel` console script."""

from __future__ import annotations

from swivel.cli.main import main

if __name__ == "__main__":
    main()
