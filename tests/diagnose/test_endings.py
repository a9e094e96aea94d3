"""How a run ended (diagnose/endings.py, endings.yaml): the lines a log prints after its last step line when a process
dies, each form on a log written for the test (a step line or two, then the form), and the near misses: the same text
in a step line or before the last step, and warnings that are not fatal."""

from __future__ import annotations

import pytest

from playground.diagnose.endings import forms
from playground.diagnose.readers import parse_verl_text
from playground.diagnose.report import dumps, format_markdown, format_report
from playground.diagnose.sources import diagnose_read

STEPS = ("step:1 - actor/entropy:0.61 - actor/grad_norm:0.35 - critic/score/mean:0.21 - response_length/mean:310.0\n"
         "step:2 - actor/entropy:0.60 - actor/grad_norm:0.33 - critic/score/mean:0.24 - response_length/mean:305.0\n")

# one line per form, as its source prints it: (form, line, the id it proves, whether it names the cause)
EXAMPLES = [
    ("cuda_out_of_memory", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.16 GiB. GPU 0 has a total "
     "capacity of 79.10 GiB of which 1.63 GiB is free.", "out_of_memory", True),
    ("cuda_out_of_memory", "RuntimeError: CUDA error: out of memory", "out_of_memory", True),
    ("ray_memory_monitor", "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
     "out_of_memory", True),
    ("ray_memory_monitor", "(raylet) [2026-11-02 07:01:10,094 E 64995 64995] (raylet) node_manager.cc:3035: 1 Workers "
     "(tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node",
     "out_of_memory", True),
    ("kernel_oom_killer", "[81234.567890] Out of memory: Killed process 4711 (python3) total-vm:98765432kB",
     "out_of_memory", True),
    ("host_out_of_memory", "OSError: [Errno 12] Cannot allocate memory", "out_of_memory", True),
    ("host_out_of_memory", "MemoryError", "out_of_memory", True),
    ("ray_worker_connection_lost", "The actor is dead because its worker process has died. Worker exit type: "
     "SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. There "
     "are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage. "
     "(2) ray stop --force is called. (3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected "
     "errors.", "training_crash", False),
    ("ray_actor_died", "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
     "training_crash", False),
    ("ray_worker_died", "(raylet) A worker died or was killed while executing a task by an unexpected system error. "
     "To troubleshoot the problem, check the logs for the dead worker.", "training_crash", False),
    ("killed", "Killed", "training_crash", False),
    ("killed", "./train.sh: line 12: 4711 Killed                  python3 -m verl.trainer.main_ppo",
     "training_crash", False),
    ("killed", "  traceback : Signal 9 (SIGKILL) received by PID 4711", "training_crash", False),
    ("segmentation_fault", "Segmentation fault (core dumped)", "training_crash", True),
    ("segmentation_fault", "*** SIGSEGV received at time=1733612345 on cpu 3 ***", "training_crash", True),
    ("fatal_signal", "Aborted (core dumped)", "training_crash", True),
    ("fatal_python_error", "Fatal Python error: Aborted", "training_crash", True),
    ("cpp_terminate", "terminate called after throwing an instance of 'c10::DistBackendError'", "training_crash",
     True),
    ("nccl_timeout", "[rank0]:[E1207 20:27:21.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught collective "
     "operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=131072000, NumelOut=131072000, "
     "Timeout(ms)=600000) ran for 600081 milliseconds before timing out.", "training_crash", True),
    ("nccl_error", "torch.distributed.DistBackendError: NCCL error in: "
     "../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled system error, NCCL version 2.21.5",
     "training_crash", True),
    ("cuda_error", "RuntimeError: CUDA error: an illegal memory access was encountered", "training_crash", True),
    ("python_exception", "ValueError: Generated too many. Please check your data.", "training_crash", True),
    ("python_exception", "ray.exceptions.RayTaskError(NotImplementedError): ray::TaskRunner.run() (pid=1, ip=10.0.0.1)",
     "training_crash", True),
    ("python_exception", "KeyboardInterrupt", "training_crash", True),
]


def test_every_form_of_the_table_has_an_example_here():
    assert {form.name for form in forms()} == {name for name, *_ in EXAMPLES}


@pytest.mark.parametrize(("form", "line", "finding", "named"), EXAMPLES, ids=[f"{e[0]}-{i}" for i, e in
                                                                              enumerate(EXAMPLES)])
def test_a_form_after_the_last_step_is_how_the_run_ended(form, line, finding, named):
    read = parse_verl_text(STEPS + line + "\n", name="run.log")
    assert read.ended_with == line.strip()[:200]
    assert f"({form})" in read.ended_how
    assert ("the cause is in this text" in read.ended_how) is named
    assert ("a candidate" in read.ended_how) is not named
    assert read.out_of_memory is (finding == "out_of_memory")
    report = diagnose_read(read)
    assert finding in report.roots() and "healthy" not in report.ids() and "inconclusive" not in report.ids()
    crash = next(f for f in report.findings if f.id == finding)
    (row,) = [e for e in crash.evidence if e["metric"] == "how it ended"]
    assert row["value"] == line.strip()[:200] and row["range"] == read.ended_how and row["status"] == "bad"


def test_a_candidate_names_what_may_have_killed_the_process():
    read = parse_verl_text(STEPS + "Killed\n", name="run.log")
    assert "OOM killer" in read.ended_how and "training_crash" in diagnose_read(read).roots()
    assert not read.out_of_memory  # SIGKILL proves no OOM: Ray and the shell say it is one candidate


