"""Every refusal is an exception of a documented class carrying the command line's words, never
a crash: a wrong policy name, an unknown parameter, a bad trace row, a bad override."""

import pytest

import arbiter
from conftest import MURI, SIXTY, cli_error

BAD_ROW = "trace_id,tenant,submit_s,gpus,run_time_s\na,t,0,1,10\nb,t,5,x,10\n"


@pytest.fixture
def bad_trace(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text(BAD_ROW)
    return path


def test_the_classes_share_one_base():
    for cls in (arbiter.ScenarioError, arbiter.TraceError, arbiter.PolicyError):
        assert issubclass(cls, arbiter.ArbiterError) and issubclass(cls, Exception)
        assert cls.__module__ == "arbiter"


def test_a_wrong_policy_name_is_a_policy_error_naming_it(cli):
    with pytest.raises(arbiter.PolicyError) as raised:
        arbiter.run(MURI, set={"policies": ["srft"]})
    assert "unknown policy `srft`; did you mean `srtf`?" in str(raised.value)
    assert str(raised.value) == cli_error(cli, "run", str(MURI), "--set", 'policies=["srft"]')
    with pytest.raises(arbiter.PolicyError, match="unknown policy `srft`; did you mean `srtf`"):
        arbiter.simulate(SIXTY, format="tiresias", policy="srft")


def test_an_unknown_parameter_is_a_policy_error_naming_the_key(cli):
    with pytest.raises(arbiter.PolicyError) as raised:
        arbiter.run(MURI, set={"policy.horus.lookahed": 5})
    assert "unknown field `lookahed`, expected one of `lookahead`" in str(raised.value)
    assert str(raised.value) == cli_error(cli, "run", str(MURI), "--set", "policy.horus.lookahed=5")
    with pytest.raises(arbiter.PolicyError, match="unknown field `lookahed`"):
        arbiter.simulate(SIXTY, format="tiresias", policy="horus", horus={"lookahed": 5})


def test_an_unknown_scenario_key_is_a_scenario_error(cli):
    with pytest.raises(arbiter.ScenarioError) as raised:
        arbiter.run(MURI, set={"simulation.round_s": -1})
    assert str(raised.value) == cli_error(cli, "run", str(MURI), "--set", "simulation.round_s=-1")
    assert str(raised.value) == "--set `simulation.round_s=-1`: simulation.round_s must be > 0, got -1"
    with pytest.raises(arbiter.ScenarioError, match="simulatoin"):
        arbiter.run(MURI, set={"simulatoin.round_s": 1})


def test_a_bad_trace_row_is_a_trace_error_naming_file_line_and_column(bad_trace, cli):
    with pytest.raises(arbiter.TraceError) as raised:
        arbiter.simulate(bad_trace)
    assert str(raised.value) == f"{bad_trace}:3: gpus: `x`: invalid float literal"
    assert str(raised.value) == cli_error(cli, "simulate", "--trace", str(bad_trace))
    with pytest.raises(arbiter.TraceError, match=r"bad.csv:3: gpus"):
        arbiter.read_trace(bad_trace)
    with pytest.raises(arbiter.TraceError, match=r"bad.csv:3: gpus"):
        arbiter.run(MURI, set={"policies": ["srtf"], "trace.0.path": str(bad_trace), "trace.0.format": "native"})


def test_a_missing_file_or_format_is_a_trace_error(tmp_path, cli):
    missing = tmp_path / "nope.csv"
    with pytest.raises(arbiter.TraceError) as raised:
        arbiter.simulate(missing)
    assert str(raised.value) == cli_error(cli, "simulate", "--trace", str(missing))
    with pytest.raises(arbiter.TraceError, match="unknown trace format `bogus`; expected one of: philly"):
        arbiter.read_trace(SIXTY, "bogus")
    with pytest.raises(arbiter.TraceError, match="unknown field `iteration_time_factr`"):
        arbiter.read_trace(SIXTY, "tiresias", iteration_time_factr=1.0)


def test_a_missing_scenario_is_a_scenario_error(tmp_path):
    with pytest.raises(arbiter.ScenarioError, match="cannot read .*missing.toml: No such file"):
        arbiter.run(tmp_path / "missing.toml")


def test_values_with_no_toml_form_are_refused_before_running():
    with pytest.raises(arbiter.ScenarioError, match="set `seeds`: None has no TOML form"):
        arbiter.run(MURI, set={"seeds": [None]})
    with pytest.raises(ValueError):
        arbiter.run(MURI, set={"simulation.round_s": float("nan")})
    with pytest.raises(TypeError):
        arbiter.run(MURI, set='policies=["srtf"]')


def test_a_policy_refusing_its_configuration_is_a_policy_error():
    with pytest.raises(arbiter.PolicyError, match="policy `gittins` needs a prior"):
        arbiter.simulate(SIXTY, format="tiresias", policy="gittins")
