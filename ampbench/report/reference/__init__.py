"""The reference pages of docs/reference/, each rendered whole from the code (one module per page).

`pages.PAGES` lists them; `ampbench docs --write docs/` writes each, `ampbench docs --check docs/` names a
stale or missing one (commands/docs.py).  A page is a function of the code alone: no date, no path of
this machine, no terminal width (every table and paragraph is rendered here, not by click's formatter).
"""
