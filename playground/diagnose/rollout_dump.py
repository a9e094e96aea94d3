"""verl's rollout dumps read back: `trainer.rollout_data_dir` (and `trainer.validation_data_dir`, the same format).

verl writes them in `RayPPOTrainer._write_generations` (verl/trainer/ppo/ray_trainer.py; the V1 trainer's
`trainer_base.py` has the same method), called through `_dump_generations` from `_log_rollout_data` once per training
step when `trainer.rollout_data_dir` is set (ppo_trainer.yaml: "Directory for logging rollout data; no dump if
null"):

- one file per step, `{dump_path}/{global_steps}.jsonl`, one JSON object a line, one line per sample;
- each line holds `input` (the prompt, `tokenizer.batch_decode(prompts, skip_special_tokens=True)`), `output` (the
  response, decoded the same way), `gts` (`reward_model.ground_truth`, null where none), `score` (the sum of
  `token_level_scores`: the reward before any KL penalty) and `step` (`global_steps`);
- plus every `reward_extra_infos_dict` key whose list has one value per sample (a reward function's extras such as
  `acc`, and `request_id` where the batch has one; the V1 trainer writes `uid`, and sorts the lines by it).

Samples of one prompt (a GRPO group) share their `input`; the legacy trainer writes them in batch order (a prompt's
`rollout.n` samples next to each other), so a sample is named by its place among its step's samples: sample 0 is
the file's first line (a line that could not be read is skipped, and named in the problems).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

STEP_FILE = re.compile(r"^(\d+)\.jsonl$")
CORE_FIELDS = ("input", "output", "gts", "score", "step")


@dataclass
class RolloutDump:
    """A dump dir read: its samples per step (each a line's dict, in file order), and what could not be read."""

    source: str
    steps: dict[int, list[dict]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def step_numbers(self) -> list[int]:
        return sorted(self.steps)

    def sample_count(self) -> int:
        return sum(len(samples) for samples in self.steps.values())

    def extra_keys(self, step: int) -> list[str]:
        """The step's fields beyond verl's five (its reward's extras), in the order they first appear."""
        keys = dict.fromkeys(k for sample in self.steps.get(step, []) for k in sample)
        return [k for k in keys if k not in CORE_FIELDS]


def step_files(path: Path) -> dict[int, Path]:
    """The `{step}.jsonl` files directly in `path` (none where it is not a directory)."""
    if not path.is_dir():
        return {}
    return {int(m.group(1)): p for p in path.iterdir() if p.is_file() and (m := STEP_FILE.match(p.name))}


def is_dump_dir(path: str | Path) -> bool:
    """Whether `path` looks like a rollout dump dir: `{step}.jsonl` files whose first line is a sample with an
    `output` (a run dir's `metrics.jsonl` is no step file, so a run dir never is one)."""
    files = step_files(Path(path))
    if not files:
        return False
    first = files[min(files)]
    try:
        with open(first, encoding="utf-8") as f:
            line = f.readline()
        return isinstance(sample := json.loads(line), dict) and "output" in sample
    except (OSError, ValueError):
        return False


def score_of(sample: dict) -> float | None:
    """The sample's `score` as a number (None where absent or not a number)."""
    value = sample.get("score")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def read_dump(path: str | Path) -> RolloutDump:
    """Read every `{step}.jsonl` of a dump dir. A line that is not a JSON object with a text `output` is skipped and
    named in `problems`; the step is the file's name (verl writes the same number into each line's `step`).

    Raises:
        FileNotFoundError: nothing at `path`. NotADirectoryError: `path` is a file.
        ValueError: a directory without a `{step}.jsonl` file (not a dump).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such rollout dump dir")
    if not path.is_dir():
        raise NotADirectoryError(f"{path}: a rollout dump is a directory of {{step}}.jsonl files (verl's "
                                 "trainer.rollout_data_dir), not a file")
    files = step_files(path)
    if not files:
        raise ValueError(f"{path}: no {{step}}.jsonl file: not a verl rollout dump (trainer.rollout_data_dir)")
    dump = RolloutDump(source=str(path))
    for step in sorted(files):
        samples: list[dict] = []
        with open(files[step], encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    sample = json.loads(line)
                except ValueError:
                    dump.problems.append(f"{files[step].name}:{number}: not JSON")
                    continue
                if not isinstance(sample, dict) or not isinstance(sample.get("output"), str):
                    dump.problems.append(f"{files[step].name}:{number}: no text `output`")
                    continue
                samples.append(sample)
        dump.steps[step] = samples
    return dump
