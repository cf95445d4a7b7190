"""The trial record's spine, between config and the two sides: how a trial's record is assembled.

Both producers of a trial, the built-in step loop (trial/loop.py, trial/finish.py) and a user's program
under the start-up hook (trial/command_finish.py), feed one `TrialAssembler` (record/assemble.py) and
call its `finish()`, the one place the derived fields (throughput, energy per sample) are set, so the
two kinds of trial cannot compute them differently; and the field catalog (record/fields.py) every
trial table renders its columns from.  Standard library, numpy, pydantic and core only: no paddle.
"""
