"""Stage 5, report: what a run's state says, for people — progress, status, the leaderboard.

Reads state only: the publication gate, re-verification, the leaderboard's typed records, its
renderings, and progress and status. Never imports mini-swe-agent or litellm.
"""
