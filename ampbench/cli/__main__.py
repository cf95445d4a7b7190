"""`python -m ampbench.cli`: the `ampbench` command."""

from ampbench.cli import main

main()
