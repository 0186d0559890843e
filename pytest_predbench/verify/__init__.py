"""Stage 1, verify: is a certificate a real bug? Decided by the pinned pred alone.

The pinned pred and its environment record, the certificate format, the independent verifier
and the calibration set. Imports no other stage: a verdict depends on nothing but the
certificate and pred.
"""
