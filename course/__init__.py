"""Helpers for the workbook on LLM tool use, code agents and conversation memory.

One module per concept taught (``models``, ``assets``, ``traces``, ``tools``, ``agents``,
``loop``, ``memory``, ``trimming``, ``evaluation``, ``checks``). Importing the package makes
offline the default (``HF_HUB_OFFLINE=1`` unless a Hugging Face model is chosen), before any
Hugging Face library is imported.
"""

from course.settings import apply_offline_default

apply_offline_default()

from course.settings import (  # noqa: E402
    CourseSettingError,
    ModelChoice,
    active_model,
    use_model,
)
from course.setup import setup_notebook  # noqa: E402

__all__ = ["CourseSettingError", "ModelChoice", "active_model", "setup_notebook", "use_model"]