def test_the_line_that_says_most_is_the_ending():
    """Ray's death message (a candidate) after the worker's own exception (a cause named): the worker's line is the
    evidence; an OOM proof beats both; of lines that say as much, the last."""
    worker = "(WorkerDict pid=4711) RuntimeError: CUDA error: an illegal memory access was encountered"
    died = "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."
    read = parse_verl_text(STEPS + f"{worker}\n{died}\n", name="run.log")
    assert read.ended_with == worker.split(") ", 1)[1] and "cause is in this text" in read.ended_how
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB."
    assert parse_verl_text(STEPS + f"{oom}\n{worker}\n{died}\n", name="run.log").ended_with == oom
    two = parse_verl_text(STEPS + "ValueError: first\nRuntimeError: second\n", name="run.log")
    assert two.ended_with == "RuntimeError: second"


def test_after_a_wandb_run_summary_the_exception_line_alone_is_the_end():
    block = ("wandb: Run history:\nwandb:    actor/entropy ▁▃▅▇█\nwandb: critic/score/mean ▁▂▄▆█\nwandb:\n"
             "wandb: Run summary:\nwandb:    actor/entropy 0.6\nwandb: critic/score/mean 0.3\n"
             "wandb: training/global_step 5\n")
    for text in (STEPS + block, block):  # behind verl's step lines, and a wandb block alone (its own reader)
        read = parse_verl_text(text + "RuntimeError: Expected all tensors to be on the same device\n", name="run.log")
        assert read.ended_with == "RuntimeError: Expected all tensors to be on the same device", text
        assert "training_crash" in diagnose_read(read).roots()
        survived = parse_verl_text("RuntimeError: retried\n" + text, name="run.log")
        assert survived.ended_with == ""


NEAR_MISSES = [
    # the same text before the last step line: the run went on
    "Segmentation fault (core dumped)\nKilled\nRuntimeError: CUDA error: an illegal memory access was encountered\n"
    "torch.OutOfMemoryError: CUDA out of memory.\n" + STEPS,
    # inside a step line
    STEPS + "step:3 - actor/entropy:0.59 - actor/grad_norm:0.30 - critic/score/mean:0.27 - note:Killed\n",
    # NCCL's INFO and WARN lines, even one that says "NCCL error", and warnings that are not fatal
    STEPS + "gpu1:4711:4790 [0] NCCL INFO Channel 00/02 :    0   1\n"
            "gpu1:4711:4790 [0] NCCL INFO NCCL_ASYNC_ERROR_HANDLING set: NCCL error handling enabled\n"
            "gpu1:4711:4790 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<43215> failed\n"
            "[W1207 20:27:21 ProcessGroupNCCL.cpp:1234] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS is the default now\n"
            "/opt/verl/verl/utils/torch_functional.py:12: UserWarning: the flash-attn kernel is not installed\n"
            "INFO 12-07 20:27:22 Killed 3 stale checkpoints; 'Aborted' and 'Killed' are statuses of our scheduler\n"
            "(TaskRunner pid=77) shutting down\n",
    # an exception CPython ignores: in a __del__ or an atexit handler, at the end of a run that finished
    STEPS + "Exception ignored in: <function LLM.__del__ at 0x7f0c2a1b3d90>\nTraceback (most recent call last):\n"
            '  File "/opt/vllm/entrypoints/llm.py", line 236, in __del__\n'
            "AttributeError: 'NoneType' object has no attribute 'shutdown'\n"
            "Error in atexit._run_exitfuncs:\nTraceback (most recent call last):\n"
            "TypeError: 'NoneType' object is not callable\n",
]


@pytest.mark.parametrize("text", NEAR_MISSES, ids=["before-last-step", "in-a-step-line", "warnings",
                                                        "ignored-by-cpython"])
def test_near_misses_are_no_ending(text):
    read = parse_verl_text(text, name="run.log")
    assert read.ended_with == "" and read.ended_how == "" and not read.out_of_memory
    assert not {"training_crash", "out_of_memory"} & set(diagnose_read(read).ids())


def test_an_ignored_exception_does_not_hide_the_fatal_one_after_it():
    text = (STEPS + "Exception ignored in: <function Pool.__del__>\nAttributeError: 'NoneType' object has no attribute"
            " 'close'\nRuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert parse_verl_text(text, name="run.log").ended_with.startswith("RuntimeError: CUDA error")


def test_the_reports_show_the_line_and_what_it_tells():
    read = parse_verl_text(STEPS + "Killed\n", name="run.log")
    report = diagnose_read(read)
    text, markdown = format_report([("run.log", report)]), format_markdown("run.log", report)
    for shown in (text, markdown):
        assert "how it ended" in shown and "Killed" in shown and "a candidate" in shown
    assert '"how it ended"' in dumps([("run.log", report)])


def test_a_long_stretch_without_a_step_line_is_matched_in_batches(monkeypatch):
    from playground.diagnose.endings import EndWatch

    monkeypatch.setattr(EndWatch, "BATCH", 3)  # lines are matched every 3: an ending and an ignore marker span batches
    noise = "".join(f"INFO worker {i} loading shards\n" for i in range(7))
    text = (STEPS + "RuntimeError: the real one\n" + noise + "Exception ignored in: <function X.__del__>\n"
            + noise + "AttributeError: ignored one\n" + noise)
    assert parse_verl_text(text, name="run.log").ended_with == "RuntimeError: the real one"
    assert parse_verl_text(text + STEPS.replace("step:1", "step:3").replace("step:2", "step:4"),
                           name="run.log").ended_with == ""
