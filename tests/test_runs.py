import json
import math

from playground.metrics import STEP
from playground.rundir.runs import RunRecorder, find_runs, read_metrics_jsonl, read_run_info


def test_nan_and_inf_survive_the_round_trip(tmp_path):
    rec = RunRecorder(tmp_path, {"task": "cartpole"})
    rec.log({STEP: 1, "actor/pg_loss": float("nan"), "actor/grad_norm": float("inf"), "critic/vf_loss": -math.inf})
    rec.finish("diverged", "losses stayed non-finite")
    text = (tmp_path / "metrics.jsonl").read_text()
    json.loads(text)  # strict JSON: NaN/Inf are strings
    record = read_metrics_jsonl(tmp_path / "metrics.jsonl").records[0]
    assert math.isnan(record["actor/pg_loss"]) and record["actor/grad_norm"] == math.inf
    assert record["critic/vf_loss"] == -math.inf
    info = read_run_info(tmp_path)
    assert info["status"] == "diverged" and info["last_step"] == 1 and info["end_time"] >= info["start_time"]


def test_tolerant_reader(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"training/global_step": 1, "actor/entropy": 0.5}\n'
                    'garbage\n'
                    '[1, 2]\n'
                    '{"actor/pg_loss": 1}\n'
                    '{"training/global_step": 2, "actor/pg_loss": 0.1}\n'
                    '{"training/global_step": 3, "actor/pg_lo')  # half-written last line: not there yet
    read = read_metrics_jsonl(path)
    assert read.steps == [1, 2]
    assert read.records[0]["actor/entropy"] == 0.5  # verl V1's pre-update entropy keeps its own name
    assert len(read.problems) == 3 and "line 2" in read.problems[0]


def test_verl_file_logger_format(tmp_path):
    path = tmp_path / "verl.jsonl"
    path.write_text('{"step": 4, "data": {"actor/pg_clipfrac": 0.2, "mfu/actor": 0.1}}\n')
    record = read_metrics_jsonl(path).records[0]
    assert record == {"actor/pg_clipfrac": 0.2, "perf/mfu/actor": 0.1, STEP: 4.0}


def test_run_json_is_replaced_atomically_and_find_runs(tmp_path):
    a = RunRecorder(tmp_path / "multirun" / "0", {"task": "cartpole"})
    RunRecorder(tmp_path / "outputs" / "x" / "y", {"task": "reverse"}).close()
    a.update(last_step=5)
    assert not list((tmp_path / "multirun" / "0").glob("*.tmp"))
    assert read_run_info(tmp_path / "multirun" / "0")["last_step"] == 5
    assert find_runs([tmp_path / "multirun", tmp_path / "outputs", tmp_path / "missing"]) == [
        tmp_path / "multirun" / "0", tmp_path / "outputs" / "x" / "y"]
    assert read_run_info(tmp_path / "nothing") is None
