"""Minting: a fresh, hidden, validated bug pool from a pinned version's library source.

    mutator.py     cargo-mutants, pinned: every mutant of the rule files, as a diff, without building
    candidates.py  which mutants may become a minted bug, and the seeded order they are tried in
    rules.py       which witness-carrying rules each rule file implements (pred's own graph)
    build.py       the mutated source, and pred and the extractor built on it, cached by its digest
    validate.py    a mutant is a bug only when a probe's certificate is accepted on the minted build
                   and rejected on the pristine one; its difficulty; no behaviour changed elsewhere
    minting.py     the rounds (build, validate, replace what failed) and the pool written at the end

The pool it writes is read by verify/pool.py; `predbench mint` (cli.py) runs it.
"""
