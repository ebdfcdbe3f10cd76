"""Helpers for the workbook on LLM tool use, code agents and conversation memory.

The map. Top-level modules are the workbook's machinery; each sub-package is one chapter's
lesson code, and a chapter imports only its own package and earlier ones.

======================  =============================================  =========================
notebook                lesson code                                    widget
======================  =============================================  =========================
00_start_here           (machinery only: settings, models, doctor)     -
01_tool_calling         course.tools                                   -
02_code_agent_runs      course.agents                                  widgets.trace_stepper
03_agent_loop           course.loop                                    widgets.budget_explorer
04_memory               course.memory, course.checkpoints              -
05_trimming             course.trimming                                widgets.trim_explorer
06_guarded_agents       course.guards                                  widgets.approval_panel
A1_tool_benchmarks      course.tools (bfcl, tool_count)                -
A2_checkpoint_files     course.memory (store, prefix_cache)            -
A3_sandbox_escapes      course.guards (sandbox)                        -
A4_teach_a_small_model  course.finetune (tools adapter: LoRA, PEFT)    -
A5_traces_as_spans      course.agents (spans: OpenTelemetry, OTLP)     -
======================  =============================================  =========================

Machinery: :mod:`course.settings` (``COURSE_MODEL``), :mod:`course.models` (the model for each
library), :mod:`course.assets` (offline model and tokenizers), :mod:`course.doctor` (the machine
check), :mod:`course.setup` (``setup_notebook``), :mod:`course.checks` (exercise feedback),
:mod:`course.checkpoints` (threads and the SQLite checkpointer), :mod:`course.drawing` (figures
and LangGraph graphs drawn offline), :mod:`course.records` (a displayed record's values for
tests), :mod:`course.quiz` (every chapter's quiz; its widget is ``widgets.quiz``),
:mod:`course.memory_release` (a kernel gives back what a model's work freed),
:mod:`course.phoenix` (Phoenix, a trace UI, in its own venv: ``python -m course phoenix``) and
:mod:`course.cli` (what the command lines share: bad options refused by name, committed results
never overwritten by default).

What runs the class rather than a lesson (grading, the student's copy of the notebooks, the
lab's kernels, the class on JupyterHub) is the sibling package ``classroom``, which imports from
this one; nothing here imports it.

Chapter packages export nothing of their own: a name is imported from the module that defines
it (``from course.tools.registry import ToolRegistry``), so a reader finds each definition where
the import says, and a new import never needs a second list kept in step.

Importing the package makes offline the default (``HF_HUB_OFFLINE=1`` unless a Hugging Face
model is chosen), before any Hugging Face library is imported.
"""

import sys

# jsonschema (tool-call validation, nbformat) imports ``rfc3987_syntax`` when it is installed
# (jupyter-events pulls it in), and that module compiles an RFC 3987 grammar at import: 2.4-4 s
# of CPU in every kernel and process that validates anything. No schema of the course uses the
# "iri" formats it checks, so a process that imports the course goes without it (jsonschema
# then simply does not check those two formats).
# A None entry makes the import fail (the import system documents it; typeshed allows modules only).
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

from course.settings import apply_offline_default  # noqa: E402 - after the line above

apply_offline_default()

from course.settings import (  # noqa: E402
    CourseSettingError,
    ModelChoice,
    active_model,
    use_model,
)
from course.setup import setup_notebook  # noqa: E402

__all__ = ["CourseSettingError", "ModelChoice", "active_model", "setup_notebook", "use_model"]
