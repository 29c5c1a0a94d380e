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


def test_duplicate_yaml_keys_are_an_error_not_silently_overwritten(tmp_path):
    # PyYAML keeps the last of two equal keys: a second `stragglers:` would silently drop the first
    text = yaml.safe_dump(MINIMAL) + "stragglers: {delay: {dist: constant, value: 1}}\nstragglers: {}\n"
    (tmp_path / "d.yaml").write_text(text)
    with pytest.raises(ConfigError) as e:
        load_scenario(tmp_path / "d.yaml")
    msg = str(e.value)
    assert msg.startswith("stragglers: expected a key given once, got 'stragglers' twice (lines ") and "\n" not in msg
    (tmp_path / "n.yaml").write_text("name: a\nworkload: {compute: {dist: constant, value: 1, value: 2}}\n")
    with pytest.raises(ConfigError, match=r"^workload.compute.value: expected a key given once, got 'value' twice"):
        load_scenario(tmp_path / "n.yaml")


@pytest.mark.parametrize("content", ["", "# only a comment\n", "---\n"])
def test_empty_scenario_file_says_empty(content, tmp_path):
    (tmp_path / "e.yaml").write_text(content)
    with pytest.raises(ConfigError) as e:
        load_scenario(tmp_path / "e.yaml")
    assert str(e.value) == "scenario: expected a YAML mapping of scenario fields, got an empty document"


@pytest.mark.parametrize("label", ["a,b", "a b", "", "gc-fr"])
def test_labels_must_be_selectable_names_not_other_schemes(label):
    msg = _err(lambda d: d.update(schemes=[{"name": "gc-cr", "s": 1, "label": label}]))
    assert msg.startswith("schemes.0.label: expected ") and msg.endswith(f"got {label!r}"), msg


def test_label_uncoded_only_on_uncoded():
    # speedup_vs_uncoded is taken from the row labelled `uncoded`: it must be the uncoded scheme
    assert _err(lambda d: d.update(schemes=[{"name": "gc-cr", "s": 1, "label": "uncoded"}])).startswith(
        "schemes.0.label: expected ")
    sc = validate_scenario(dict(MINIMAL, schemes=[{"name": "uncoded", "label": "uncoded"}, {"name": "gc-cr", "s": 1,
                                                                                           "label": "gc-cr_s1"}]))
    assert [s.key for s in sc.schemes] == ["uncoded", "gc-cr_s1"]


def test_self_referencing_yaml_alias_is_a_one_line_error(tmp_path):
    text = yaml.safe_dump(dict(MINIMAL, n_workers=2)) + "stragglers:\n  worker_scale: &w [1, *w]\n"
    (tmp_path / "r.yaml").write_text(text)
    with pytest.raises(ConfigError, match=r"^scenario: expected YAML with no recursive aliases, got '.*r.yaml': "
                                          r"one at line \d+$"):
        load_scenario(tmp_path / "r.yaml")


def test_scheme_too_big_for_memory_names_n_workers(monkeypatch):
    import gcsim.schemes

    def oom(*a, **k):
        raise MemoryError("Unable to allocate 298. GiB")
    monkeypatch.setattr(gcsim.schemes, "make_scheme", oom)
    msg = _err(lambda d: d.update(n_workers=16000))
    assert msg == ("n_workers: expected a number of workers whose schemes fit in memory (the schemes hold n x n "
                   "coefficients), got 16000 (scheme uncoded ran out of memory)")
    # above the random-stream bound (gcsim.streams.MAX_WORKERS) it is refused before any scheme is built
    assert _err(lambda d: d.update(n_workers=200000)) == "n_workers: expected less than or equal to 16384, got 200000"


def test_a_non_mapping_where_a_mapping_belongs_lists_the_keys_not_a_class_name():
    assert _err(lambda d: d.update(schemes=["uncoded"])) == \
        "schemes.0: expected a mapping with the keys name, s, m, seed, label, got 'uncoded'"
    assert _err(lambda d: d.update(workload=[1])) == \
        "workload: expected a mapping with the keys gradient_bytes, model_bytes, compute, cores, scheduler, call_overhead, background, speed_variation, speed_drift, got [1]"
    assert _err(lambda d: d.update(stragglers={"persistent": 0.1})) == \
        "stragglers.persistent: expected a mapping with the keys p_enter, p_leave, slowdown, got 0.1"
