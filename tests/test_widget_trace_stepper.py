"""The trace stepper in pure Python: navigation changes the view; bad traces never draw."""

import json

import pytest

from course.agents.evaluation import Flag
from course.agents.traces import (
    RECORDINGS_DIR,
    Run,
    TraceError,
    TraceStep,
    prompt_tokens_figure,
    save_run,
)
from widgets.trace_stepper import TraceStepper

RECORDINGS = RECORDINGS_DIR


def three_steps() -> Run:
    return Run("find it", "m", [
        TraceStep(1, thought="look", code="print(web_search(query='a'))", observation="first page",
             figures="recorded", input_tokens=100, output_tokens=5, measured_input_tokens=90, measured_output_tokens=4),
        TraceStep(2, thought="again", code="print(web_search(query='b'))", observation="second page",
             figures="recorded", error="ValueError: boom", input_tokens=150, output_tokens=6, measured_input_tokens=140,
             measured_output_tokens=5),
        TraceStep(3, thought="done", code="final_answer('x')", observation="x", figures="recorded", input_tokens=210,
             output_tokens=7, is_final_answer=True, measured_input_tokens=190, measured_output_tokens=6),
    ], tools=["web_search"], final_answer="x", title="demo", source="reconstructed")


def test_stepping_forward_and_back_changes_what_is_shown():
    stepper = TraceStepper(three_steps(), flags=[Flag("some check", 2, "looks wrong"),
                                                 Flag("run check", None, "whole run")])
    assert stepper.step_number == 1 and "first page" in stepper.view.value
    assert stepper.previous_button.disabled and not stepper.next_button.disabled
    stepper.next()
    assert stepper.step_number == 2 and stepper.slider.value == 2
    html = stepper.view.value
    assert "second page" in html and "first page" not in html and "boom" in html
    assert "looks wrong" in html and "whole run" in html
    assert "input 150" in html and "cumulative input 250" in html and "cumulative 230" in html
    stepper.next()
    stepper.next()  # stays on the last step
    assert stepper.step_number == 3 and stepper.next_button.disabled
    assert "looks wrong" not in stepper.view.value and "whole run" in stepper.view.value
    stepper.previous()
    assert stepper.step_number == 2


def test_slider_range_is_the_number_of_steps_and_drives_the_view():
    stepper = TraceStepper(three_steps(), flags=[])
    assert (stepper.slider.min, stepper.slider.max) == (1, 3)
    stepper.slider.value = 3  # what dragging the slider does
    assert stepper.step_number == 3 and "final answer" in stepper.view.value
    stepper.next_button.click()
    assert stepper.step_number == 3
    stepper.previous_button.click()
    assert stepper.step_number == 2


def test_code_is_highlighted_and_text_view_matches():
    stepper = TraceStepper(three_steps(), flags=[])
    assert "<span style=" in stepper.view.value  # pygments inline colours
    text = stepper.step_text(2)
    assert text.startswith("step 2 of 3 [code: reconstructed; figures: recorded]")
    assert "error:\nValueError: boom" in text and "flags: none" in text


def test_flags_default_to_the_trajectory_checks():
    run = three_steps()
    run.task = "Generate a photo"
    run.tools = ["image_generator"]
    stepper = TraceStepper(run)
    assert any(f.check == "relevant tool never called" for f in stepper.flags)


def test_plot_and_widget():
    stepper = TraceStepper(three_steps(), flags=[])
    assert stepper.plot_png().startswith(b"\x89PNG")
    assert "<img src='data:image/png;base64," in stepper.plot_view.value
    bundle = stepper._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle and "step 1 of 3" in bundle["text/plain"]
    fig = prompt_tokens_figure([three_steps()])
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert labels == ["demo: recorded", "demo: measured, local tokenizer"]
    import ipywidgets as w

    assert isinstance(stepper, w.VBox) and stepper.children[0] is stepper.header


def test_works_on_a_recorded_file_and_a_saved_live_trace(tmp_path):
    stepper = TraceStepper(RECORDINGS / "weather_note.json")
    assert stepper.slider.max == 3
    live = TraceStepper(RECORDINGS / "live_smollm2_weather.json")
    assert live.run.source == "measured" and live.slider.max == len(live.run.steps)
    path = save_run(three_steps(), tmp_path / "t.json")
    assert TraceStepper(path, flags=[]).n_steps == 3


def test_bad_traces_raise_before_any_widget(tmp_path):
    truncated = tmp_path / "cut.json"
    truncated.write_text((RECORDINGS / "weather_note.json").read_text()[:500])
    with pytest.raises(TraceError, match=r"cut\.json: not OTLP JSON trace data"):
        TraceStepper(truncated)
    old_format = tmp_path / "old.json"  # the course's own trace JSON, before runs were spans
    old_format.write_text(json.dumps(three_steps().to_dict()))
    with pytest.raises(TraceError, match=r"old\.json: not OTLP JSON trace data"):
        TraceStepper(old_format)
    run = three_steps()
    run.steps[1].figures = "guessed"
    bad = save_run(run, tmp_path / "bad.json")
    with pytest.raises(TraceError, match=r"bad\.json: .*'course\.token_figures' is 'guessed'"):
        TraceStepper(bad)
    with pytest.raises(TraceError, match="'steps' is empty"):
        TraceStepper(Run("t", "m", []))
    with pytest.raises(TraceError, match=r"needs a run's spans"):
        TraceStepper({"task": "t"})


def test_steps_through_a_run_given_as_its_spans():
    from course.agents.traces import spans_from_run

    stepper = TraceStepper(spans_from_run(three_steps()), plot=False)
    assert stepper.n_steps == 3 and stepper.run.title == "demo"
    stepper.go(2)
    assert "error:\nValueError: boom" in stepper.step_text()
    assert stepper.step_text(3) == TraceStepper(three_steps(), plot=False).step_text(3)
