"""The demo server over plain HTTP: which turn it plays, what usage it reports, how it fails.

No litellm here (that path is tests/test_miniswe_runner.py); a raw client shows exactly what
goes over the wire.
"""

import http.client
import json
import socket
from urllib.parse import urlparse

import pytest
from pydantic import ValidationError

from pytest_predbench.session.demo.server import (
    SESSION_HEADER,
    DemoServer,
    Fault,
    Script,
    Turn,
    chars_per_four,
    load_script,
    turn_index,
)
from pytest_predbench.session.model_settings import DEMO_SCRIPT_DIR

SCRIPT = Script(
    turns=[
        Turn(say="first", bash="pred list --rules"),
        Turn(bash="echo two"),
        Turn(fault=Fault.HTTP_429),
        Turn(fault=Fault.HTTP_500),
        Turn(fault=Fault.MALFORMED_JSON),
        Turn(fault=Fault.CLOSE_CONNECTION),
        Turn(fault=Fault.HANG, seconds=5),
        Turn(fault=Fault.HTTP_400),
    ]
)


@pytest.fixture(scope="module")
def server():
    with DemoServer() as s:
        s.add_script("demo-test", SCRIPT)
        yield s


def conversation(answers: int) -> list[dict]:
    """A conversation in which the model has answered `answers` times."""
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    for i in range(answers):
        call = {"id": f"call_{i}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": "out"})
    return messages


