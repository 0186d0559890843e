"""Stage 4, run: the pytest plugin at work — plan, preflight, reserve, session, verify, settle.

Starting a run (new, resumed, preflight-only), building its plan, the preflight gates, the
two locked book-keeping steps around each item, the session as the test sees it, the pytest
hooks, and the summary at the end. Never imports mini-swe-agent or litellm itself.
"""
