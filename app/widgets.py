"""Shared widgets and formatting: the UI strings in English and Chinese, the sidebar, the run picker.

Every page reads the language, the shown runs and the chart settings from here, so one switch applies
app-wide. Metric text (meanings, bands, findings) is not here: it comes from `playground`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from playground.metrics import GROUPS

import data

LANGS = {"en": "English", "zh": "中文"}
SEVERITY_BADGE = {"info": "blue", "warning": "orange", "critical": "red"}
SEVERITY_ICON = {"info": "🔵", "warning": "🟠", "critical": "🔴"}
STATUS_ICON = {"running": "▶", "finished": "✓", "diverged": "✗", "oom": "✗", "failed": "✗", "interrupted": "■",
               "gone": "✗"}
LIVE_S = 2.0  # a running run's charts refresh this often
# Widgets whose option labels are translated. The browser keeps a choice as its label, so after a language
# switch these are set again (same value), which makes Streamlit send the new label.
TRANSLATED_KEYS = ("x_mode", "sort_by", "panel_choice", "external_choice", "color_by", "g_group", "workshop_exercise",
                   "workshop_diagnosis", "sweep_knob_1", "sweep_knob_2")
DEFAULT_SMOOTHING = 0.6  # TensorBoard's default

# Every UI string: key -> (English, Chinese). Metric text is not here (it comes from playground's glossary).
STRINGS: dict[str, tuple[str, str]] = {
    "nav_runs": ("Runs", "运行列表"), "nav_panels": ("Panels", "指标面板"), "nav_diagnosis": ("Diagnosis", "诊断"),
    "nav_sweeps": ("Sweeps", "参数扫描"), "nav_samples": ("Samples", "样本"),
    "nav_external": ("External log", "外部日志"), "nav_glossary": ("Glossary", "术语表"),
    "choose": ("Choose", "请选择"), "runs_shown": ("Runs shown", "显示的运行"),
    "runs_placeholder": ("Choose runs", "选择运行"),
    "smoothing": ("Smoothing", "平滑"),
    "smoothing_help": (
        "TensorBoard's EMA with zero-debias; 0 = raw values.",
        "TensorBoard 的去偏指数滑动平均；0 = 原始值。",
    ),
    "x_axis": ("X axis", "X 轴"), "x_step": ("step", "步数"), "x_wall": ("wall time (s)", "耗时（秒）"),
    "group_seeds": ("Group seeds", "合并种子"),
    "seed_group": ("{what} ×{n} seeds ({first}…)", "{what} ×{n} 个种子（{first}…）"),
    "group_seeds_help": (
        "Runs that differ only by seed: one mean line with a min–max band.",
        "仅种子不同的运行：画成一条均值线加最小–最大区间。",
    ),
    "roots": ("Runs folders", "运行目录"), "add_root": ("Add a folder", "添加目录"),
    "root_added": ("Added {path}", "已添加 {path}"),
    "err_outside": (
        "{path} is outside the folders this app may read (its runs folders and the working directory).",
        "{path} 不在本应用可读取的目录内（运行目录和当前工作目录）。",
    ),
    "err_missing": ("Nothing at {path}.", "{path} 不存在。"),
    "err_mystery": ("{path} belongs to a workshop mystery run: it stays undiagnosed until the exercise is solved.",
                    "{path} 属于工作坊谜题运行：在练习被解出之前不提供诊断。"), "status_running": ("running", "运行中"),
    "status_finished": ("finished", "已完成"), "status_diverged": ("diverged", "发散"),
    "status_oom": ("out of memory", "内存溢出"), "status_failed": ("failed", "失败"),
    "status_interrupted": ("interrupted", "已中断"), "status_unknown": ("unknown", "未知"),
    "status_gone": ("process gone", "进程已不在"),
    "root_not_yet": ("{path} (not created yet)", "{path}（尚未创建）"),
    "warn_root_empty": ("No runs in {path}.", "{path} 中没有运行。"),
    "warn_no_run_json": (
        "{path}: no readable run.json; status, task and seed are unknown.",
        "{path}：没有可读的 run.json；状态、任务和种子未知。",
    ),
    "warn_bad_findings": ("{path}: findings.json cannot be read.", "{path}：无法读取 findings.json。"),
    "warn_gone": (
        "{path} no longer exists (deleted?); it was removed from the runs shown.",
        "{path} 已不存在（被删除？），已从显示的运行中移除。",
    ),
    "warn_problems": ("{run}: some lines could not be read and were skipped.", "{run}：部分行无法读取，已跳过。"),
    "more_problems": ("\n- … and {n} more", "\n- ……另有 {n} 条"), "runs_title": ("Runs", "运行列表"),
    "roots_caption": ("Looking in: {roots}", "查找目录：{roots}"),
    "no_runs": (
        "No runs yet. Train one: `python -m playground.train task=cartpole`, or add a folder in the sidebar.",
        "还没有运行。先训练一个：`python -m playground.train task=cartpole`，或在侧边栏添加目录。",
    ),
    "selected_title": ("Shown ({n})", "已显示（{n}）"),
    "none_selected": (
        "No runs shown: choose some in the sidebar or on the Runs page.",
        "没有显示的运行：请在侧边栏或运行列表中选择。",
    ),
    "no_param_diff": ("These runs have the same overrides.", "这些运行的覆盖参数相同。"),
    "all_runs": ("All runs ({n})", "全部运行（{n}）"), "filter_status": ("Status", "状态"),
    "filter_task": ("Task", "任务"), "filter_finding": ("Finding", "诊断结果"), "filter_text": ("Search", "搜索"),
    "filter_text_hint": ("name, scenario, override…", "名称、场景、覆盖参数……"), "sort_by": ("Sort by", "排序"),
    "sort_start_time": ("start time", "开始时间"), "sort_name": ("name", "名称"), "sort_status": ("status", "状态"),
    "sort_task": ("task", "任务"), "sort_last_step": ("last step", "最新步数"), "sort_seed": ("seed", "种子"),
    "sort_worst": ("worst finding", "最严重的诊断"),
    "sort_metric": ("smoothed metric (last value)", "平滑后的指标（最新值）"),
    "sort_metric_note": (
        "Smoothing {weight:.2f}, from each run's last lines.",
        "平滑系数 {weight:.2f}，取自每个运行的最后几行。",
    ),
    "descending": ("Descending", "降序"), "show_these": ("Show these ({n})", "显示这些（{n}）"),
    "clear_shown": ("Clear", "清空"), "col_shown": ("shown", "显示"), "col_run": ("run", "运行"),
    "col_task": ("task", "任务"), "col_scenario": ("scenario", "场景"), "col_status": ("status", "状态"),
    "col_step": ("step", "步数"), "col_seed": ("seed", "种子"), "col_findings": ("findings", "诊断"),
    "mystery": ("mystery", "谜题"), "panels_title": ("Panels", "指标面板"),
    "recommended": ("Recommended (§11.3)", "推荐面板（§11.3）"), "group_other": ("Other", "其他"),
    "panel_choice": ("Panels", "面板"),
    "live_note": (
        "A shown run is running: its charts refresh every {s:g} s.",
        "有正在运行的训练：图表每 {s:g} 秒刷新。",
    ),
    "panel_progress": ("1 · Training progress", "1 · 训练进度"), "panel_policy": ("2 · Policy update", "2 · 策略更新"),
    "panel_critic": ("3 · Critic quality", "3 · Critic 质量"), "panel_perf": ("4 · Performance", "4 · 性能"),
    "panel_empty": ("None of these metrics was logged.", "日志中没有这些指标。"),
    "no_metrics": ("The shown runs have no metrics yet.", "显示的运行还没有指标。"),
    "diagnosis_failed": (
        "The diagnosis failed on this log ({why}): no findings or warn/bad marks.",
        "诊断在此日志上出错（{why}）：没有诊断结果和警告/异常标记。",
    ),
    "wall_fallback": (
        "Some runs log no per-step time: they are drawn by step.",
        "部分运行没有记录每步耗时：按步数绘制。",
    ),
    "bands_legend_title": ("How to read the charts", "如何阅读图表"),
    "bands_legend": (
        "Green band: the guide's normal range (glossary bands with status ok). Faint line: raw values; solid line: "
        "smoothed. Orange and red dots: steps the diagnosis engine judged warn and bad. Dashed red rule: a NaN or Inf "
        "value. Thick line with a shaded band: the mean and min–max of runs that differ only by seed. Drag to zoom "
        "along x; double-click to reset.",
        "绿色区域：指南给出的正常范围（术语表中状态为 ok 的区间）。浅色线：原始值；实线：平滑值。橙色和红色圆点："
        "诊断引擎判为警告和异常的步。红色虚线：NaN 或 Inf。粗线加阴影：仅种子不同的运行的均值与最小–最大区间。沿 x "
        "轴拖动可缩放，双击复原。",
    ),
    "diagnosis_title": ("Diagnosis", "诊断"), "pick_run": ("Run", "运行"),
    "diagnosis_live": ("Still running: these are the findings so far.", "仍在运行：以下是目前为止的诊断。"),
    "no_report": ("No findings for this run yet.", "该运行还没有诊断结果。"),
    "mystery_hidden": (
        "A workshop mystery run: its scenario and findings stay hidden until `python -m playground.exercise check` "
        "accepts your diagnosis. Read its metrics on the Panels and Workshop pages.",
        "工作坊谜题运行：在 `python -m playground.exercise check` 接受你的诊断之前，它的场景和诊断结果保持隐藏。"
        "请在「面板」和「工作坊」页面阅读它的指标。",
    ),
    "no_findings": ("No findings: nothing looks wrong.", "没有发现问题。"),
    "finding_steps": ("steps {first}–{last}", "第 {first}–{last} 步"),
    "root_cause": ("root cause", "根本原因"),
    "consequence_of": ("a consequence of {cause}", "由 {cause} 引起"),
    "ruled_out": ("Checked and ruled out (guide §11.2): {checks}", "已检查并排除（指南 §11.2）：{checks}"),
    "finding_details": ("why, evidence and fix", "原因、证据与修复"),
    "alternative_caption": ("Or try: {reference}", "也可以试试：{reference}"),
    "fix_caption": (
        "Rerun this config with the fix applied (later overrides win):",
        "应用修复后重新运行该配置（后面的覆盖参数优先）：",
    ),
    "rerun_caption": ("Rerun this run as it was:", "按原配置重新运行："), "sweeps_title": ("Sweeps", "参数扫描"),
    "no_sweeps": (
        "No multirun sweeps under the runs folders (`python -m playground.train -m ...` writes them to multirun/).",
        "运行目录下没有多次运行扫描（`python -m playground.train -m ...` 会写入 multirun/）。",
    ),
    "pick_sweep": ("Sweep", "扫描"), "sweep_caption": ("{n} jobs; swept: {params}", "{n} 个任务；扫描参数：{params}"),
    "show_sweep": ("Show all its runs", "显示其全部运行"),
    "no_swept": ("No parameter varies in this sweep.", "此扫描中没有变化的参数。"), "heat_x": ("X parameter", "X 参数"),
    "heat_y": ("Y parameter", "Y 参数"), "color_by": ("Colour by", "着色依据"), "by_score": ("final score", "最终得分"),
    "by_diagnosis": ("diagnosis", "诊断结果"), "stability_map": ("Stability map", "稳定性图"),
    "parallel": ("Parallel coordinates", "平行坐标"),
    "by_root": ("most common root cause", "最常见的根因"), "cells": ("Cells", "单元格"),
    "cells_mean": ("seeds averaged", "种子取平均"), "cells_seeds": ("each seed", "逐个种子"),
    "cells_caption": (
        "Each cell aggregates its seeds ({n} per cell): the mean ± standard deviation (n − 1) of the final score "
        "(± — with one seed), the share of seeds diagnosed healthy (no warning or critical finding), and the most "
        "common root cause (the root of each run's gravest diagnosis; ties go to the guide's §11.2 order, then "
        "alphabetically, and healthy loses a tie). The tooltip adds the min, max and every root with its count.",
        "每个单元格汇总其 {n} 个种子：最终得分的均值 ± 标准差（n − 1；只有一个种子时为 ± —）、诊断为健康"
        "（没有 warning 或 critical 级别的发现）的种子比例，以及最常见的根因（每个运行最严重诊断的根因；"
        "数量相同时按指南 §11.2 的顺序，再按字母顺序，健康排在问题之后）。"
        "提示框另列出最小值、最大值及每个根因的数量。"),
    "seeds_caption": ("Each cell split into its seeds ({seed}), one stripe each from the top: seed: final score · "
                      "root cause.",
                      "每个单元格按种子（{seed}）拆分，自上而下每条一个种子：种子：最终得分 · 根因。"),
    "healthy_share": ("{k}/{n} healthy", "{k}/{n} 健康"),
    "sweep_cell": ("Cell", "单元格"), "show_cell": ("Show its {n} runs", "显示其 {n} 个运行"),
    "samples_title": ("Samples", "样本"),
    "samples_token_note": (
        "The rollouts logged in samples.jsonl, beside the step they came from.",
        "samples.jsonl 中记录的生成结果，与其所在的步对应。",
    ),
    "samples_gym_note": (
        "Episode returns and lengths over time (mean with the min–max band).",
        "Episode 回报与长度随时间变化（均值与最小–最大区间）。",
    ),
    "no_samples": ("This run logged no samples.", "该运行没有记录样本。"), "samples_metric": ("Metric", "指标"),
    "samples_jumps": ("Largest jumps near steps {steps}", "变化最大的步附近：{steps}"), "samples_step": ("Step", "步"),
    "samples_at": ("Step {step}: {n} samples", "第 {step} 步：{n} 个样本"),
    "episode_returns": ("Episode returns", "Episode 回报"), "episode_lengths": ("Episode lengths", "Episode 长度"),
    "no_episodes": ("This run logged no episode metrics.", "该运行没有记录 episode 指标。"),
    "external_title": ("External log", "外部日志"),
    "external_caption": (
        "A verl console log (`step:N - key:value - ...`), a metrics.jsonl or a TensorBoard dir: the same panels and "
        "diagnosis as a run.",
        "verl 控制台日志（`step:N - key:value - ...`）、metrics.jsonl 或 TensorBoard 目录：与运行相同的面板和诊断。",
    ),
    "log_path": ("Path (under the runs folders or the working directory)", "路径（在运行目录或当前工作目录下）"),
    "log_upload": ("…or upload a log", "……或上传日志"), "log_paste": ("…or paste log lines", "……或粘贴日志行"),
    "no_records": ("No metrics found in this log.", "日志中没有找到指标。"),
    "log_read": (
        "Read {n} steps ({first}–{last}) from a {kind} log.",
        "读取了 {n} 步（{first}–{last}），格式：{kind}。",
    ),
    "glossary_title": ("Glossary", "术语表"), "g_notes": ("How to read this glossary", "如何阅读本术语表"),
    "g_group": ("Group", "分组"), "g_all": ("All groups", "全部分组"), "g_search": ("Search", "搜索"),
    "g_count": ("{n} of {total} metrics", "{total} 个指标中的 {n} 个"), "g_formula": ("verl's formula", "verl 公式"),
    "g_verl_note": ("In verl:", "verl 说明："), "g_range": ("Normal range:", "正常范围："),
    "g_bands": ("Bands", "取值区间"), "g_abs": ("judged on |value|", "按绝对值判断"), "g_status": ("status", "状态"),
    "g_from": ("from", "下限"), "g_to": ("to", "上限"), "g_label": ("meaning", "含义"), "g_trend": ("Trends", "趋势"),
    "g_pattern": ("trend", "趋势"), "g_meaning": ("meaning", "含义"), "g_cause": ("cause", "原因"),
    "g_action": ("action", "建议"), "g_example": ("Example", "示例"),
    "g_fix": ("Fix (Hydra overrides)", "修复（Hydra 覆盖参数）"), "g_section": ("Metrics guide", "指标指南"),
    "nav_workshop": ("Workshop", "工作坊"), "workshop_title": ("Workshop", "工作坊"),
    "workshop_pick": ("Exercise", "练习"),
    "no_exercises": ("No exercises found in exercises/.", "exercises/ 中没有练习。"),
    "workshop_hints": ("Hints", "提示"), "workshop_hint": ("Hint {k}/{n}: {text}", "提示 {k}/{n}：{text}"),
    "workshop_next_hint": ("Show a hint", "显示一条提示"),
    "workshop_no_hints": (
        "No hints left: talk it over with your neighbour or the instructor.",
        "提示已用完：和旁边的同学或讲师讨论一下。",
    ),
    "workshop_not_started": ("This exercise's run has not been started yet.", "这道练习的运行还没有开始。"),
    "workshop_start": ("Start the exercise's run", "开始练习的运行"),
    "workshop_start_terminal": ("…or in a terminal:", "……或在终端中运行："),
    "workshop_starting": ("Training the exercise's run…", "正在训练练习的运行……"),
    "workshop_restart": ("Train the run again", "重新训练这次运行"),
    "workshop_restart_help": (
        "`python -m playground.exercise start`: the run is trained afresh; your progress stays.",
        "`python -m playground.exercise start`：重新训练这次运行；你的进度保留。",
    ),
    "workshop_hidden": (
        "Its findings stay hidden until you name the failure.",
        "在你说出故障之前，它的诊断结果保持隐藏。",
    ),
    "workshop_answer": ("Your answer", "你的答案"),
    "workshop_diagnosis": ("Diagnosis (a catalogue id)", "诊断（故障目录中的 id）"),
    "workshop_diagnosis_hint": ("What went wrong?", "出了什么问题？"),
    "workshop_fix": ("Fix (overrides, once the diagnosis is right)", "修复（覆盖参数，诊断正确后填写）"),
    "workshop_fix_help": (
        "Hydra overrides, e.g. `critic.optim.lr=1e-3`; added after the exercise's own (later ones win). The check "
        "trains the fixed run and judges it.",
        "Hydra 覆盖参数，例如 `critic.optim.lr=1e-3`；追加在练习自身的覆盖参数之后（后者优先）。"
        "检查会训练修复后的运行并评判。",
    ),
    "workshop_check": ("Check", "检查"),
    "workshop_fixed": (
        "Solved: a fix of yours passed the check (its run is on the panels below).",
        "已完成：你的一个修复通过了检查（它的运行显示在下方面板中）。",
    ),
    "workshop_checking": ("Checking your fix: {state}", "正在检查你的修复：{state}"),
    "workshop_terminal": ("The same check in a terminal", "在终端中做同样的检查"),
    "workshop_fix_run": ("On the panels with your newest fix run ({name}).",
                         "面板上同时显示你最新的修复运行（{name}）。"),
    "workshop_solved": (
        "Diagnosed: its findings now show here and on every page.",
        "已诊断：这里和其他页面现在都会显示它的诊断结果。",
    ),
    "workshop_show_run": ("Show this run on every page", "在各个页面显示这次运行"),
    "workshop_outside": (
        "This run is outside the runs folders; add {path} in the sidebar to pick it on the other pages.",
        "这次运行不在运行目录中；在侧边栏添加 {path}，即可在其他页面选择它。",
    ),
    # the Lab, the queue and the processes the explorer starts
    "nav_lab": ("Lab", "实验台"), "lab_title": ("Lab", "实验台"),
    "lab_caption": (
        "Turn a knob, press Train, watch it break, apply the fix. Runs go to {folder}.",
        "调一个旋钮，点「训练」，看它出问题，再一键应用修复。运行写入 {folder}。",
    ),
    "lab_intro": (
        "Pick a task and a scenario (lr_too_high is a good first one), then press Train: the run's panels and "
        "diagnosis appear here as it trains.",
        "选择任务和场景（可以先试试 lr_too_high），然后点「训练」：训练过程中，运行的面板和诊断会显示在这里。",
    ),
    "lab_task": ("Task", "任务"), "lab_scenario": ("Scenario", "场景"),
    "lab_batch": ("Each step trains on {batch}.", "每一步训练 {batch}。"),
    "knob_actor_lr": ("Actor learning rate", "Actor 学习率"),
    "knob_lr_schedule": ("Actor LR schedule", "Actor 学习率调度"),
    "knob_critic_lr": ("Critic learning rate", "Critic 学习率"),
    "knob_entropy_coeff": ("Entropy coefficient", "熵系数"),
    "knob_clip_low": ("clip_ratio_low", "clip_ratio_low（下限）"),
    "knob_clip_high": ("clip_ratio_high", "clip_ratio_high（上限）"),
    "knob_ppo_epochs": ("PPO epochs", "PPO 轮数"), "knob_mini_batch": ("Mini-batch size", "Mini-batch 大小"),
    "knob_use_kl_loss": ("KL loss", "KL 损失"), "knob_kl_loss_coef": ("KL loss coefficient", "KL 损失系数"),
    "knob_rollout_n": ("Rollout n (samples per prompt)", "Rollout n（每个提示的样本数）"),
    "knob_temperature": ("Rollout temperature", "采样温度"),
    "knob_steps": ("Training steps", "训练步数"), "knob_seed": ("Seed", "随机种子"),
    "knob_default": ("task default {value}", "任务默认值 {value}"),
    "knob_fallback": ("null: uses {name}", "null：沿用 {name}"),
    "knob_no_critic": ("no critic trains in this config", "此配置不训练 critic"),
    "lab_extra": ("Also applied (from fixes): `{overrides}`", "另外已应用（来自修复）：`{overrides}`"),
    "lab_extra_clear": ("Drop them", "移除"),
    "train": ("Train", "训练"),
    "lab_command": ("The same run in a terminal:", "在终端中运行同样的训练："),
    "not_started": ("Not started: {why}", "未启动：{why}"),
    "queue_title": ("Training now and waiting", "正在训练与排队"),
    "queue_limit": (
        "{n} process(es) train at a time ({env}); the rest wait here.",
        "同时最多训练 {n} 个进程（{env}）；其余在此排队。",
    ),
    "queue_empty": ("Nothing is training.", "当前没有训练。"),
    "stop": ("Stop", "停止"), "cancel": ("Cancel", "取消"),
    "job_queued": ("waiting (#{n})", "排队中（第 {n} 位）"),
    "job_running": ("training (pid {pid})", "训练中（pid {pid}）"),
    "job_starting": ("starting the trainer…", "正在启动训练进程……"),
    "job_done": ("process ended (exit {rc})", "进程已结束（退出码 {rc}）"),
    "job_stopped": ("stopped", "已停止"), "job_cancelled": ("cancelled", "已取消"),
    "lab_waiting": ("Waiting for the first steps…", "等待最初几步……"),
    "apply_rerun": ("Apply and rerun", "应用并重新运行"),
    "before": ("Before", "修复前"), "after": ("After the fix", "修复后"),
    "finding_gone": ("{id}: gone in the rerun", "{id}：重新运行后已消失"),
    "finding_still": ("{id}: still there", "{id}：仍然存在"),
    "lab_no_warning": ("Nothing of severity warning or worse.", "没有警告或更严重的问题。"),
    "lab_info_findings": ("Also noted (info): {ids}", "另外记录（信息）：{ids}"),
    "lab_exact_command": ("Its exact command", "它的完整命令"),
    "sweep_new": ("New sweep", "新建扫描"), "sweep_knob": ("Knob {n}", "旋钮 {n}"),
    "sweep_values": ("Values (comma-separated)", "取值（用逗号分隔）"), "sweep_none": ("(none)", "（无）"),
    "sweep_seeds": ("Seeds (comma-separated)", "随机种子（用逗号分隔）"),
    "sweep_no_values": ("{key}: give at least one value", "{key}：至少给出一个取值"),
    "sweep_no_knob": ("Choose a knob to sweep.", "请选择要扫描的旋钮。"),
    "sweep_too_big": ("{n} runs is too many for one sweep here (at most {max}).",
                      "{n} 个运行太多（一次最多 {max} 个）。"),
    "sweep_jobs": ("{n} runs, trained as one batch of agents (hydra/launcher=batched).",
                   "{n} 个运行，作为一批智能体一起训练（hydra/launcher=batched）。"),
    "sweep_start": ("Sweep", "开始扫描"),
    "sweep_command": ("The same sweep in a terminal:", "在终端中运行同样的扫描："),
    "sweep_live": ("Its runs are training: the map fills in every {s:g} s.", "扫描仍在训练：图每 {s:g} 秒更新。"),
    "sweep_pending": ("Sweep {name}: {state}. Its runs appear here once they start.",
                      "扫描 {name}：{state}。运行开始后会显示在这里。"),
}


def lang() -> str:
    return st.session_state.get("lang", "en")


def t(key: str, **fields: object) -> str:
    """The UI string `key` in the current language (English when a translation is missing)."""
    en, zh = STRINGS.get(key, (key, key))
    text = zh if lang() == "zh" and zh else en
    return text.format(**fields) if fields else text


def pick(pair: object) -> str:
    """The current language's half of an {en, zh} pair from the glossary or a finding (a plain str as is)."""
    if isinstance(pair, dict):
        return str(pair.get(lang()) or pair.get("en") or "")
    return "" if pair is None else str(pair)


