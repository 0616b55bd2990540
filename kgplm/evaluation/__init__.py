"""Evaluation: task readers (ChineseBLUE, CBLUE, BLURB formats), metrics and intrinsic similarity."""

from __future__ import annotations

from kgplm.evaluation.tasks import TASKS, TaskSplits, get_task, load_task, load_task_splits, task_names

__all__ = ["TASKS", "TaskSplits", "get_task", "load_task", "load_task_splits", "task_names"]