def post(server: DemoServer, body: dict, session: str = "s", timeout: float = 10) -> http.client.HTTPResponse:
    url = urlparse(server.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    conn.request(
        "POST",
        f"{url.path}/chat/completions",
        body=json.dumps(body),
        headers={"Content-Type": "application/json", SESSION_HEADER: session},
    )
    return conn.getresponse()


def test_binds_to_loopback_on_an_ephemeral_port(server):
    url = urlparse(server.url)
    assert url.hostname == "127.0.0.1"
    assert url.port not in (None, 0, 80, 8000)


def test_the_turn_is_chosen_by_how_often_the_model_already_answered(server):
    first = json.loads(post(server, {"model": "demo-test", "messages": conversation(0)}).read())
    second = json.loads(post(server, {"model": "demo-test", "messages": conversation(1)}).read())
    assert first["model"] == "demo-test"
    call = first["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["name"] == "bash"
    assert json.loads(call["function"]["arguments"]) == {"command": "pred list --rules"}
    assert first["choices"][0]["message"]["content"] == "first"
    assert json.loads(second["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]) == {
        "command": "echo two"
    }
    # the same request again gets the same answer: retries and parallel sessions never interleave
    again = json.loads(post(server, {"model": "demo-test", "messages": conversation(1)}).read())
    assert again["choices"] == second["choices"]


def test_format_error_notices_count_as_answers():
    messages = conversation(1) + [{"role": "user", "content": "No tool calls found"}]
    assert turn_index(messages) == 2
    assert turn_index(conversation(0)) == 0


def test_usage_follows_the_documented_rule_and_respects_max_tokens(server):
    messages = conversation(0)
    tools = [{"type": "function", "function": {"name": "bash"}}]
    body = json.loads(post(server, {"model": "demo-test", "messages": messages, "tools": tools}, "usage").read())
    usage = body["usage"]
    assert usage["prompt_tokens"] == chars_per_four("demo-test", messages, tools)
    assert usage["completion_tokens"] == chars_per_four("demo-test", [body["choices"][0]["message"]], None)
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    capped = json.loads(post(server, {"model": "demo-test", "messages": messages, "max_tokens": 3}, "usage").read())
    assert capped["usage"]["completion_tokens"] == 3
    logged = server.usage_for("usage")
    assert [u.prompt_tokens for u in logged] == [
        usage["prompt_tokens"],
        chars_per_four("demo-test", messages, None),
    ]
    assert server.usage_for("nobody") == []


def test_an_injected_counter_is_used():
    with DemoServer(lambda model, messages, tools: 7 * len(messages)) as s:
        s.add_script("m", SCRIPT)
        usage = json.loads(post(s, {"model": "m", "messages": conversation(0)}).read())["usage"]
    assert usage["prompt_tokens"] == 14


@pytest.mark.parametrize(("answers", "status"), [(2, 429), (3, 500), (7, 400)])
def test_http_error_faults(server, answers, status):
    response = post(server, {"model": "demo-test", "messages": conversation(answers)})
    assert response.status == status
    assert "scripted" in json.loads(response.read())["error"]["message"]


def test_malformed_json_fault(server):
    response = post(server, {"model": "demo-test", "messages": conversation(4)})
    assert response.status == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(response.read())


def test_close_connection_fault(server):
    with pytest.raises(http.client.RemoteDisconnected):
        post(server, {"model": "demo-test", "messages": conversation(5)})


def test_hang_fault_outlasts_a_client_timeout(server):
    with pytest.raises(socket.timeout):
        post(server, {"model": "demo-test", "messages": conversation(6)}, timeout=0.5)


def test_unknown_model_and_route(server):
    assert post(server, {"model": "nope", "messages": conversation(0)}).status == 404
    url = urlparse(server.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
    conn.request("GET", "/v1/models")
    assert [m["id"] for m in json.loads(conn.getresponse().read())["data"]] == ["demo-test"]


def test_past_the_end_the_model_replies_without_a_tool_call(server):
    body = json.loads(post(server, {"model": "demo-test", "messages": conversation(len(SCRIPT.turns))}).read())
    assert body["choices"][0]["finish_reason"] == "stop"
    assert "tool_calls" not in body["choices"][0]["message"]


def test_a_turn_is_a_call_or_a_fault_not_both():
    with pytest.raises(ValidationError):
        Turn(bash="ls", fault=Fault.HTTP_500)
    with pytest.raises(ValidationError):
        Turn()
    with pytest.raises(ValidationError):
        Script.model_validate({"turns": [{"bash": "ls", "typo": 1}]})


def test_builtin_scripts_load():
    finder = load_script(DEMO_SCRIPT_DIR / "finder.json")
    idle = load_script(DEMO_SCRIPT_DIR / "idle.json")
    commands = [t.bash or "" for t in finder.turns]
    assert any("submit-certificate" in c for c in commands)
    assert not any("submit-certificate" in (t.bash or "") for t in idle.turns)
    assert commands[-1] == idle.turns[-1].bash == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


# -- transient faults ------------------------------------------------------------------------------


def test_a_fault_with_fault_times_plays_that_often_per_conversation_then_the_reply():
    script = Script(turns=[Turn(fault=Fault.HTTP_429, fault_times=2, retry_after=3, bash="echo up")])
    with DemoServer() as s:
        s.add_script("m", script)
        body = {"model": "m", "messages": conversation(0)}
        first, second = post(s, body, "one"), post(s, body, "one")
        assert (first.status, second.status) == (429, 429)
        assert first.getheader("Retry-After") == "3"
        assert post(s, body, "one").status == 200, "the third attempt gets past it"
        assert post(s, body, "two").status == 429, "another conversation meets the fault afresh"
    with pytest.raises(ValidationError):
        Turn(fault=Fault.HTTP_500, fault_times=0, bash="ls")
    with pytest.raises(ValidationError):
        Turn(fault=Fault.HTTP_500, fault_times=1, fault_while="/x", bash="ls")


# -- emulated prompt caching ---------------------------------------------------------------------


def marked(messages: list[dict]) -> list[dict]:
    """What mini-swe-agent's set_cache_control sends: the last message marked."""
    last = dict(messages[-1])
    last["content"] = [{"type": "text", "text": last["content"] or "", "cache_control": {"type": "ephemeral"}}]
    return [*messages[:-1], last]


def test_a_marked_conversation_reads_its_previous_prompt_from_the_cache_and_writes_the_rest():
    script = Script(turns=[Turn(bash=f"echo {i}") for i in range(3)])
    with DemoServer() as s:
        s.add_script("m", script)
        usages = [
            json.loads(post(s, {"model": "m", "messages": marked(conversation(n))}, "cached").read())["usage"]
            for n in range(3)
        ]
        plain = json.loads(post(s, {"model": "m", "messages": conversation(2)}, "plain").read())["usage"]
    first, second, third = usages
    assert first["prompt_tokens_details"]["cached_tokens"] == 0
    assert first["cache_creation_input_tokens"] == first["prompt_tokens"], "a first call writes it all"
    assert second["prompt_tokens_details"]["cached_tokens"] == first["prompt_tokens"]
    assert third["prompt_tokens_details"]["cached_tokens"] == second["prompt_tokens"]
    for usage in (second, third):
        read, written = usage["prompt_tokens_details"]["cached_tokens"], usage["cache_creation_input_tokens"]
        assert read + written == usage["prompt_tokens"] and written > 0
    assert plain["prompt_tokens_details"]["cached_tokens"] == plain["cache_creation_input_tokens"] == 0, (
        "the contrast: no marks, no cache"
    )


def test_a_changed_prefix_is_not_read_from_the_cache():
    script = Script(turns=[Turn(bash="echo 0"), Turn(bash="echo 1")])
    with DemoServer() as s:
        s.add_script("m", script)
        post(s, {"model": "m", "messages": marked(conversation(0))}, "edit").read()
        edited = conversation(1)
        edited[0] = {"role": "system", "content": "another system prompt"}
        usage = json.loads(post(s, {"model": "m", "messages": marked(edited)}, "edit").read())["usage"]
    assert usage["prompt_tokens_details"]["cached_tokens"] == 0
    assert usage["cache_creation_input_tokens"] == usage["prompt_tokens"]
