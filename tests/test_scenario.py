"""Scenario validation: the shipped files, defaults, round trip, and error paths."""

import copy
from pathlib import Path

import pytest
import yaml

from gcsim.errors import ConfigError
from gcsim.scenario import Scenario, load_scenario, validate_scenario

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ["heavy_tail", "shifted_exponential", "bimodal", "persistent", "no_stragglers"]

MINIMAL = {"name": "m", "n_workers": 4, "schemes": [{"name": "uncoded"}],
           "workload": {"gradient_bytes": 100, "compute": {"dist": "constant", "value": 0.1}}}


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_scenarios_load_and_say_what_they_model(name):
    path = ROOT / "scenarios" / f"{name}.yaml"
    sc = load_scenario(path)
    assert sc.name == name
    assert path.read_text().lstrip().startswith("#")  # the comment saying what it models
    sc.build_schemes()  # every scheme accepts its parameters


def test_heavy_tail_lists_all_nine_schemes_with_pareto_delays():
    sc = load_scenario(ROOT / "scenarios" / "heavy_tail.yaml")
    assert [s.name for s in sc.schemes] == ["uncoded", "ignore-stragglers", "gc-fr", "gc-cr", "gc-mds", "cce-fr",
                                           "cce-cr", "pgc-fr", "pgc-cr"]
    assert sc.stragglers.delay.dist == "pareto"


def test_defaults_and_round_trip(tmp_path):
    sc = validate_scenario(MINIMAL)
    assert (sc.iterations, sc.seed, sc.policy, sc.cancel_latency_s) == (1000, 0, "cancel", 0.0)
    assert sc.network.bandwidth_bytes_per_s == float("inf") and sc.master.decode_s.value == 0.0
    assert sc.stragglers.delay is None and sc.stragglers.persistent is None
    (tmp_path / "r.yaml").write_text(sc.to_yaml())
    again = load_scenario(tmp_path / "r.yaml")
    assert again == sc and again.to_yaml() == sc.to_yaml()


def _err(mutate) -> str:
    d = copy.deepcopy(MINIMAL)
    mutate(d)
    with pytest.raises(ConfigError) as e:
        validate_scenario(d)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_error_paths_name_field_allowed_and_given():
    assert _err(lambda d: d.update(colour="red")).startswith("colour: expected one of the keys name, n_workers")
    assert _err(lambda d: d["workload"].update(gpu=1)).startswith("workload.gpu: expected one of the keys gradient_bytes")
    assert _err(lambda d: d.update(stragglers={"delay": {"dist": "bimodal", "p": 0.1, "delay": 1,
                                                         "base": {"dist": "expon", "scale": 0}}})) == \
        "stragglers.delay.base.scale: expected a number > 0 (seconds), got 0.0"
    assert _err(lambda d: d.update(n_workers=4.0)) == "n_workers: expected a valid integer, got 4.0"
    assert _err(lambda d: d.update(n_workers=0)) == "n_workers: expected greater than or equal to 1, got 0"
    assert _err(lambda d: d.update(seed=-1)) == "seed: expected greater than or equal to 0, got -1"
    assert _err(lambda d: d.update(name="a b")).startswith("name: expected letters, digits")
    assert _err(lambda d: d.update(schemes=[{"name": "uncoded", "s": 1}])) == \
        "schemes.0.s: expected 0 (uncoded waits for every worker) (scheme uncoded), got 1"
    assert _err(lambda d: d.update(schemes=[{"name": "uncoded"}, {"name": "uncoded"}])).startswith(
        "schemes.1.name: expected a name not listed before")
    assert _err(lambda d: d.update(stragglers={"worker_scale": [1, 1]})) == \
        "stragglers.worker_scale: expected a list of n_workers=4 factors, got 2 factors"
    assert _err(lambda d: d.update(stragglers={"persistent": {"p_enter": 0.1, "p_leave": 0, "slowdown": 2}})) == \
        "stragglers.persistent.p_leave: expected greater than 0, got 0"
    assert _err(lambda d: d.update(network={"bandwidth_bytes_per_s": -5})) == \
        "network.bandwidth_bytes_per_s: expected greater than 0, got -5"


def test_labels_allow_a_scheme_twice():
    sc = validate_scenario(dict(MINIMAL, schemes=[{"name": "gc-cr", "s": 1}, {"name": "gc-cr", "s": 2, "label": "gc-cr-s2"}]))
    assert list(sc.build_schemes()) == ["gc-cr", "gc-cr-s2"]


def test_load_errors(tmp_path):
    with pytest.raises(ConfigError, match="scenario: expected an existing YAML file, got"):
        load_scenario(tmp_path / "nope.yaml")
    (tmp_path / "b.yaml").write_text("a: [1,\n")
    with pytest.raises(ConfigError, match="scenario: expected valid YAML, got .*line"):
        load_scenario(tmp_path / "b.yaml")
    (tmp_path / "e.yaml").write_text(yaml.safe_dump(dict(MINIMAL, stragglers={"delay": {"dist": "empirical", "file": "x.csv"}})))
    with pytest.raises(ConfigError, match="stragglers.delay.file: expected an existing CSV file"):
        load_scenario(tmp_path / "e.yaml")
    (tmp_path / "x.csv").write_text("seconds\n0.1\n")
    assert isinstance(load_scenario(tmp_path / "e.yaml"), Scenario)  # relative to the scenario's folder
