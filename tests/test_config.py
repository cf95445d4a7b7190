"""Suite-file validation: every mistake gives file, key path and reason; profiles merge right."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib

from ampbench.config import ConfigError, deep_merge, parse_override
from ampbench.workloads.suites import load_suite

REPO = Path(__file__).resolve().parent.parent


def err(path: Path, **kw) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        load_suite(path, **kw)
    return e.value


def test_valid_toy_suite_loads_with_defaults(toy_suite):
    s = load_suite(toy_suite()).suite
    assert [m.name for m in s.modes] == ["fp32", "amp-o1-fp16"]
    assert s.mode("fp32").level == "O0" and not s.mode("fp32").amp
    assert s.mode("amp-o1-fp16").scaler.init_loss_scaling == 65536.0
    assert s.thresholds.metric_sigma_k == 2.0


def test_malformed_toml_names_file(toy_suite):
    p = toy_suite(body="[suite\nname='x'")
    e = err(p)
    assert str(p) in str(e) and "malformed TOML" in str(e)


def test_unknown_key_names_key_path(toy_suite):
    e = err(toy_suite("", body=toy_suite().read_text().replace("steps = 12", "stepz = 12")))
    assert e.key == "train.stepz" and "unknown key" in e.reason


def test_wrong_type_names_key_and_value(toy_suite):
    e = err(toy_suite(body=toy_suite().read_text().replace("batch_size = 32", 'batch_size = "big"')))
    assert e.key == "train.batch_size" and "'big'" in e.reason


def test_unknown_mode_level_names_mode(toy_suite):
    e = err(toy_suite(body=toy_suite().read_text().replace('level = "O1"', 'level = "O3"')))
    assert e.key.startswith("modes[1] (amp-o1-fp16).level")


def test_unknown_workload(toy_suite):
    e = err(toy_suite(body=toy_suite().read_text().replace('workload = "toy"', 'workload = "yolo"')))
    assert e.key == "suite.workload" and "yolo" in e.reason and "resnet" in e.reason


def test_unknown_workload_param_is_checked_by_workload_model(toy_suite):
    e = err(toy_suite(body=toy_suite().read_text().replace("train_rows = 512", "train_rowz = 512")))
    assert e.key == "workload.train_rowz"


def test_duplicate_modes_and_missing_fp32(toy_suite):
    body = toy_suite().read_text()
    e = err(toy_suite(body=body.replace('name = "amp-o1-fp16"', 'name = "fp32"').replace('level = "O1"', 'level = "O0"')))
    assert "duplicate mode names: fp32" in e.reason
    e = err(toy_suite(body=body.replace('name = "fp32"', 'name = "base"')))
    assert "no 'fp32' mode" in e.reason or "needs a level" in e.reason


def test_empty_mode_list(toy_suite):
    body = toy_suite().read_text().split("[[modes]]")[0] + "modes = []\n"
    # `modes = []` after [train] would land inside [train]; put it at the top level instead
    body = "modes = []\n" + toy_suite().read_text().split("[[modes]]")[0]
    e = err(toy_suite(body=body))
    assert e.key == "modes" and "at least 1" in e.reason


def test_profile_merges_over_base_and_is_recorded(toy_suite):
    p = toy_suite('[profiles.cpu]\nseeds = [3, 4]\ntrain = { steps = 5 }\n')
    auto = load_suite(p, has_gpu=False)
    assert auto.profile == "cpu" and auto.suite.suite.seeds == [3, 4]
    assert auto.suite.train.steps == 5 and auto.suite.train.batch_size == 32  # merged, not replaced
    assert load_suite(p, has_gpu=True).profile == "default"
    assert load_suite(p, profile="default").suite.train.steps == 12


def test_unknown_profile_and_bad_profile_key(toy_suite):
    p = toy_suite('[profiles.cpu]\ntrain = { steps = 5 }\n')
    e = err(p, profile="gpu")
    assert e.key == "profiles.gpu" and "available: default, cpu" in e.reason
    e = err(toy_suite('[profiles.cpu]\ntrian = { steps = 5 }\n'), has_gpu=False)
    assert e.key == "profiles.cpu.trian"


def test_profile_errors_mention_profile(toy_suite):
    e = err(toy_suite('[profiles.cpu]\ntrain = { steps = 0 }\n'), has_gpu=False)
    assert "(profile cpu)" in str(e) and e.key == "train.steps"


def test_overrides_parse_as_toml():
    assert parse_override("train.steps=5") == ("train.steps", 5)
    assert parse_override("suite.seeds=[1,2]") == ("suite.seeds", [1, 2])
    assert parse_override("workload.model=resnet50") == ("workload.model", "resnet50")


def test_deep_merge_replaces_lists_merges_tables():
    assert deep_merge({"a": {"x": 1, "y": [1]}}, {"a": {"y": [2]}}) == {"a": {"x": 1, "y": [2]}}


def test_config_hash_ignores_seeds_but_not_batch(toy_suite):
    a = load_suite(toy_suite()).suite
    b = load_suite(toy_suite(), overrides=["suite.seeds=[7]"]).suite
    c = load_suite(toy_suite(), overrides=["train.batch_size=16"]).suite
    assert a.config_hash() == b.config_hash() != c.config_hash()


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "suites").glob("*.toml")))
def test_bundled_suites_validate_in_every_profile(name):
    path = REPO / "suites" / name
    load_suite(path, profile="default")
    for prof in tomllib.loads(path.read_text(encoding="utf-8")).get("profiles", {}):
        assert "fp32" in [m.name for m in load_suite(path, profile=prof).suite.modes]


def test_a_folder_given_as_the_suite_is_named_as_a_folder(tmp_path):
    folder = tmp_path / "suite.toml"
    folder.mkdir()
    with pytest.raises(ConfigError, match="is a folder, not a suite file"):
        load_suite(folder)
