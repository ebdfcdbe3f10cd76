"""Tool-count accuracy: the record computes and renders itself; one shown tool is always chosen."""

import matplotlib

from course.tools.tool_count import ToolCountCurve, ToolCountPoint, measure_tool_count

matplotlib.use("Agg")


def test_curve_summary_text_plot_and_json(tmp_path):
    curve = ToolCountCurve("m", [ToolCountPoint(5, 0, 6, 10, 300), ToolCountPoint(5, 1, 8, 10, 320),
                                 ToolCountPoint(50, 0, 2, 10, 3000),
                                 ToolCountPoint("BM25 top-5", 0, 7, 10, 350)])
    assert curve.summary() == {5: (0.7, 0.6, 0.8), 50: (0.2, 0.2, 0.2), "BM25 top-5": (0.7, 0.7, 0.7)}
    text = str(curve)
    assert "5 tools shown: accuracy 0.70 (draws 0.60-0.80, 2 draw(s) x 10 requests, prompt up to 320" in text
    assert "[measured]" in text
    assert curve.plot() is not None
    again = ToolCountCurve.from_json(curve.to_json(tmp_path / "c.json"), provenance="measured earlier")
    assert again.summary() == curve.summary() and again.provenance == "measured earlier"


def test_one_shown_tool_is_always_chosen_and_counts_add_up():
    from course.models import probe_model
    from course.tools.catalogue import LABELLED_REQUESTS, ToolRetriever, build_catalogue

    catalogue = build_catalogue()
    requests = LABELLED_REQUESTS[:4]
    curve = measure_tool_count(probe_model(), catalogue, requests, sizes=(1, 3), draws=1,
                               retriever=ToolRetriever(catalogue))
    first, second, retrieval = curve.points
    assert (first.shown, first.correct, first.total) == (1, 4, 4)  # constrained: the only name
    assert 0 <= second.correct <= 4 and second.prompt_tokens > first.prompt_tokens
    assert retrieval.shown == "BM25 top-5" and 0 <= retrieval.correct <= 4
