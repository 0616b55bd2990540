"""Evaluation: task readers (ChineseBLUE, CBLUE, BLURB formats), metrics and intrinsic similarity."""

from __future__ import annotations

from kgplm.evaluation.tasks import TASKS, get_task, load_task, task_names

__all__ = ["TASKS", "get_task", "load_task", "task_names"]
