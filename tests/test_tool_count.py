"""Tool-count accuracy: the record computes and renders itself; one shown tool is always chosen;
the prompt-prefix cache changes no choice."""

import random

import matplotlib
import pytest

from course.tools.tool_count import (
    ToolCountCurve,
    ToolCountPoint,
    choose_tool,
    draw_lists,
    measure_tool_count,
    tools_that_fit,
)

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def probe():
    from course.models import probe_model

    return probe_model()


@pytest.fixture(scope="module")
def catalogue():
    from course.tools.catalogue import build_catalogue

    return build_catalogue()


def test_curve_summary_text_plot_and_json(tmp_path):
    curve = ToolCountCurve("m", [ToolCountPoint(5, 0, 6, 10, 300), ToolCountPoint(5, 1, 8, 10, 320),
                                 ToolCountPoint(50, 0, 2, 10, 3000),
                                 ToolCountPoint("BM25 top-5", 0, 7, 10, 350)])
    assert curve.summary() == {5: (0.7, 0.6, 0.8), 50: (0.2, 0.2, 0.2), "BM25 top-5": (0.7, 0.7, 0.7)}
    text = str(curve)
    assert "5 tools shown: accuracy 0.70 (draws 0.60-0.80, 2 draw(s), 20 requests asked, prompt up to 320" in text
    assert "[measured]" in text
    assert curve.plot() is not None
    again = ToolCountCurve.from_json(curve.to_json(tmp_path / "c.json"), provenance="measured earlier")
    assert again.summary() == curve.summary() and again.provenance == "measured earlier"


def test_a_draw_asks_every_tool_once_in_a_random_list_that_holds_it(catalogue):
    places, sizes = set(), set()
    for draw in range(30):
        lists, home = draw_lists(catalogue, 10, random.Random(draw))
        assert len(lists) == 13 and all(len({t.name for t in chunk}) == 10 for chunk in lists)
        assert sorted(home) == sorted(t.name for t in catalogue)  # each tool has one home list
        for name, index in home.items():
            names = [t.name for t in lists[index]]
            places.add(names.index(name))
        sizes.add(sum(home[t.name] == 12 for t in lists[12]))
    assert places == set(range(10))  # the right tool stands at any place of its list
    assert sizes == {2}  # the last list: 2 tools of its own, 8 drawn from the others
    whole, home = draw_lists(catalogue, len(catalogue), random.Random(0))
    assert len(whole) == 1 and set(home.values()) == {0}


def test_a_size_beyond_the_context_window_is_cut_and_said(probe, catalogue):
    from course.tools.protocol import render_tool_prompt

    fit = tools_that_fit(probe, catalogue)
    window = probe.model.config.max_position_embeddings
    longest = sorted(catalogue, key=lambda t: -probe.count_tokens(str(t.openai_schema())))
    prompt = render_tool_prompt(probe, [{"role": "user", "content": "x"}],
                                [t.openai_schema() for t in longest[:fit]])
    assert probe.count_tokens(prompt) < window  # the longest tools that fit do fit
    if fit < len(catalogue):  # the bundled 135M model: 8192 tokens, 122 tools need ~9600
        everything = render_tool_prompt(probe, [{"role": "user", "content": "x"}],
                                         [t.openai_schema() for t in catalogue])
        assert probe.count_tokens(everything) > window


def test_prefix_cache_changes_no_choice(probe, catalogue):
    """The cached path picks exactly what the plain constrained decoder picks on the same prompt."""
    from course.tools.catalogue import LABELLED_REQUESTS
    from course.tools.constrained import PrefixCache
    from course.tools.protocol import render_tool_prompt

    shown = [t for t in catalogue if t.name in {e for _, e in LABELLED_REQUESTS[:3]}]
    shown += random.Random(7).sample([t for t in catalogue if t not in shown], 1)
    random.Random(8).shuffle(shown)
    cache = PrefixCache(probe)
    base = render_tool_prompt(probe, [{"role": "user", "content": ""}],
                              [t.openai_schema() for t in shown])
    kept = probe.tokenizer.encode(base, add_special_tokens=False)
    cache.keep(kept)
    # Two requests (each an uncached run of the whole prompt as the reference) show both
    # claims: the same choice, and the tool list read once.
    for request, _ in LABELLED_REQUESTS[:2]:
        assert choose_tool(probe, request, shown, cache) == choose_tool(probe, request, shown)
    # Read per request, the list would have been computed twice and reused never.
    assert cache.reused > cache.computed and cache.computed < 2 * len(kept)


def test_one_shown_tool_is_always_chosen_and_counts_add_up(probe, catalogue):
    from course.tools.catalogue import LABELLED_REQUESTS, ToolRetriever

    requests = LABELLED_REQUESTS[:2]
    curve = measure_tool_count(probe, catalogue, requests, sizes=(1, 3), draws=1,
                               retriever=ToolRetriever(catalogue))
    first, second, retrieval = curve.points
    assert (first.shown, first.correct, first.total) == (1, 2, 2)  # constrained: the only name
    assert second.total == 2 and 0 <= second.correct <= 2
    assert second.prompt_tokens > first.prompt_tokens
    assert retrieval.shown == "BM25 top-5" and retrieval.total == 2 and curve.note == ""
    live = measure_tool_count(probe, catalogue, LABELLED_REQUESTS, sizes=(1,), lists_per_draw=2)
    assert [(p.shown, p.correct, p.total) for p in live.points] == [(1, 2, 2)]


def test_a_following_cache_gives_the_same_greedy_turns(probe):
    """LocalToolCallingChat's cache: each turn starts from the last; the replies do not change."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from course.tools.examples import get_weather
    from course.tools.protocol_chat import LocalToolCallingChat

    turns = [[HumanMessage("What's the weather in Oslo?")],
             [HumanMessage("What's the weather in Oslo?"),
              AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"},
                                         "id": "c1", "type": "tool_call"}]),
              ToolMessage("Oslo: 3 °C, snow", tool_call_id="c1")]]
    chat = LocalToolCallingChat(local=probe, max_new_tokens=8, constrain_first_call=True)
    bound = chat.bind_tools([get_weather])
    bound.invoke(turns[0])
    # the first turn had nothing to start from: it is what a fresh chat computes, not compared
    assert chat._prefix.reused == 0
    second = bound.invoke(turns[1]).content
    assert chat._prefix.reused > 0  # the second turn started from the first one's cache
    fresh = (LocalToolCallingChat(local=probe, max_new_tokens=8, constrain_first_call=True)
             .bind_tools([get_weather]).invoke(turns[1]).content)
    assert second == fresh
