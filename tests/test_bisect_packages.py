"""`ampbench bisect --package NAME=A..B` (and `--paddle A..B`): a range of package versions, each candidate in
its own environment made by bisect (commands/bisect_packages.py).

Nothing is downloaded: the tests write a local wheelhouse of `slowpkg` 1.0 .. 1.5, a tiny pure-Python package
whose `work()` sleeps 10 ms a call up to 1.1 and 16 ms from 1.2 (each wheel written as the wheel format says:
a zip of the package, METADATA, WHEEL and RECORD; no build backend is needed), and bisect asks pip for its
versions with `--find-links DIR --no-index`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ampbench.cli import app
from tests.test_bisect import _suite

cli = CliRunner()
SLOW_FROM = "1.2"
VERSIONS = ("1.0", "1.1", "1.2", "1.3", "1.4", "1.5")

PROGRAM = '''
import argparse, json, os
import paddle
import slowpkg
ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int); ap.add_argument("--seed", type=int); ap.add_argument("--out")
a = ap.parse_args()
paddle.seed(a.seed)
model = paddle.nn.Linear(8, 2)
opt = paddle.optimizer.SGD(parameters=model.parameters(), learning_rate=0.1)
for i in range(a.steps):
    loss = model(paddle.randn([16, 8])).mean()
    loss.backward()
    slowpkg.work()
    opt.step()
    opt.clear_grad()
with open(os.path.join(a.out, "metrics.json"), "w") as f:
    json.dump({"accuracy": 0.5, "slowpkg": slowpkg.__version__}, f)
'''


def _wheel(dest: Path, name: str, version: str, code: str) -> Path:
    """A py3-none-any wheel of one module package (PEP 427: the files, their dist-info and a RECORD)."""
    dist = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": code,
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: ampbench-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    out = dest / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return out


@pytest.fixture(scope="module")
def house(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the wheelhouse, a suite whose program imports slowpkg) for every test of this module."""
    root = tmp_path_factory.mktemp("pkg")
    wheels = root / "wheels"
    wheels.mkdir()
    for v in VERSIONS:
        sleep = 0.016 if tuple(map(int, v.split("."))) >= tuple(map(int, SLOW_FROM.split("."))) else 0.010
        _wheel(wheels, "slowpkg", v, f"import time\n__version__ = {v!r}\n\ndef work():\n    time.sleep({sleep})\n")
    proj = root / "proj"
    proj.mkdir()
    (proj / "train.py").write_text(PROGRAM)
    suite = _suite(root, proj, steps=24)   # test_bisect's command suite, the program in proj/
    return wheels, suite


def _bisect(args: list[str]):
    return cli.invoke(app, ["bisect", *args], env={"COLUMNS": "200"})


@pytest.mark.parametrize("args,key,says", [
    (["--package", "slowpkg=1.0-1.5"], "--package", "NAME=A..B"),
    (["--package", "slowpkg=1.x..1.5"], "--package", "not a version"),
    (["--package", "slowpkg=1.5..1.0"], "--package", "older version to a newer one"),
    (["--paddle", "3.3.1..3.3.1"], "--paddle", "older version to a newer one"),
    (["--package", "slowpkg=1.0..1.7"], "--package", "slowpkg==1.7: is not offered"),
    (["--package", "nosuchpkg=1.0..1.5"], "--find-links", "offers no version of nosuchpkg"),
    (["--package", "slowpkg=1.0..1.5", "--index-url", "http://127.0.0.1:9/simple"], "--index-url",
     "cannot be reached"),
    (["--package", "slowpkg=1.0..1.5", "--repo", "."], "--package", "give no --repo"),
    (["--find-links", "WHEELS", "--good", "a"], "--find-links", "is the package index of --package"),
])
def test_a_bad_package_range_is_one_line_exit_2(house, tmp_path, args, key, says):
    """Each refused in one line naming the option, before any folder or environment is made (versions missing
    from the index and an unreachable index are asked of pip itself)."""
    wheels, suite = house
    index = [] if "--index-url" in args else ["--find-links", str(wheels), "--no-index"]
    args = [str(wheels) if a == "WHEELS" else a for a in args]
    if "--find-links" in args:
        index = []
    r = _bisect([str(suite), *args, *index, "--out", str(tmp_path / "out")])
    assert r.exit_code == 2 and key in r.output and says in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output, r.output
    assert not (tmp_path / "out").exists()


