"""The extractor: what pred 0.5.0 cannot do, done by the same pinned library code.

`pred-extract` (the crate in extractor/, built by setup next to pred and recorded with its
sha256) replays a one-step bundle on its source — never trusting the bundle's target — and maps
ANY target configuration back, so a certificate is judged on the rule, not on which optimum
pred's solver happens to return first. It also re-runs the library's own constructor checks on
an instance (serde loading skips them), reports a problem's configuration space (what brute force
enumerates), and evaluates configurations pred's `evaluate` cannot take (an empty one).

Every call runs under the same limits as pred's and is kept as evidence. A library panic inside
the extractor is caught and reported with where it happened (exit 3): its stage, its place, whether
it is an integer overflow (the extractor is built with overflow checks, so its arithmetic never
wraps unseen) and the innermost frame of a rule's own code on the stack (`rule_frame`), which is
what tells a crash of the rule from a panic of a problem's loading, constructor or evaluation.
"""

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from pytest_predbench.verify.pred import Budget, Pred, PredCall, PredLimits, pred_failure


class ExtractorFailure(Exception):
    """The extractor answered with an error: a panic of the library (`panicked`) or input it refuses."""

    def __init__(
        self, call: PredCall, error: str, message: str, stage: str | None = None, panic: "Panic | None" = None
    ):
        super().__init__(message)
        self.call = call
        self.error = error
        self.message = message
        self.stage = stage
        self.panic = panic or Panic()

    @property
    def panicked(self) -> bool:
        return self.error == "panic"

    @property
    def overflowed(self) -> bool:
        """An integer overflow: pred, built without overflow checks, wraps silently there."""
        return self.panicked and self.panic.overflow

    @property
    def in_rule(self) -> bool:
        """The panic happened while a rule's own code ran: its reduce_to (stage `reduce`) or its
        extract_solution (stage `extract_solution`), with a frame of its file under src/rules/ on
        the stack (a constructor it calls counts: the rule built that input)."""
        return self.panicked and self.stage in RULE_STAGES and self.panic.rule_frame is not None


RULE_STAGES = ("reduce", "extract_solution")


class Panic(BaseModel):
    """Where a panic of the library happened (`pred-extract`'s `panic` object)."""

    location: str | None = None
    overflow: bool = False
    rule_frame: str | None = None


class Extraction(BaseModel):
    source_solution: list[int]
    source_evaluation: str
    source_solution_in_range: bool
    target_evaluation: str
    target_matches: bool
    """The bundle's target equals what the library derives from its source along its path."""
    path: list[str]


class Validity(BaseModel):
    valid: bool
    checked: bool
    """False: the library has no constructor check for this problem type (only serde loading ran)."""
    reason: str
    constructor: str | None = None


class Extractor:
    def __init__(self, binary: Path, limits: PredLimits, budget: Budget | None = None):
        self.runner = Pred(binary, limits, name="pred-extract", budget=budget)

    @property
    def calls(self) -> int:
        return self.runner.calls

    def _ask(self, command: str, payload: Any, cwd: Path) -> tuple[dict, PredCall]:
        call = self.runner.run(command, stdin=json.dumps(payload), cwd=cwd)
        try:
            answer = json.loads(call.full_stdout)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise ExtractorFailure(call, "no_answer", pred_failure(call, self.runner.limits))
        if "error" in answer or not call.ok:
            message = _one_line(answer.get("message", ""))[:500]
            try:
                panic = Panic.model_validate(answer.get("panic") or {})
            except ValidationError:
                panic = Panic()
            raise ExtractorFailure(call, str(answer.get("error")), message, answer.get("stage"), panic)
        return answer, call

    def extract(self, bundle: dict, target_solution: list[int], cwd: Path) -> tuple[Extraction, PredCall]:
        answer, call = self._ask("extract", {"bundle": bundle, "target_solution": target_solution}, cwd)
        return _model(Extraction, answer, call), call

    def reduce(self, source: dict, path: list[dict], cwd: Path) -> tuple[dict, PredCall]:
        """The target the library derives from `source` along `path` (raises on a panic, with where)."""
        answer, call = self._ask("reduce", {"source": source, "path": path}, cwd)
        return answer.get("target") or {}, call

    def canonical(self, names: list[str], cwd: Path) -> tuple[list[str], PredCall]:
        """Problem names as pred resolves them: an exact name, else the catalog's alias (`MVC`)."""
        answer, call = self._ask("canonical", {"names": names}, cwd)
        found = answer.get("names")
        if not isinstance(found, list) or len(found) != len(names) or not all(isinstance(n, str) for n in found):
            raise ExtractorFailure(call, "no_answer", "pred-extract canonical printed no names")
        return found, call

    def validate(self, problem: dict, cwd: Path) -> tuple[Validity, PredCall]:
        answer, call = self._ask("validate", problem, cwd)
        validity = _model(Validity, answer, call)
        return validity.model_copy(update={"reason": _one_line(validity.reason)[:500]}), call

    def dims(self, problem: dict, cwd: Path) -> tuple[list[int], PredCall]:
        answer, call = self._ask("dims", problem, cwd)
        dims = answer.get("dims")
        if not isinstance(dims, list) or not all(isinstance(d, int) and d >= 0 for d in dims):
            raise ExtractorFailure(call, "no_answer", "pred-extract dims printed no dimensions")
        return dims, call

    def evaluate(self, problem: dict, config: list[int], cwd: Path) -> tuple[str, PredCall]:
        answer, call = self._ask("evaluate", {"problem": problem, "config": config}, cwd)
        return str(answer.get("evaluation")), call


def _model(model: type[BaseModel], answer: dict, call: PredCall):  # noqa: ANN202 - the model given
    try:
        return model.model_validate(answer)
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"]
        raise ExtractorFailure(call, "no_answer", f"pred-extract answered unexpectedly: {problem}") from None


def _one_line(text: object) -> str:
    """A library message (a failed assert spans lines: left, right) as one line for a reason."""
    return " ".join(str(text).split())
