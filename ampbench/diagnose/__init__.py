"""Layer: diagnose. Which op made AMP go wrong, and what to try.

models (diagnosis.json) <- compare (two op dumps) <- advice (TOML lines to try) <- render (md, terminal)
<- rerun (the FP32/AMP pair, the `ampbench diagnose` verb). Each imports only leftwards.
"""
