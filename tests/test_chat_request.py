"""session/chat_request.py: what the harness forwards of an installed agent's chat request. The end
to end attacks are tests/test_redteam_agent.py; this is the rule itself, fast."""

import os

import pytest

from pytest_predbench.session.chat_request import NotText, forwarded

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # as the harness imports litellm: no fetch

OPENCODE_TURN = {
    "model": "model",
    "max_tokens": 1000,
    "stream": True,
    "messages": [
        {"role": "system", "content": "You are opencode."},
        {"role": "user", "content": "Find a bug."},
        {
            "role": "assistant",
            "content": "Running pred.",
            "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "call_0", "content": "ok"},
    ],
    "tools": [
        {"type": "function", "function": {"name": "bash", "description": "run", "parameters": {"type": "object"}}}
    ],
    "tool_choice": "auto",
}
"""The shape of opencode's requests (its second agent turn, shortened: tests/test_opencode_runner.py)."""


def test_an_opencode_request_is_forwarded_as_it_came():
    request = forwarded(OPENCODE_TURN)
    assert request == {k: OPENCODE_TURN[k] for k in ("messages", "tools", "tool_choice")}


def test_text_parts_are_joined_and_other_keys_dropped():
    body = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "x": {"y": 1}}
        ]
    }
    assert forwarded(body) == {"messages": [{"role": "user", "content": "ab"}]}


@pytest.mark.parametrize(
    ("message", "why"),
    [
        ({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/a.png"}}]}, "image_url"),
        ({"role": "user", "content": [{"type": "file", "file": {"file_data": "data:..."}}]}, "'file'"),
        ({"role": "developer", "content": "hi"}, "role"),
        ({"role": "tool", "content": "ok"}, "tool_call_id"),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "n" * 65, "arguments": "{}"}}]},
            "function name",
        ),
        ({"role": "assistant", "tool_calls": [{"id": "c" * 129, "function": {"name": "n", "arguments": "{}"}}]}, "id"),
    ],
)
def test_anything_but_a_text_conversation_is_refused_in_one_line(message, why):
    with pytest.raises(NotText, match=why) as refused:
        forwarded({"messages": [message]})
    assert "\n" not in str(refused.value)


def test_the_reservation_counts_a_tool_schema_litellm_skips():
    """litellm's token counter skips the schema of a tool whose `parameters` has no `properties`; the
    agent's code chooses the tools, so the reservation also counts the whole request's JSON as text and
    takes the larger (MeteredCalls._prompt_tokens). Contrast: litellm alone counts the huge schema as
    almost nothing; the reservation is never below litellm's count."""
    import types

    import litellm

    from pytest_predbench.session.opencode import MeteredCalls

    meter = types.SimpleNamespace(
        stack=types.SimpleNamespace(litellm=litellm), settings=types.SimpleNamespace(call_name="gpt-4o")
    )
    messages = [{"role": "user", "content": "hi"}]
    schema = {"type": "object", "description": "word " * 20_000}
    tools = [{"type": "function", "function": {"name": "big", "description": "x", "parameters": schema}}]
    litellms = litellm.token_counter(model="gpt-4o", messages=messages, tools=tools)
    reserved = MeteredCalls._prompt_tokens(meter, messages, tools)
    assert litellms < 1_000 < 20_000 <= reserved, (litellms, reserved)
    plain = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "description": "d",
                "parameters": {"type": "object", "properties": {"a": {"type": "string"}}},
            },
        }
    ]
    assert MeteredCalls._prompt_tokens(meter, messages, None) >= litellm.token_counter(
        model="gpt-4o", messages=messages
    )
    assert MeteredCalls._prompt_tokens(meter, messages, plain) >= litellm.token_counter(
        model="gpt-4o", messages=messages, tools=plain
    )


def test_the_reservation_counts_the_ids_and_names_of_tool_calls():
    """litellm's count leaves out an assistant's tool-call ids and names: 2,000 of them (each id 128
    characters, each name 64) are the whole request's JSON counted as text in the reservation."""
    import json
    import types

    import litellm

    from pytest_predbench.session.opencode import MeteredCalls

    meter = types.SimpleNamespace(
        stack=types.SimpleNamespace(litellm=litellm), settings=types.SimpleNamespace(call_name="gpt-4o")
    )
    calls = [
        {"id": f"{n:0128d}", "type": "function", "function": {"name": f"f{n:063d}", "arguments": "{}"}}
        for n in range(2000)
    ]
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "tool_calls": calls}]
    litellms = litellm.token_counter(model="gpt-4o", messages=messages)
    as_text = litellm.token_counter(model="gpt-4o", text=json.dumps({"messages": messages, "tools": None}))
    assert litellms < as_text == MeteredCalls._prompt_tokens(meter, messages, None)


def test_only_a_failure_a_request_can_cause_is_probed():
    """A 500 or an unparsable answer may be the request's doing; a timeout, a rate limit, an unavailable
    provider or a dropped connection depend on load, and stay infrastructure without a probe."""
    import litellm

    from pytest_predbench.session.opencode import request_shaped

    E = litellm.exceptions
    assert request_shaped(E.InternalServerError("x", "openai", "m"), litellm)
    for load in (
        E.Timeout("x", "m", "openai"),
        E.RateLimitError("x", "openai", "m"),
        E.ServiceUnavailableError("x", "openai", "m"),
        E.APIConnectionError("x", "openai", "m"),
    ):
        assert not request_shaped(load, litellm), type(load).__name__
