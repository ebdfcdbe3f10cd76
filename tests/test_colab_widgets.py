"""Displaying the widgets gives the same bundle on ipywidgets 7 (Colab's 7.7.1) and 8.x.

ipywidgets 8 is displayed through ``_repr_mimebundle_``, ipywidgets 7 through
``_ipython_display_``; :class:`widgets.Displayed` makes both publish the widget view and the
widget's own ``text/plain``. The test displays each widget in an IPython shell and reads what
was published, whichever ipywidgets this environment has (the suite's venv has 8; the Colab
mirror's venv has 7.7.1).
"""

from __future__ import annotations

import ipywidgets
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import display
from IPython.utils.capture import capture_output

from course.agents.traces import RECORDINGS_DIR
from widgets import IPYWIDGETS_MAJOR, VIEW_MIMETYPE, Displayed
from widgets.trace_stepper import TraceStepper


@pytest.fixture
def shell():
    """An IPython shell, so that ``display()`` publishes rich output as in a kernel."""
    created = not InteractiveShell.initialized()
    yield InteractiveShell.instance()
    if created:
        InteractiveShell.clear_instance()


def published(widget) -> dict:
    with capture_output() as captured:
        display(widget)
    assert len(captured.outputs) == 1, captured.outputs
    return captured.outputs[0].data


def test_the_installed_ipywidgets_is_one_the_widgets_support():
    assert IPYWIDGETS_MAJOR in (7, 8), ipywidgets.__version__


def test_the_trace_stepper_publishes_its_view_and_its_step_as_text(shell):
    stepper = TraceStepper(RECORDINGS_DIR / "weather_note.json", plot=False)
    data = published(stepper)
    assert data[VIEW_MIMETYPE]["model_id"] == stepper.model_id
    assert data["text/plain"] == stepper.step_text() == stepper._repr_mimebundle_()["text/plain"]
    assert data["text/plain"].startswith("step 1 of 3")


def test_a_plain_widget_publishes_the_view_and_its_repr_cut_as_ipywidgets_cuts_it(shell):
    class Panel(Displayed, ipywidgets.VBox):
        pass

    panel = Panel([ipywidgets.HTML("x" * 300)])
    data = published(panel)
    assert data[VIEW_MIMETYPE] == {"version_major": 2, "version_minor": 0,
                                   "model_id": panel.model_id}
    assert data["text/plain"].startswith("Panel(") and len(data["text/plain"]) <= 111
    assert data == panel._repr_mimebundle_()


def test_the_workbook_widgets_all_display_through_the_mixin():
    from widgets.approval_panel import ApprovalPanel
    from widgets.budget_explorer import BudgetExplorer
    from widgets.trim_explorer import TrimExplorer

    for cls in (ApprovalPanel, BudgetExplorer, TraceStepper, TrimExplorer):
        assert issubclass(cls, Displayed) and issubclass(cls, ipywidgets.VBox)
        assert cls.__mro__.index(Displayed) < cls.__mro__.index(ipywidgets.VBox)
