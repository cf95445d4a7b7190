"""The run engine: a run request (what to train) and its policies (how), executed by one `execute`.

Between commands/ and the two stacks.  Every verb that trains (run, bisect, tune, selftest, sweep,
history bisect) builds a `RunRequest` (request.py: suite, profile, modes, seeds, overrides, output) and
calls `execute.execute` with the policies that say how: a `Launcher` (launcher.py; local processes, Slurm
jobs, a Slurm array, nodes started by hand: launchers/, one file each), a seed policy (seeds/: fixed,
until-decided, bisect's search) and a batch policy (batch.py: as configured, at the probe's largest).
A policy is an object, not a flag: a new one is one file (registered by its `kind`) plus its test.
"""