# The guide's group titles in Chinese (its §1-10 headings); English comes from playground.metrics.GROUPS.
GROUPS_ZH = {"actor": "Actor 指标（策略网络）", "critic": "Critic 指标（价值网络）", "reward": "奖励与优势指标",
             "length": "序列长度指标", "episode": "Episode 指标", "timing": "时间性能指标", "perf": "系统性能指标",
             "training": "训练控制指标", "world_model": "World Model 指标", "val": "验证指标"}


def group_names() -> dict[str, str]:
    """Metric group id -> its title in the current language, the guide's order."""
    return {g: GROUPS_ZH[g] if lang() == "zh" and g in GROUPS_ZH else title for g, title in GROUPS.items()}


def roots() -> tuple[str, ...]:
    """The configured roots plus any added in the sidebar this session."""
    found = [str(p) for p in data.configured_roots()]
    return tuple(dict.fromkeys([*found, *st.session_state.get("extra_roots", [])]))


def root_texts() -> list[str]:
    """The runs folders as text, one not created yet marked so (it is no warning: `multirun/` before a sweep)."""
    missing = set(data.missing_roots(roots()))
    return [t("root_not_yet", path=r) if r in missing else r for r in roots()]


def runs_table() -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    table, warnings = data.list_runs(roots())
    return table.assign(label=short_labels(table)), warnings


