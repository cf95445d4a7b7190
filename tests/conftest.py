"""Shared fixtures: tiny suite files for the toy workload (a trial takes ~3 s, mostly Paddle's import)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

TOY_SUITE = """
[suite]
name = "toy"
workload = "toy"
metric = "accuracy"
seeds = [0]

[workload]
train_rows = 512
eval_rows = 128

[train]
batch_size = 32
steps = 12
warmup_steps = 2
timeout_s = 120

[[modes]]
name = "fp32"

[[modes]]
name = "amp-o1-fp16"
level = "O1"
dtype = "float16"
custom_black_list = ["embedding"]
"""


@pytest.fixture
def toy_suite(tmp_path: Path):
    """Write a toy suite (optionally with extra TOML appended) and return its path."""

    def make(extra: str = "", body: str = TOY_SUITE, name: str = "toy.toml") -> Path:
        p = tmp_path / name
        p.write_text(textwrap.dedent(body) + "\n" + textwrap.dedent(extra))
        return p

    return make


@pytest.fixture
def cache_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("AMPBENCH_CACHE", str(d))
    return d


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch folder as the current directory, its own cache, AMPBENCH_FAULT cleared."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AMPBENCH_FAULT", raising=False)
    monkeypatch.setenv("AMPBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path


@pytest.fixture
def run_dir(work: Path) -> Path:
    """A finished two-seed run folder made by the factories (no paddle, no training)."""
    from tests.factories import make_run, make_suite, make_trials

    s = make_suite(seeds=(0, 1))
    return make_run(work / "runs", s, make_trials(s, n_steps=20, config_hash=s.config_hash()))
