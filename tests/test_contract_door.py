"""Contract cases of the tool door (course/tools/): what the gateway adds never waits without a
bound (a blocking confirm callback, a blocking policy rule), nor does a tool that declared a
timeout; a tool name with a letter from another alphabet, or equal to a registered one but for
case, is refused; and a bad configuration file or subject is a clear error naming the file or
argument and the fix. Table tests; every blocking case is bounded to a fraction of a second, so
the file ends in seconds."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping

import pytest

from course.tools import gateway as gateway_module
from course.tools.gateway import CONFIRM_TIMEOUT, POLICY_TIMEOUT, Policy, ToolGateway
from course.tools.registry import ToolRegistry

RELEASE = threading.Event()  # set at the end, so the blocked worker threads finish


@pytest.fixture(autouse=True, scope="module")
def _release_blocked_threads():
    yield
    RELEASE.set()


def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city
    """
    return f"sunny in {city}"


def transfer(amount: int) -> str:
    """Move money.

    Args:
        amount: how much
    """
    return f"moved {amount}"


def blocks(city: str) -> str:
    """A tool that never answers on its own.

    Args:
        city: the city
    """
    RELEASE.wait(60)
    return "late"


def _registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.register(get_weather)
    reg.register(transfer, risk="critical")
    return reg


# ------------------------------------------------------------------ (1) nothing waits unbounded


def _blocking_confirm(bound):
    gw = ToolGateway(_registry(), {"agent": {"read", "critical"}},
                     confirm=lambda request: RELEASE.wait(60), confirm_timeout=bound)
    return gw, ("transfer", {"amount": 5}), "confirmation_denied", "CONFIRM_TIMEOUT"


def _blocking_policy(bound):
    gw = ToolGateway(_registry(), {"agent": {"read"}}, policy_timeout=bound,
                     policies=[Policy("slow", lambda tool, args: RELEASE.wait(60) and None)])
    return gw, ("get_weather", {"city": "Oslo"}), "vetoed", "POLICY_TIMEOUT"


def _tool_with_a_timeout(bound):
    reg = ToolRegistry()
    reg.register(blocks, timeout=bound)
    gw = ToolGateway(reg, {"agent": {"read"}})
    return gw, ("blocks", {"city": "Oslo"}), "timeout", "UNKNOWN"


BLOCKING = {"confirm callback": _blocking_confirm, "policy rule": _blocking_policy,
            "tool registered with a timeout": _tool_with_a_timeout}


@pytest.mark.contract("hang")
@pytest.mark.parametrize("case", BLOCKING)
def test_a_blocking_callback_or_tool_is_a_result_with_a_status_never_a_hang(case):
    bound = 0.3
    gw, (tool, arguments), status, says = BLOCKING[case](bound)
    start = time.monotonic()
    result = gw.execute(tool, arguments, subject="agent")
    waited = time.monotonic() - start
    assert waited < 5, f"{case}: waited {waited:.1f} s"
    assert result.status == status, result.content
    assert says in result.content or says in gw.audit.records[-1].approver
    assert gw.audit.records[-1].status == status
    assert not gw.pending  # a denied request does not stay pending


@pytest.mark.contract("hang")
def test_the_bounds_are_named_constants_with_sane_defaults():
    assert 0 < POLICY_TIMEOUT <= 60 and 0 < CONFIRM_TIMEOUT <= 3600
    assert ToolRegistry().register(get_weather) is get_weather
    reg = _registry()
    assert reg.spec("get_weather").timeout is None  # no timeout declared: the tool runs inline
    gw = ToolGateway(reg, {})
    assert (gw.policy_timeout, gw.confirm_timeout) == (POLICY_TIMEOUT, CONFIRM_TIMEOUT)
    assert gateway_module.__all__.count("POLICY_TIMEOUT") == 1


@pytest.mark.contract("unclear error")
@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan"), "5", True])
def test_a_deadline_that_cannot_work_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match="policy_timeout"):
        ToolGateway(_registry(), {}, policy_timeout=bad)
    with pytest.raises(ValueError, match="confirm_timeout"):
        ToolGateway(_registry(), {}, confirm_timeout=bad)


@pytest.mark.contract("wrong result")
def test_a_fast_confirm_and_policy_still_work_within_their_deadline():
    asked = []
    gw = ToolGateway(_registry(), {"agent": {"read", "critical"}},
                     confirm=lambda request: asked.append(request.tool) or True,
                     policies=[Policy("limit", lambda tool, args:
                                      "over the limit" if args.get("amount", 0) > 10 else None)])
    assert gw.execute("transfer", {"amount": 5}, subject="agent").status == "ok"
    assert gw.execute("transfer", {"amount": 50}, subject="agent").status == "vetoed"
    assert asked == ["transfer"]


# ------------------------------------------------------------------ (2) look-alike tool names

# (name, the first letter that is not ASCII, as the refusal names it)
NOT_ASCII = {
    "cyrillic e, beside get_weather": ("g\u0435t_weather", "U+0435"),
    "cyrillic a, beside get_weather": ("get_we\u0430ther", "U+0430"),
    "fullwidth g, beside get_weather": ("\uff47et_weather", "U+FF47"),
    "greek alpha, beside get_weather": ("get_we\u03b1ther", "U+03B1"),
    "cyrillic alone": ("\u043f\u043e\u0433\u043e\u0434\u0430", "U+043F"),
    "accented": ("m\u00e9t\u00e9o", "U+00E9"),
    "greek": ("\u03ba\u03b1\u03b9\u03c1\u03bf\u03c2", "U+03BA"),
}


