"""A LangChain chat model that turns the local model's TEXT into native ``tool_calls``.

``ChatHuggingFace`` over SmolLM2-135M does not produce ``tool_calls`` (the model's chat template
has no tool support, and the model rarely writes a parseable call on its own), so LangGraph's
``bind_tools`` + ``ToolNode`` would never see a call. :class:`LocalToolCallingChat` is the
bridge: it renders the conversation with the tool list (:mod:`course.tools.protocol`), generates with
the local model, and parses the text into an ``AIMessage`` with ``tool_calls``.

With ``constrain_first_call=True`` the turn right after a human message is generated with
:class:`course.tools.constrained.ToolCallLogitsProcessor` (a call is then guaranteed to be well
formed); turns after a tool result are generated freely. That is a choice the runtime makes,
and the notebook says so where it uses it. Each turn starts from the key/value cache of the
previous one where the tokens agree (:class:`course.tools.constrained.PrefixCache`), so the tool
list and the conversation so far are not read again.

Not handled: parallel calls, streaming, ``tool_choice``; only the first call of a reply counts.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

from course.tools.calls import ToolCall
from course.tools.constrained import PrefixCache, constrained_call
from course.tools.protocol import CHAT_ROLES, call_text, parse_model_output, render_tool_prompt

__all__ = ["LocalToolCallingChat"]


def to_chat_dicts(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """LangChain messages as plain chat dicts; an AI tool call becomes its text form again."""
    out = []
    for m in messages:
        content = m.content if isinstance(m.content, str) else json.dumps(m.content)
        if isinstance(m, AIMessage) and m.tool_calls:
            content = call_text(ToolCall.from_langchain(m.tool_calls[0]))
        out.append({"role": CHAT_ROLES.get(m.type, "user"), "content": content})
    return out


class LocalToolCallingChat(BaseChatModel):
    """The local transformers model as a tool-calling chat model (text parsed into calls)."""

    local: Any
    max_new_tokens: int = 32
    constrain_first_call: bool = False
    _prefix: Any = PrivateAttr(default=None)  # the last prompt's cache: the next turn extends it

    @property
    def _llm_type(self) -> str:
        return "local-text-tool-calling"

    def bind_tools(self, tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
                   **kwargs: Any) -> Any:
        """Bind tools: their OpenAI schemas go into every prompt."""
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, tools: list[dict] | None = None,
                  **kwargs: Any) -> ChatResult:
        tools = tools or []
        chat = to_chat_dicts(messages)
        prompt = render_tool_prompt(self.local, chat, tools)
        after_human = bool(messages) and messages[-1].type == "human"
        if self._prefix is None:
            self._prefix = PrefixCache(self.local, follow=True)
        if tools and self.constrain_first_call and after_human:
            text = constrained_call(self.local, prompt, tools, prefix_cache=self._prefix)
        else:
            import torch

            ids = self.local.tokenizer.encode(prompt, add_special_tokens=False)
            cache = self._prefix.start(ids)
            batch = torch.tensor([ids], device=self.local.model.device)
            with torch.no_grad():
                out = self.local.model.generate(
                    input_ids=batch, attention_mask=torch.ones_like(batch), past_key_values=cache,
                    max_new_tokens=self.max_new_tokens, do_sample=False,
                    pad_token_id=self.local.tokenizer.eos_token_id)
            text = self.local.tokenizer.decode(out[0, len(ids):], skip_special_tokens=True).strip()
        parsed = parse_model_output(text)
        if parsed.call is not None:
            message = AIMessage(content=text, tool_calls=[
                parsed.call.for_langchain(f"call_{uuid.uuid4().hex[:8]}")])
        else:
            message = AIMessage(content=text)
        return ChatResult(generations=[ChatGeneration(message=message)])