def test_a_missing_wheel_folder_is_refused(house, tmp_path):
    _, suite = house
    r = _bisect([str(suite), "--package", "slowpkg=1.0..1.5", "--find-links", str(tmp_path / "none"), "--no-index",
                 "--out", str(tmp_path / "out")])
    assert r.exit_code == 2 and "--find-links" in r.output and "not a folder" in r.output, r.output


def _imports_slowpkg(python: str) -> bool:
    out = subprocess.run([python, "-c", "import importlib.util as u; print(u.find_spec('slowpkg') is not None)"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip() == "True"


@pytest.mark.slow
def test_bisect_names_the_version_that_made_the_program_slower(house, tmp_path):
    """The wheelhouse holds 1.0 .. 1.5; the range 1.1..1.3 is the three versions between (1.0, 1.4, 1.5 left
    out), 1.2 makes every step ~45% slower: bisect names 1.2 (both endpoints, the candidate, its recheck),
    each version ran in its own environment under the bisect folder holding that version, the user's
    interpreter never got slowpkg; resumed, it runs nothing again and makes no environment again."""
    wheels, suite = house
    out = tmp_path / "out"
    r = _bisect([str(suite), "--package", "slowpkg=1.1..1.3", "--find-links", str(wheels), "--no-index",
                 "--max-seeds", "3", "--out", str(out)])
    assert r.exit_code == 1, r.output
    assert "first bad version: slowpkg==1.2" in r.output, r.output
    folder = next(out.glob("prog/bisect-*"))
    doc = json.loads((folder / "bisect.json").read_text())
    assert doc["kind"] == "package" and doc["package"] == "slowpkg" and doc["commits"] == ["1.1", "1.2", "1.3"]
    assert doc["index"] == ["--find-links", str(wheels.resolve()), "--no-index"]
    assert [c["role"] for c in doc["candidates"]] == ["good-endpoint", "bad-endpoint", "candidate", "recheck"]
    for c in doc["candidates"]:
        env = Path(c["env"])
        assert c["version"] == doc["commits"][c["index"]] and env.parent == folder / "envs", c
        ran = json.loads(next((Path(c["run_dir"]) / "outputs").glob("fp32__seed*/metrics.json")).read_text())
        assert ran["slowpkg"] == c["version"], (c, ran)
    assert sorted(p.name for p in (folder / "envs").iterdir()) == ["1.1", "1.2", "1.3"]
    md = (folder / "bisect.md").read_text()
    assert "First bad version: `1.2`" in md and "3 versions of `slowpkg`" in md and "GbB\n ^" in md, md
    assert not _imports_slowpkg(sys.executable)

    made = {p.name: (p / ".ampbench-ready").stat().st_mtime_ns for p in (folder / "envs").iterdir()}
    again = _bisect(["--resume", str(folder)])
    assert again.exit_code == 1 and "first bad version: slowpkg==1.2" in again.output, again.output
    assert len(json.loads((folder / "bisect.json").read_text())["candidates"]) == len(doc["candidates"])
    assert {p.name: (p / ".ampbench-ready").stat().st_mtime_ns for p in (folder / "envs").iterdir()} == made


def test_a_look_whose_program_lives_elsewhere_is_judged_against_the_good_baseline(tmp_path):
    """A candidate in another clone (src-1/, --parallel) or in a version's environment runs the good endpoint's
    suite with only the program's place changed, so its config hash differs: against the good baseline as
    saved, check refuses it as not comparable; bisect's reference for it is that baseline under the look's own
    hash, and the rule is judged (a 60% slower look FAILs).  Factory-made runs (tests/factories.py)."""
    import io

    import numpy as np
    from rich.console import Console

    from ampbench.commands import bisect as bisect_cmd
    from ampbench.commands.check import check_run
    from ampbench.core.errors import ResultsError
    from ampbench.results.baselines import save_baseline
    from ampbench.results.bisect_file import BisectFile
    from tests.factories import StepNoise, make_run, make_suite, make_trials

    suite = make_suite(modes=("fp32",), name="prog")
    here, there = (suite.model_copy(update={"workload": {"cwd": f"/b/{d}"}}) for d in ("src", "src-1"))
    noise = StepNoise(step_sd=0.01, trial_sd=0.002, stall_rate=0.0)
    good = make_run(tmp_path / "runs", here, make_trials(here, base_time={"fp32": 0.05}, noise=noise,
                                                         rng=np.random.default_rng(1)), run_id="good")
    look = make_run(tmp_path / "runs", there, make_trials(there, base_time={"fp32": 0.08}, noise=noise,
                                                          rng=np.random.default_rng(2)), run_id="look")
    folder = tmp_path / "bisect"
    folder.mkdir()
    save_baseline(good, folder / "good-baseline.json")
    with pytest.raises(ResultsError, match="not comparable"):
        check_run(look, baseline=folder / "good-baseline.json")
    doc = BisectFile(suite="prog", suite_file="s.toml", repo="", good="a", bad="b", rule="history-throughput",
                     modes=["fp32"], max_seeds=3, commits=["a" * 40, "b" * 40])
    ctx = bisect_cmd._Ctx(folder, doc, Path("s.toml"), None, [], Console(file=io.StringIO()), io.StringIO())
    assert bisect_cmd._look_baseline(ctx, here.config_hash()) == folder / "good-baseline.json"
    ref = bisect_cmd._look_baseline(ctx, there.config_hash())
    assert ref is not None and ref.parent == folder / "baselines"
    rules = [r for v in check_run(look, baseline=ref).verdicts for r in v.rules if r.rule == "history-throughput"]
    assert [r.status for r in rules] == ["FAIL"], rules


def test_an_environment_a_kill_left_half_made_is_made_again_and_a_finished_one_reused(house, tmp_path, monkeypatch):
    """envs/<v>/ without its `.ampbench-ready` (a kill mid-install) is removed and made again, holding the
    version; with it, nothing is run again (pip would fail here)."""
    from ampbench.commands import bisect_packages as bp

    wheels, _ = house
    half = bp.env_dir(tmp_path, "1.4")
    half.mkdir(parents=True)
    (half / "left-by-a-kill").write_text("x")
    index = ["--find-links", str(wheels), "--no-index"]
    py = bp.ensure_env(tmp_path, sys.executable, "slowpkg", "1.4", index)
    assert not (half / "left-by-a-kill").exists() and (half / bp.READY).is_file()
    out = subprocess.run([str(py), "-c", "import slowpkg; print(slowpkg.__version__)"], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "1.4"

    def no_pip(*_a, **_k):
        raise AssertionError("a finished environment was made again")

    monkeypatch.setattr(bp, "_pip", no_pip)
    assert bp.ensure_env(tmp_path, sys.executable, "slowpkg", "1.4", index) == py


def test_an_environment_made_from_a_venv_interpreter_shares_that_venvs_packages(house, tmp_path):
    """The suite's interpreter is itself a virtual environment (the usual case): `venv --system-site-packages`
    alone would share only the base interpreter's packages; the `.pth` bisect writes shares the venv's own too
    (a module only that venv holds imports in the candidate's environment, beside the candidate version)."""
    from ampbench.commands import bisect_packages as bp

    wheels, _ = house
    user = tmp_path / "user-venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(user)], check=True)
    site = subprocess.run([str(user / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "only_in_user_venv.py").write_text("HERE = True\n")
    py = bp.ensure_env(tmp_path / "bisect", str(user / "bin" / "python"), "slowpkg", "1.1",
                       ["--find-links", str(wheels), "--no-index"])
    out = subprocess.run([str(py), "-c", "import only_in_user_venv, slowpkg; print(slowpkg.__version__)"],
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "1.1", out.stderr
    assert not (Path(site) / "slowpkg").exists()   # the user's venv got nothing
