"""The course's LangChain chat model for a server: ``ChatOpenAI`` with the course's errors.

:class:`ServedChatOpenAI` is what :func:`course.models.chat_model` returns for a server setting.
It is ``ChatOpenAI`` with two changes: token counting uses a local tokenizer (ChatOpenAI would
download tiktoken's ``cl100k_base``), and every call (``invoke``, ``ainvoke``, ``stream``,
``astream``, and LangGraph's streaming of ``invoke``) fails as one
:class:`~course.models.served.ServerError`, also when the answer holds no reply.

What this module does not handle: the timeouts and retries themselves (the openai client's,
set by :func:`course.models.chat_model`), or a model loaded in the kernel (``ChatHuggingFace``).
Importing it imports ``langchain_openai``, so :mod:`course.models` imports it only when a server
chat model is built.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_openai import ChatOpenAI

from course.models.served import CallBudget, areplies, has_reply, replies, server_errors


def is_reply_chunk(chunk: Any) -> bool:
    """A LangChain stream chunk that comes from a reply: text, a tool call or a finish_reason
    (an empty reply still ends with one); an event with empty ``choices`` has none of them."""
    return bool(chunk.text or getattr(chunk.message, "tool_call_chunks", None)
                or (chunk.generation_info or {}).get("finish_reason"))


class ServedChatOpenAI(ChatOpenAI):
    """ChatOpenAI that counts tokens with a local tokenizer and fails as one ServerError."""

    token_counter_label: str = ""
    course_choice: Any  # the ModelChoice: failures are ServerErrors naming it
    course_budget: CallBudget = CallBudget()

    def get_num_tokens_from_messages(self, messages, tools=None, **_: Any) -> int:
        return BaseChatModel.get_num_tokens_from_messages(self, messages, tools)

    def _generate(self, *args: Any, **kwargs: Any):
        with server_errors(self.course_choice, self.course_budget):
            return has_reply(self.course_choice, super()._generate(*args, **kwargs))

    async def _agenerate(self, *args: Any, **kwargs: Any):
        with server_errors(self.course_choice, self.course_budget):
            return has_reply(self.course_choice, await super()._agenerate(*args, **kwargs))

    def _stream(self, *args: Any, **kwargs: Any):
        with server_errors(self.course_choice, self.course_budget):
            yield from replies(self.course_choice, super()._stream(*args, **kwargs),
                               is_reply_chunk)

    async def _astream(self, *args: Any, **kwargs: Any):
        with server_errors(self.course_choice, self.course_budget):
            async for chunk in areplies(self.course_choice, super()._astream(*args, **kwargs),
                                        is_reply_chunk):
                yield chunk
