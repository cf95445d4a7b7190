"""The trial record, between config and the two sides: what a trial's record is and how it is assembled.

The result records (models.py: `Trial`, `RunInfo`, ...), the rate functions every figure is made of
(rates.py), time to target (target.py), the one writer of trial files (trial_file.py) and the `command`
hook's event vocabulary (wire.py, standard library only: the hook loads it by its path).  Both producers of
a trial, the built-in step loop (trial/loop.py, trial/finish.py) and a user's program under the start-up
hook (trial/command_finish.py), feed one `TrialAssembler` (assemble.py) and call its `finish()`, the one
place the derived fields (throughput, energy per sample) are set; and the field catalog (fields.py) every
trial table renders its columns from.  Standard library, numpy, pydantic and core only: no paddle.
"""