def short_labels(table: pd.DataFrame) -> list[str]:
    """Legend text: the run dir's time (and job number in a sweep), the full name where that is ambiguous."""
    labels = []
    for name in table["name"]:
        parts = Path(name).parts
        labels.append("/".join(parts[-2:]) if parts[-1].isdigit() else parts[-1])
    counts = pd.Series(labels).value_counts()
    return [label if counts[label] == 1 else name for label, name in zip(labels, table["name"], strict=True)]


def run_options(table: pd.DataFrame) -> dict[str, str]:
    """Run dir -> its text in a picker (label · task · scenario, the scenario hidden for a mystery run).

    Pickers take `format_func=options.get`: a dict built while the page runs, never a call into session state.
    """
    out = {}
    for run, label, task, scenario, mystery in zip(table["run"], table["label"], table["task"], table["scenario"],
                                                    table["mystery"], strict=True):
        bits = [label, task, "❔" if mystery else scenario]  # no translated text: the choice survives a switch
        out[run] = " · ".join(str(b) for b in bits if b)
    return out


def pick_run(table: pd.DataFrame, rows: pd.DataFrame, key: str) -> tuple[str, pd.Series]:
    """One run of the selected `rows`, picked in a select box: its run dir and its row of the runs table."""
    run = st.selectbox(t("pick_run"), list(rows["run"]), format_func=run_options(table).get, key=key)
    return run, rows[rows["run"] == run].iloc[0]


