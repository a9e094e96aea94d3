"""`python -m playground.diagnose PATH`: diagnose a run dir, a multirun dir, a metrics file or a verl log (with
`--replay`: and name the playground scenario that reproduces it small, with its fix: `diagnose/replay.py`);
`python -m playground.diagnose --catalogue`: print the rules as one Markdown table (docs/catalogue.md).

Exit code 0 whatever was found, 2 when nothing could be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from playground.diagnose import catalogue_table
from playground.diagnose.calibration import FAMILIES
from playground.diagnose.readers import parse_verl_text, path_kind, read_any
from playground.diagnose.replay import format_replay, replay, replay_read
from playground.diagnose.report import dumps, format_diagnosis, json_document
from playground.diagnose.sources import diagnose_path, diagnose_read
from playground.runs import METRICS, jsonable, read_metrics_jsonl


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m playground.diagnose",
        description="Diagnose PPO training metrics: a run dir (writes its findings.json), a multirun dir, "
                    "a metrics.jsonl, a TensorBoard log, a verl console log, wandb's end-of-run block, "
                    "or a wandb CSV export.")
    parser.add_argument("path", nargs="?", help="what to diagnose (omit with --text or --catalogue)")
    parser.add_argument("--text", help='verl console lines pasted as text, e.g. "step:5 - actor/pg_loss:0.5 - ...", '
                                       "or wandb's end-of-run block")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of a report")
    parser.add_argument("--catalogue", action="store_true",
                        help="print the diagnosis rules as one Markdown table (id, signature, thresholds per family, "
                             "fix, the guide's section) and exit; --lang picks its language")
    parser.add_argument("--replay", action="store_true",
                        help="after the report, the playground scenario nearest to the log's root finding (task, "
                             "scenario, its knobs beside the log's), the command that trains it and its fix's")
    parser.add_argument("--lang", choices=("en", "zh"), default="en", help="language of the report")
    parser.add_argument("--family", choices=FAMILIES,
                        help="thresholds to use (default: from run.json, else the guide's llm values)")
    parser.add_argument("--loss-updates", type=float, default=None, metavar="N",
                        help="a verl >= 0.7 log: its actor/pg_loss and actor/kl_loss sum over N updates a step "
                             "(ppo_epochs x train_batch_size / ppo_mini_batch_size); default: losses are means")
    parser.add_argument("--max-response-length", type=int, default=None, metavar="N",
                        help="the run's data.max_response_length: response_length/max is checked against it (verl "
                             "V1's response_length/clip_ratio compares with the batch's longest response, #7817)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.catalogue:
        if args.path is not None or args.text is not None:
            parser.error("--catalogue takes no PATH or --text")
        print(catalogue_table.markdown(args.lang), end="")
        return 0
    if (args.path is None) == (args.text is None):
        parser.error("give a PATH or --text, not both")
    if args.loss_updates is not None and not args.loss_updates >= 1:
        parser.error(f"--loss-updates={args.loss_updates:g} is out of range: allowed >= 1")
    if args.text is not None:
        read = parse_verl_text(args.text, name="text")
        results = [("text", diagnose_read(read, family=args.family, loss_updates=args.loss_updates,
                                          max_response_length=args.max_response_length))]
        reads = [read]
    else:
        try:
            results = diagnose_path(args.path, family=args.family, loss_updates=args.loss_updates,
                                    max_response_length=args.max_response_length)
            reads = _reads(args.path, results) if args.replay else []
        except (FileNotFoundError, PermissionError, IsADirectoryError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    replays = [replay_read(read, report) if hasattr(read, "records") else replay(read, report)
               for read, (_, report) in zip(reads, results)] if args.replay else []
    if args.json:
        document = json_document(results)
        for item, found in zip(document["results"], replays):
            item["replay"] = found
        print(json.dumps(jsonable(document), ensure_ascii=False, indent=1, allow_nan=False)
              if replays else dumps(results))
    else:
        blocks = [format_diagnosis(source, report, args.lang) for source, report in results]
        for i, found in enumerate(replays):
            blocks[i] += "\n\n" + format_replay(found, args.lang)
        print("\n\n".join(blocks))
    readable = any(d.steps or d.findings for _, d in results)
    if not readable:
        print(f"error: no metrics could be read from {args.path or 'the text'}", file=sys.stderr)
    return 0 if readable else 2


def _reads(path: str, results: list) -> list:
    """What each result was diagnosed from, for the replay: a run's records, else the log's read."""
    if path_kind(Path(path)) in ("run", "runs"):
        return [read_metrics_jsonl(Path(source) / METRICS).records if (Path(source) / METRICS).is_file() else []
                for source, _ in results]
    return [read_any(Path(path))]


if __name__ == "__main__":
    sys.exit(main())
