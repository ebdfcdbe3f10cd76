"""The model hub: which model a notebook gets, and that model built for each library.

One setting, ``COURSE_MODEL`` (see :mod:`course.settings`), names the agent model: the bundled
SmolLM2-135M, a local folder, a Hugging Face id, or an OpenAI-compatible server. Read the
modules in this order:

- :mod:`~course.models.placement`: where a model loaded in the kernel goes (device, dtype) and
  whether its weights fit there, judged from its config before any weight is read.
- :mod:`~course.models.local`: the model loaded in the kernel, once (:class:`LocalModel`), its
  tokenizer, and the file to blame when a folder cannot load; a fresh copy of the bundled model
  and base + a named LoRA adapter (:func:`load_with_adapter`).
- :mod:`~course.models.served`: a server: what it lists, the bound on every call
  (``COURSE_SERVER_TIMEOUT``), and its failures as one :class:`ServerError`.
- :mod:`~course.models.roles`: the agent model and the probe model (the one cells read
  internals from), which tokenizer counts, and :func:`describe_models`.
- :mod:`~course.models.libraries`: the agent model for LangChain (:func:`chat_model`),
  smolagents (:func:`smolagents_model`) and transformers (:func:`text_generation_pipeline`),
  with the course's classes in :mod:`~course.models.for_langchain` and
  :mod:`~course.models.for_smolagents`.

Everything loaded in the kernel shares one copy of the weights. What this package does not do:
start a server, download a model unasked, or pick generation settings for a lesson.
"""

from course.models.libraries import (
    AGENT_MAX_NEW_TOKENS,
    CHAT_MAX_NEW_TOKENS,
    chat_model,
    probe_chat_model,
    smolagents_model,
    text_generation_pipeline,
)
from course.models.local import (
    PREPARE_COMMAND,
    LocalModel,
    converted_copy_cannot_load,
    fresh_base,
    load_failure,
    load_local_model,
    load_model_on,
    load_with_adapter,
    local_folder_fix,
    model_folder_problem,
    short_name,
    tokenizer_at,
    transformers_source,
)
from course.models.placement import (
    BYTES_PER_DTYPE,
    MAX_REPEATED_MODULES,
    MEMORY_HEADROOM,
    GpuInfo,
    Placement,
    check_fits,
    cuda_dtype,
    estimate_weight_bytes,
    gpu_info,
    placement,
)
from course.models.roles import (
    SMALL_MODEL_PARAMETERS,
    ModelsReport,
    agent_is_local,
    agent_is_small,
    agent_tokenizer,
    describe_models,
    notes_tokenizer,
    probe_model,
    probe_note,
)
from course.models.served import (
    MAX_REQUEST_TIMEOUT_S,
    REQUEST_RETRIES,
    REQUEST_TIMEOUT_S,
    REQUEST_TIMEOUT_SETTING,
    SERVER_TIMEOUT_S,
    CallBudget,
    ServerError,
    request_timeout,
    served_model_name,
    server_error,
    server_models,
)

__all__ = [
    "AGENT_MAX_NEW_TOKENS", "BYTES_PER_DTYPE", "CHAT_MAX_NEW_TOKENS", "MAX_REPEATED_MODULES",
    "MAX_REQUEST_TIMEOUT_S", "MEMORY_HEADROOM", "PREPARE_COMMAND", "REQUEST_RETRIES",
    "REQUEST_TIMEOUT_S", "REQUEST_TIMEOUT_SETTING", "SERVER_TIMEOUT_S", "SMALL_MODEL_PARAMETERS",
    "CallBudget", "GpuInfo", "LocalModel", "ModelsReport", "Placement", "ServerError",
    "agent_is_local", "agent_is_small", "agent_tokenizer", "chat_model",
    "check_fits",
    "converted_copy_cannot_load", "cuda_dtype", "describe_models", "estimate_weight_bytes",
    "fresh_base", "gpu_info", "load_failure", "load_local_model", "load_model_on",
    "load_with_adapter", "local_folder_fix",
    "model_folder_problem", "notes_tokenizer", "placement", "probe_chat_model", "probe_model",
    "probe_note", "request_timeout", "served_model_name", "server_error", "server_models",
    "short_name", "smolagents_model", "text_generation_pipeline", "tokenizer_at",
    "transformers_source",
]
