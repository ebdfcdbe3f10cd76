"""The one model setting: parsing, errors that name the setting, fast failure."""

import time

import pytest

from course.settings import CourseSettingError, parse_model_setting


@pytest.mark.parametrize("value", [None, "", "bundled", "local"])
def test_default_is_the_bundled_model(value):
    assert parse_model_setting(value).kind == "bundled"


def test_hub_id_server_and_path(tmp_path):
    assert parse_model_setting("Qwen/Qwen2-0.5B-Instruct").kind == "hub"
    server = parse_model_setting("http://localhost:8000/v1/#qwen3")
    assert (server.kind, server.value, server.served_model) == (
        "server", "http://localhost:8000/v1", "qwen3")
    (tmp_path / "config.json").write_text("{}")
    assert parse_model_setting(str(tmp_path)).kind == "path"


@pytest.mark.parametrize("value", ["not a model", "a/b/c", "/no/such/dir"])
def test_bad_setting_names_the_setting_and_the_fix(value):
    with pytest.raises(CourseSettingError) as err:
        parse_model_setting(value)
    assert "COURSE_MODEL" in str(err.value) and "Fix" in str(err.value)


# "Fast" here means no hub retries (those take minutes); the bounds are generous on purpose.
NO_RETRIES_S = 30


def test_unknown_hub_id_offline_fails_fast(monkeypatch):
    import transformers  # noqa: F401  - import time is not what is measured

    from course import models

    monkeypatch.setenv("COURSE_MODEL", "nobody/no-such-model-xyz")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    start = time.perf_counter()
    with pytest.raises(CourseSettingError, match="COURSE_MODEL='nobody/no-such-model-xyz'"):
        models.load_local_model()
    assert time.perf_counter() - start < NO_RETRIES_S


def test_unreachable_server_fails_fast(monkeypatch):
    import smolagents  # noqa: F401

    from course import models

    monkeypatch.setenv("COURSE_MODEL", "http://127.0.0.1:9/v1")
    start = time.perf_counter()
    with pytest.raises(CourseSettingError, match="did not answer"):
        models.smolagents_model()
    assert time.perf_counter() - start < NO_RETRIES_S


def test_server_setting_maps_to_the_openai_classes(monkeypatch):
    from langchain_openai import ChatOpenAI
    from smolagents import OpenAIServerModel

    from course import models

    monkeypatch.setenv("COURSE_MODEL", "http://127.0.0.1:9/v1#qwen3")
    assert isinstance(models.chat_model(), ChatOpenAI)
    agent_model = models.smolagents_model()
    assert isinstance(agent_model, OpenAIServerModel) and agent_model.model_id == "qwen3"
