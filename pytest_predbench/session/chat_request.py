"""What the harness forwards of an installed agent's chat request: a text conversation, rebuilt.

The request comes from inside the sandbox, where the agent's own commands can write any JSON to the
forwarder. The harness counts the prompt (litellm's token counter) to reserve the call's worst case,
then hands the messages to litellm and the provider. Both read far more than text: an `image_url`,
`file` or `document` part is fetched or decoded by the counter (a URL the agent names is resolved
and fetched by the harness, outside the sandbox's network namespace) and estimated, not counted;
keys the counter skips reach the provider uncounted; a content list of several parts breaks the
cache marks. So nothing is passed through as it came: each message is rebuilt from the fields a
text chat has — its role, its text (a string, or text parts joined), an assistant's tool calls
(id, function name, argument string) and a tool result's call id — each of bounded size where the
counter does not count it, and a request with anything else in those fields (another part type,
another role) is refused with a one-line reason. Keys of a message outside these are dropped.
"""

import re
from typing import Any

CALL_FIELDS = ("messages", "tools", "tool_choice")
"""All the harness takes of the agent's request body (the model, max_tokens, n, the key, the
provider and the timeout are the harness's)."""
ROLES = ("system", "user", "assistant", "tool")
NAME = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
"""A function's name (OpenAI's rule, with `.` and `:`): the counter does not count a tool call's."""
ID_CHARS = 128
"""A tool call's id: not counted either."""
TOOL_CHOICES = ("auto", "none", "required")


class NotText(ValueError):
    """The request is not a text chat request the harness forwards (the message says why)."""


def forwarded(body: dict) -> dict:
    """The request the harness makes of `body` (an agent's chat-completions request): its messages
    rebuilt as text, its tools and tool choice checked. NotText for anything else."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise NotText("no messages")
    request: dict[str, Any] = {"messages": [_message(m, i) for i, m in enumerate(messages)]}
    if body.get("tools") is not None:
        request["tools"] = _tools(body["tools"])
    if body.get("tool_choice") is not None:
        request["tool_choice"] = _tool_choice(body["tool_choice"])
    return request


def _text(content: Any, where: str) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise NotText(f"{where}: a content part of type {str(kind)[:40]!r}; only text is forwarded")
            parts.append(part["text"])
        return "".join(parts)
    raise NotText(f"{where}: content is neither text nor a list of text parts")


def _message(message: Any, index: int) -> dict:
    where = f"message {index}"
    if not isinstance(message, dict) or message.get("role") not in ROLES:
        raise NotText(f"{where}: not a message of role {', '.join(ROLES)}")
    role = message["role"]
    rebuilt: dict[str, Any] = {"role": role, "content": _text(message.get("content"), where)}
    if role == "assistant" and message.get("tool_calls"):
        rebuilt["tool_calls"] = [_tool_call(c, where) for c in _list(message["tool_calls"], where)]
    if role == "tool":
        call_id = message.get("tool_call_id")
        if not (isinstance(call_id, str) and 0 < len(call_id) <= ID_CHARS):
            raise NotText(f"{where}: a tool result needs a tool_call_id of at most {ID_CHARS} characters")
        rebuilt["tool_call_id"] = call_id
    if rebuilt["content"] is None and "tool_calls" not in rebuilt:
        rebuilt["content"] = ""
    return rebuilt


def _list(value: Any, where: str) -> list:
    if not isinstance(value, list):
        raise NotText(f"{where}: tool_calls is not a list")
    return value


def _tool_call(call: Any, where: str) -> dict:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        raise NotText(f"{where}: a tool call without a function")
    call_id, name, arguments = call.get("id"), function.get("name"), function.get("arguments")
    if not (isinstance(call_id, str) and 0 < len(call_id) <= ID_CHARS):
        raise NotText(f"{where}: a tool call needs an id of at most {ID_CHARS} characters")
    if not (isinstance(name, str) and NAME.fullmatch(name)):
        raise NotText(f"{where}: a tool call's function name must match {NAME.pattern}")
    if not isinstance(arguments, str):
        raise NotText(f"{where}: a tool call's arguments must be a string")
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _tools(tools: Any) -> list[dict]:
    if not isinstance(tools, list):
        raise NotText("tools is not a list")
    checked = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) and tool.get("type") == "function" else None
        if not (
            isinstance(function, dict) and isinstance(function.get("name"), str) and NAME.fullmatch(function["name"])
        ):
            raise NotText(f"a tool must be a function whose name matches {NAME.pattern}")
        description, parameters = function.get("description", ""), function.get("parameters", {})
        if not isinstance(description, str) or not isinstance(parameters, dict):
            raise NotText("a tool's description must be text and its parameters an object")
        checked.append(
            {
                "type": "function",
                "function": {"name": function["name"], "description": description, "parameters": parameters},
            }
        )
    return checked


def _tool_choice(choice: Any) -> str | dict:
    if choice in TOOL_CHOICES:
        return choice
    function = choice.get("function") if isinstance(choice, dict) and choice.get("type") == "function" else None
    if isinstance(function, dict) and isinstance(function.get("name"), str) and NAME.fullmatch(function["name"]):
        return {"type": "function", "function": {"name": function["name"]}}
    raise NotText(f"tool_choice must be one of {', '.join(TOOL_CHOICES)} or a function by name")