def selected_runs(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of the runs shown (chosen in the sidebar), in the order chosen."""
    chosen = st.session_state.get("runs", [])
    rows = table.set_index("run", drop=False)
    return rows.loc[[r for r in chosen if r in rows.index]].reset_index(drop=True)


def set_runs(runs: list[str]) -> None:
    """Replace the shown runs (for buttons' on_click callbacks, which run before the sidebar is drawn)."""
    st.session_state["runs"] = list(runs)


def _initial_runs(table: pd.DataFrame) -> list[str]:
    """Runs named in the URL (`?run=<name>`, only under the roots), else the newest run."""
    wanted = st.query_params.get_all("run")
    bases = [Path(r) for r in roots()]
    by_name = dict(zip(table["name"], table["run"], strict=True))
    chosen = []
    for item in wanted:
        run = by_name.get(item) or str(data.inside(item, bases) or "")
        if run in set(table["run"]):
            chosen.append(run)
    if not chosen and not table.empty:
        newest = table.sort_values("start_time", na_position="first").iloc[-1]
        chosen = [newest["run"]]
    return chosen


def _add_root() -> None:
    text = st.session_state.get("new_root", "").strip()
    if not text:
        return
    path = data.inside(text, data.allowed_bases())
    if path is None:
        st.session_state["root_message"] = ("err_outside", text)
    elif not path.is_dir():
        st.session_state["root_message"] = ("err_missing", text)
    else:
        st.session_state["extra_roots"] = [*st.session_state.get("extra_roots", []), str(path)]
        st.session_state["root_message"] = ("root_added", str(path))
    st.session_state["new_root"] = ""


def _relabel_on_language_change() -> None:
    current = lang()
    if st.session_state.get("lang_shown", current) != current:
        for key in TRANSLATED_KEYS:
            if key in st.session_state:
                st.session_state[key] = st.session_state[key]
    st.session_state["lang_shown"] = current


def sidebar() -> None:
    """Language, the shown runs, chart settings and the runs folders; shared by every page."""
    _relabel_on_language_change()
    with st.sidebar:
        st.radio("Language / 语言", list(LANGS), format_func=LANGS.get, key="lang", horizontal=True)
        table, _ = runs_table()
        options = list(table["run"])
        if "runs" not in st.session_state:
            st.session_state["runs"] = _initial_runs(table)
        gone = [r for r in st.session_state["runs"] if r not in options]
        if gone:
            st.session_state["runs"] = [r for r in st.session_state["runs"] if r in options]
            st.session_state["gone_runs"] = gone
        labels = run_options(table)  # a run deleted since the browser last sent its choice keeps its path as text
        st.multiselect(t("runs_shown"), options, key="runs", format_func=lambda run: labels.get(run, str(run)),
                       placeholder=t("runs_placeholder"))
        shown = set(st.session_state["runs"])
        st.query_params["run"] = [n for r, n in zip(table["run"], table["name"], strict=True) if r in shown]
        st.slider(t("smoothing"), 0.0, 0.99, DEFAULT_SMOOTHING, 0.01, key="smoothing", help=t("smoothing_help"))
        x_names = {v: t(f"x_{v}") for v in ("step", "wall")}
        st.radio(t("x_axis"), list(x_names), format_func=x_names.get, key="x_mode", horizontal=True)
        st.toggle(t("group_seeds"), value=True, key="group_seeds", help=t("group_seeds_help"))
        with st.expander(t("roots")):
            for root in root_texts():
                st.caption(root)
            st.text_input(t("add_root"), key="new_root", on_change=_add_root, placeholder="outputs/…")
            message = st.session_state.pop("root_message", None)
            if message:
                (st.success if message[0] == "root_added" else st.warning)(t(message[0], path=message[1]))


def page_with_selection(title_key: str) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """A page's title and the runs picked in the sidebar: (run table, selected rows), or None (and a note) if none."""
    st.title(t(title_key))
    show_gone_runs()
    table, _ = runs_table()
    rows = selected_runs(table)
    if rows.empty:
        st.info(t("none_selected"))
        return None
    return table, rows


def show_gone_runs() -> None:
    """Warn about shown runs whose dirs disappeared (deleted while shown)."""
    for run in st.session_state.pop("gone_runs", []):
        st.warning(t("warn_gone", path=run))


def show_warnings(warnings: list[tuple[str, str]]) -> None:
    for key, path in warnings:
        st.warning(t(key, path=path))


def show_problems(label: str, problems: list[str], limit: int = 5) -> None:
    """A log's unreadable lines, in one warning (the library words them)."""
    if problems:
        more = t("more_problems", n=len(problems) - limit) if len(problems) > limit else ""
        st.warning(t("warn_problems", run=label) + "\n\n" + "\n".join(f"- {p}" for p in problems[:limit]) + more)


def badge(finding: dict) -> str:
    """One finding as a Markdown badge (`:orange-badge[lr_too_high]`)."""
    return f":{SEVERITY_BADGE.get(finding.get('severity'), 'gray')}-badge[{finding.get('id', '?')}]"


def badges(chain: list[dict], hidden: bool = False) -> str:
    """Markdown badges for a run's findings in diagnosis order (`frames.chain`): each root cause, its consequences
    after an arrow (`lr_too_high → grad_clip_saturation kl_drift`), diagnoses apart."""
    if hidden:
        return f":gray-badge[{t('mystery')}]"
    parts: list[str] = []
    for item in chain:
        if item["role"] == "consequence":
            parts[-1] += (" → " if parts[-1].count("→") == 0 else " ") + badge(item["finding"])
        else:
            parts.append(badge(item["finding"]))
    return " · ".join(parts)


def finding_icons(chain: list[dict], hidden: bool = False) -> list[str]:
    """Plain-text badges for a table cell, in diagnosis order: `🟠 lr_too_high`, then `↳ 🟠 grad_clip_saturation`
    for each of its consequences."""
    if hidden:
        return ["❔"]
    return [("↳ " if item["role"] == "consequence" else "")
            + f"{SEVERITY_ICON.get(item['finding'].get('severity'), '⚪')} {item['finding'].get('id', '?')}"
            for item in chain]


def status_text(status: str) -> str:
    key = f"status_{status}"
    return f"{STATUS_ICON.get(status, '?')} {t(key) if key in STRINGS else status}"


def integer(value: object) -> str:
    """A step or seed as text: `60`, not `60.0`; "—" when unknown."""
    try:
        return str(int(value))
    except (TypeError, ValueError, OverflowError):
        return "—"


def settings() -> tuple[str, float, bool]:
    """(x_mode "step" | "wall", smoothing weight, group seeds) from the sidebar."""
    return (st.session_state.get("x_mode", "step"), float(st.session_state.get("smoothing", DEFAULT_SMOOTHING)),
            bool(st.session_state.get("group_seeds", True)))