@pytest.mark.contract("wrong result")
@pytest.mark.parametrize("case", NOT_ASCII)
def test_a_name_that_is_not_an_ascii_identifier_is_refused(case):
    reg = _registry()
    name, letter = NOT_ASCII[case]
    with pytest.raises(ValueError, match="not an ASCII identifier") as err:
        reg.register(get_weather, name=name)
    text = str(err.value)
    assert repr(name) in text and letter in text and "fix" in text
    assert reg.names() == ["get_weather", "transfer"]


@pytest.mark.contract("wrong result")
def test_a_name_equal_to_a_registered_one_but_for_case_is_refused_naming_both():
    reg = _registry()
    with pytest.raises(ValueError, match="already registered") as err:
        reg.register(get_weather, name="Get_Weather")
    assert "'Get_Weather'" in str(err.value) and "'get_weather'" in str(err.value)
    assert reg.names() == ["get_weather", "transfer"]


@pytest.mark.contract("wrong result")
def test_distinct_ascii_names_still_register():
    reg = _registry()
    for name in ("get_weather2", "get_forecast", "weather", "get__weather"):
        reg.register(get_weather, name=name)
    assert "get_weather2" in reg and "get__weather" in reg


# ------------------------------------------------------------------ (3) clear configuration errors


def _missing(tmp_path):
    return tmp_path / "nope.json", FileNotFoundError


def _not_json(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text("enabled: [get_weather]\n")
    return path, ValueError


def _a_folder(tmp_path):
    return tmp_path, FileNotFoundError


def _binary(tmp_path):
    path = tmp_path / "tools.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    return path, FileNotFoundError


BAD_FILES = {"missing": _missing, "not JSON": _not_json, "a folder": _a_folder,
             "not UTF-8": _binary}


@pytest.mark.contract("raw crash")
@pytest.mark.parametrize("case", BAD_FILES)
def test_configure_on_a_bad_file_names_the_file_and_the_fix(tmp_path, case):
    reg = _registry()
    before = set(reg.allowlist)
    path, error = BAD_FILES[case](tmp_path)
    with pytest.raises(error) as err:
        reg.configure(path)
    assert str(path) in str(err.value) and "fix" in str(err.value)
    assert '"enabled"' in str(err.value)
    assert reg.allowlist == before  # nothing changes on a bad configuration


@pytest.mark.contract("raw crash")
@pytest.mark.parametrize("subject", [["agent"], None, 7, ("agent",), b"agent"])
def test_a_subject_that_is_not_a_string_is_a_clear_error(subject):
    gw = ToolGateway(_registry(), {"agent": {"read"}})
    with pytest.raises(TypeError, match="subject must be a string") as err:
        gw.execute("get_weather", {"city": "Oslo"}, subject=subject)
    assert "fix" in str(err.value)
    if subject == ["agent"]:
        assert "subject='agent'" in str(err.value)
    assert len(gw.audit) == 0


@pytest.mark.contract("raw crash")
def test_grants_keyed_by_a_non_string_subject_are_refused():
    with pytest.raises(TypeError, match="not a string"):
        ToolGateway(_registry(), {("agent",): {"read"}})


# ------------------------------------------- arguments the door cannot read, numbers it cannot show


class _UnreadableArguments(Mapping):
    """A mapping whose iteration raises (a buggy or hostile caller's object)."""

    def __getitem__(self, key):
        raise KeyError(key)

    def __iter__(self):
        raise RuntimeError("iteration refused")

    def __len__(self):
        return 1


@pytest.mark.contract("raw crash")
@pytest.mark.parametrize("door", ["registry", "gateway"])
def test_arguments_whose_iteration_raises_are_a_refusal_not_an_exception(door):
    reg = _registry()
    if door == "registry":
        result = reg.execute("transfer", _UnreadableArguments())
    else:
        gw = ToolGateway(reg, {"agent": {"read", "critical"}})
        result = gw.execute("transfer", _UnreadableArguments(), subject="agent")
        assert gw.audit.records[-1].status == "invalid_arguments"
    assert result.status == "invalid_arguments" and not result.is_bug
    assert "could not be read" in result.content and "iteration refused" in result.content
    assert "plain JSON object" in result.content  # the fix
    assert result.value is None  # nothing ran


@pytest.mark.contract("unclear error")
@pytest.mark.parametrize("arguments, where", [
    ({"amount": 10 ** 5000}, "'amount'"),
    ({"amount": -(10 ** 4400)}, "'amount'"),
])
def test_an_integer_beyond_pythons_digit_limit_is_a_refusal_naming_the_limit(arguments, where):
    result = _registry().execute("transfer", arguments)
    assert result.status == "invalid_arguments" and not result.is_bug, result.content
    limit = str(sys.get_int_max_str_digits())
    assert where in result.content and limit in result.content
    assert "sys.get_int_max_str_digits" in result.content and "smaller number" in result.content


@pytest.mark.contract("wrong result")
def test_an_integer_within_the_limit_still_runs():
    reg = _registry()
    result = reg.run(reg.check("transfer", {"amount": 10 ** 20}), confirmed_by="human:dana")
    assert result.ok and result.content == f"moved {10 ** 20}"


@pytest.mark.contract("unclear error")
@pytest.mark.parametrize("classes", ["read", "critical", b"read", 5, None])
def test_grants_given_as_a_string_are_refused_saying_grants_are_a_set(classes):
    with pytest.raises(TypeError) as err:
        ToolGateway(_registry(), {"agent": classes})
    text = str(err.value)
    assert "'agent'" in text and "set of risk class names" in text
    example = classes if classes in ("read", "critical") else "read"
    assert f"grants={{'agent': {{'{example}'}}}}" in text  # the fix, with the set written out


@pytest.mark.contract("unclear error")
def test_grants_that_are_not_a_mapping_are_refused():
    with pytest.raises(TypeError, match="map each subject to a set of risk class names"):
        ToolGateway(_registry(), {"read"})
