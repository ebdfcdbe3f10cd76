"""The protocol helpers (parse, prompt, loop) and the constrained-decoding logits processor."""

from typing import Literal

import pytest

from course.tools.protocol import (
    parse_model_output,
    template_renders_tools,
    tool_prompt_messages,
    validity,
)
from course.tools.registry import ToolRegistry


def get_weather(city: str, units: Literal["metric", "imperial"] = "metric") -> str:
    """Get the current weather for a city.

    Args:
        city: City name.
        units: Unit system.
    """
    return f"{city}: 14 degrees"


def add_items(order_id: str, count: int) -> str:
    """Add items to an order.

    Args:
        order_id: Order id.
        count: How many items.
    """
    return f"{count} added to {order_id}"


@pytest.fixture
def registry():
    reg = ToolRegistry()
    reg.register(get_weather)
    reg.register(add_items)
    return reg


@pytest.mark.parametrize("text, kind, name, arguments", [
    ('<tool_call>{"name": "get_weather", "arguments": {"city": "Berlin"}}</tool_call>',
     "call", "get_weather", {"city": "Berlin"}),
    ('{"name": "get_weather", "arguments": "{\\"city\\": \\"Rome\\"}"}', "call", "get_weather",
     {"city": "Rome"}),
    ('<tool_call>[{"name": "f", "parameters": {"a": 1}}]</tool_call> trailing', "call", "f",
     {"a": 1}),
    ("The weather in Berlin is sunny.", "text", "", {}),
    ('<tool_call>{"name": "get_weather", "arguments": {...}}</tool_call>', "malformed", "", {}),
    ('<tool_call>{"arguments": {}}</tool_call>', "malformed", "", {}),
    ('{"name": "f", "arguments": [1, 2]}', "malformed", "f", {}),
    ("<tool_call>", "malformed", "", {}),
])
def test_parse_model_output(text, kind, name, arguments):
    parsed = parse_model_output(text)
    assert parsed.kind == kind and parsed.name == name and parsed.arguments == arguments
    if kind == "malformed":
        assert parsed.error


def test_strict_parsing_needs_the_call_first():
    text = 'Sure! <tool_call>{"name": "f", "arguments": {}}</tool_call>'
    assert parse_model_output(text).kind == "call"
    assert parse_model_output(text, strict=True).kind == "text"
    assert parse_model_output(' {"name": "f", "arguments": {}}', strict=True).kind == "call"


def test_mcp_server_round_trip():
    import asyncio

    from course.tools.mcp_server import connect, langchain_tools

    async def scenario():
        async with connect() as session:
            names = [t.name for t in (await session.list_tools()).tools]
            tools = {t.name: t for t in await langchain_tools(session)}
            found = await tools["find_customers"].ainvoke({"query": "acme", "limit": 9})
            refund = await tools["request_refund"].ainvoke(
                {"order_id": "O-9", "amount": 5, "reason": "late"})
            report = await tools["sales_report"].ainvoke(
                {"category": "juice", "start_date": "2024-01-01", "end_date": "2024-01-31"})
            return names, found, refund, report

    names, found, refund, report = asyncio.run(scenario())
    assert names == ["sales_report", "find_customers", "order_status", "request_refund"]
    assert "Acme Coffee Bar" in found and "Acme Catering" in found
    assert refund == "Refund refused: order 'O-9' does not exist."
    assert "sales_report refused" in report and "juice" in report


def test_validity_classifies_without_executing(registry):
    assert validity(parse_model_output(
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'),
        registry) == "valid"
    assert validity(parse_model_output(
        '<tool_call>{"name": "get_weather", "arguments": {"town": "Oslo"}}</tool_call>'),
        registry) == "invalid: invalid_arguments"
    assert validity(parse_model_output('{"name": "nope", "arguments": {}}'),
                    registry) == "invalid: unknown_tool"
    assert validity(parse_model_output("hello"), registry) == "text"


class _PlainTokenizer:
    chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"


def test_tool_prompt_puts_tools_in_system_message(registry):
    assert not template_renders_tools(_PlainTokenizer())
    messages = tool_prompt_messages([{"role": "system", "content": "Be brief."},
                                     {"role": "user", "content": "hi"}],
                                    registry.schemas(), _PlainTokenizer())
    assert messages[0]["role"] == "system" and '"name": "get_weather"' in messages[0]["content"]
    assert messages[0]["content"].endswith("Be brief.") and len(messages) == 2


# --- constrained decoding: the processor with the real tokenizer and random scores ---------

@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from course.assets import bundled_model_dir

    return AutoTokenizer.from_pretrained(str(bundled_model_dir()))


def _decode_with_random_scores(tokenizer, schemas, seed, steps=60):
    import torch

    from course.tools.constrained import ToolCallLogitsProcessor

    processor = ToolCallLogitsProcessor(tokenizer, schemas)
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.tensor([[1, 2, 3]])
    for _ in range(steps):
        scores = torch.randn(1, len(tokenizer), generator=generator)
        masked = processor(input_ids, scores)
        token = int(masked.argmax())
        input_ids = torch.cat([input_ids, torch.tensor([[token]])], dim=1)
        if token == tokenizer.eos_token_id:
            break
    return tokenizer.decode(input_ids[0, 3:], skip_special_tokens=True), processor


@pytest.mark.parametrize("seed", range(12))
def test_any_scores_give_a_valid_call(tokenizer, registry, seed):
    text, _ = _decode_with_random_scores(tokenizer, registry.schemas(), seed)
    parsed = parse_model_output(text)
    assert parsed.kind == "call", text
    assert validity(parsed, registry) == "valid", text
    assert text.endswith("</tool_call>")


def test_forced_prefix_and_completion(tokenizer, registry):
    from course.tools.constrained import ToolCallLogitsProcessor

    one_tool = registry.schemas(["get_weather"])
    forced = ToolCallLogitsProcessor(tokenizer, one_tool).forced_prefix()
    assert tokenizer.decode(forced) == '<tool_call>{"name": "get_weather", "arguments": {"city": "'
    two_tools = ToolCallLogitsProcessor(tokenizer, registry.schemas()).forced_prefix()
    assert tokenizer.decode(two_tools) == '<tool_call>{"name": "'


def test_processor_rejects_unsupported_schemas(tokenizer):
    from course.tools.constrained import ToolCallLogitsProcessor

    with pytest.raises(ValueError, match="at least one"):
        ToolCallLogitsProcessor(tokenizer, [])
    nested = {"name": "f", "parameters": {"properties": {"x": {"type": "array"}}}}
    with pytest.raises(ValueError, match="'x' has type 'array'"):
        ToolCallLogitsProcessor(tokenizer, [nested])


def test_truncated_generation_stays_truncated(tokenizer, registry):
    _, processor = _decode_with_random_scores(tokenizer, registry.schemas(["get_weather"]),
                                              seed=0, steps=3)
    assert not processor.decided()[0]
    completed = tokenizer.decode(processor.completed_ids(0))
    assert parse_model_output(completed).kind == "malformed"
