"""The built-in demo models: a local OpenAI-compatible server that replays scripted replies
(server.py, scripts/*.json), so the real litellm and mini-swe-agent paths run with no API key."""
