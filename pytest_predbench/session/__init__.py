"""Stage 2, session: one model hunting for bugs, behind the AgentRunner protocol.

The protocol (limits, results, stop reasons), the runners (MiniSweRunner, OpenCodeRunner, the
labelled FAKE FakeRunner), the sandbox the agent's commands run in, the metered model endpoint of
an installed agent, the one submission channel, bounded observations, the prompt, model settings
and the scripted demo server. Imports only verify/.
"""
