"""Stage 3, state: what a run keeps on disk, and the checks that it adds up.

The run directory, the plan as recorded, the budget ledger, the item records, liveness of a
reservation's owner, and the audit every reader uses. Imports neither pytest nor the agent stack.
"""
