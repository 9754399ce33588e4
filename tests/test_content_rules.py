"""Content rules: right answers neither the longest nor the shortest choice too often,
questions and ideas not repeated across exercises, hints that keep the formula for the
last one and give no code, statements that name every stage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import trainer.authoring
from tests.conftest import REPO, run_cli
from trainer import content_rules
from trainer.authoring import (
    _SPEC_TEMPLATE,
    Validation,
    content_warnings_by_id,
    shared_quiz_paths,
)
from trainer.content_rules import (
    RULE_CODE_IN_LAST_HINT,
    RULE_NEAR_DUPLICATE,
    RULES,
    AnswerShares,
    OtherQuestion,
    code_in,
    code_in_last_hint_warnings,
    content_warnings,
    near_duplicate_warnings,
    questions_of,
    shared_questions,
    span_is_code,
)
from trainer.content_rules.answers import (
    RULE_LONGEST_SHARE,
    RULE_SHORTEST_SHARE,
    answer_share_warnings,
)
from trainer.content_rules.concepts import RULE_CONCEPT_REPEAT, concept_repeat_warnings
from trainer.content_rules.derivation import (
    RULE_CODE_IN_DERIVATION,
    RULE_DERIVATION_MISSING,
    RULE_DERIVATION_TOO_WIDE,
    derivation_warnings,
)
from trainer.content_rules.teaching import (
    RULE_ANSWER_BEFORE_LAST_HINT,
    RULE_STAGE_NOT_IN_STATEMENT,
    answer_before_last_hint_warnings,
    stage_naming_warnings,
)
from trainer.errors import TrainerError
from trainer.spec import Exercise, QuizQuestion, exercise_from_mapping

FORMULA = "dL/dx_i = 3 · g_i, with g = grad_output."


def make_exercise(
    exercise_id: str = "triple",
    questions: list[tuple[str, list[str], int]] | None = None,
    hints: list[str] | None = None,
) -> Exercise:
    """A valid exercise (the scaffold's), with the given questions and hints."""
    data: dict[str, Any] = yaml.safe_load(
        _SPEC_TEMPLATE.format(id=exercise_id, class_name="MyTriple", title="Triple")
    )
    exercise = exercise_from_mapping(data, f"{exercise_id}.yaml")
    if questions is not None:
        exercise.quiz = tuple(
            QuizQuestion(question=text, choices=tuple(choices), answer=answer, explanation=".")
            for text, choices, answer in questions
        )
    if hints is not None:
        exercise.hints = tuple(hints)
    return exercise


def rules_of(warnings: list[content_rules.ContentWarning]) -> list[str]:
    return [w.rule for w in warnings]


# --- the right answer is the longest, or the shortest, choice too often ---------------

LONG_RIGHT = ("Q?", ["the right answer, long and careful", "short", "also short"], 1)
SHORT_RIGHT = ("Q?", ["0.5", "a long distractor with its reason", "another long one"], 1)
MIDDLE_RIGHT = ("Q?", ["a middling answer", "short", "the longest distractor of all"], 1)


def test_shares_count_ties_at_either_end():
    tied = make_exercise(questions=[("Q?", ["same", "same"], 1)])
    assert AnswerShares.of([tied]) == AnswerShares(questions=1, longest=1, shortest=1)


def test_too_many_shortest_right_answers_warn_on_each_question_that_adds_to_it():
    # 8 of 20 = 40%, more than 35%: every shortest right answer is a place to change.
    mine = make_exercise(questions=[SHORT_RIGHT] * 8 + [MIDDLE_RIGHT] * 2)
    other = make_exercise("other", questions=[MIDDLE_RIGHT] * 10)
    warnings = answer_share_warnings(mine, AnswerShares.of([mine, other]))
    assert [(w.rule, w.where) for w in warnings] == [
        (RULE_SHORTEST_SHARE, f"quiz[{n}]") for n in range(8)
    ]
    assert "as in 8 of the catalogue's 20 questions (40%, more than 35%)" in warnings[0].message
    assert answer_share_warnings(other, AnswerShares.of([mine, other])) == []


def test_too_many_longest_right_answers_warn_too():
    mine = make_exercise(questions=[LONG_RIGHT] * 8 + [MIDDLE_RIGHT] * 12)
    warnings = answer_share_warnings(mine, AnswerShares.of([mine]))
    assert [(w.rule, w.where) for w in warnings] == [
        (RULE_LONGEST_SHARE, f"quiz[{n}]") for n in range(8)
    ]


def test_a_catalogue_of_fewer_than_twenty_questions_is_too_small_to_judge():
    mine = make_exercise(questions=[SHORT_RIGHT] * 19)
    assert answer_share_warnings(mine, AnswerShares.of([mine])) == []


def test_shares_of_at_most_35_percent_give_no_warning():
    # 7 of 20 = 35% at each end.
    questions = [SHORT_RIGHT] * 7 + [LONG_RIGHT] * 7 + [MIDDLE_RIGHT] * 6
    mine = make_exercise(questions=questions)
    assert answer_share_warnings(mine, AnswerShares.of([mine])) == []
    worse = make_exercise(questions=[*questions[:-1], SHORT_RIGHT])
    assert (
        rules_of(answer_share_warnings(worse, AnswerShares.of([worse])))
        == [RULE_SHORTEST_SHARE] * 8
    )


# --- the same idea asked again in other words -----------------------------------------

UNUSED_OUTPUT = (
    "The loss never uses out2. What does backward receive as grad_out2?",
    ["None", "A tensor of zeros shaped like out2, made by autograd", "ones"],
    2,
)
UNUSED_INDICES = (
    "What does backward receive as grad_out2, the upstream gradient of the int64 indices?",
    ["A zero tensor shaped like the indices", "None, always", "random values"],
    1,
)


def test_a_question_asking_another_exercise_s_idea_in_other_words_is_warned():
    mine = make_exercise("topk", questions=[UNUSED_INDICES])
    theirs = make_exercise("two_output", questions=[UNUSED_OUTPUT])
    assert near_duplicate_warnings(mine, questions_of([theirs])) == [], "not a string repeat"
    warnings = concept_repeat_warnings(mine, questions_of([mine, theirs]))
    assert [(w.rule, w.where) for w in warnings] == [(RULE_CONCEPT_REPEAT, "quiz[0]")]
    assert "two_output quiz[0]" in warnings[0].message
    assert "grad_out2, receiv" in warnings[0].message and "shap, zero" in warnings[0].message


def test_a_shared_question_and_different_right_answers_are_not_a_repeat():
    other_answer = (UNUSED_OUTPUT[0], ["None", "The gradient of out1, passed on", "x"], 2)
    mine = make_exercise("topk", questions=[UNUSED_INDICES])
    theirs = make_exercise("two_output", questions=[other_answer])
    assert concept_repeat_warnings(mine, questions_of([theirs])) == []


def test_a_shared_quiz_s_right_answers_count_for_concept_repeats():
    shared = shared_questions(
        {"quiz": [{"question": UNUSED_OUTPUT[0], "choices": UNUSED_OUTPUT[1], "answer": 2}]},
        "quizzes/concepts.yaml",
    )
    mine = make_exercise("topk", questions=[UNUSED_INDICES])
    assert rules_of(concept_repeat_warnings(mine, shared)) == [RULE_CONCEPT_REPEAT]


def test_a_question_nearly_the_same_as_one_of_another_exercise_is_warned_whatever_its_case_and_spacing():
    mine = make_exercise(
        "mine",
        questions=[
            ("Why do the checks use random upstream gradients and not y.sum()?", ["a", "b"], 1),
            ("What is the derivative of the cube at x = 2?", ["12", "8"], 1),
        ],
    )
    theirs = make_exercise(
        "theirs",
        questions=[
            ("WHY does the check use random upstream\n  gradients, not `y.sum()`?", ["a", "b"], 1),
        ],
    )
    warnings = near_duplicate_warnings(mine, questions_of([mine, theirs]))
    assert [(w.rule, w.where) for w in warnings] == [(RULE_NEAR_DUPLICATE, "quiz[0]")]
    assert "theirs quiz[0]" in warnings[0].message


def test_different_questions_on_the_same_subject_are_not_near_duplicates():
    mine = make_exercise(
        "mine",
        questions=[("What shape does the per-slice sum in backward have, kept?", ["a"], 1)],
    )
    theirs = make_exercise(
        "theirs",
        questions=[("What shape does the gradient for weight have, and how?", ["a"], 1)],
    )
    assert near_duplicate_warnings(mine, questions_of([mine, theirs])) == []


def test_questions_of_the_same_exercise_are_never_compared_with_each_other():
    exercise = make_exercise(
        questions=[("What does backward return?", ["a"], 1)] * 3,
    )
    assert near_duplicate_warnings(exercise, questions_of([exercise])) == []


def test_a_question_of_a_shared_quiz_counts_as_another_exercise():
    mine = make_exercise(
        questions=[("Why return None for a Python float argument?", ["a", "b"], 1)],
    )
    shared = shared_questions(
        {"quiz": [{"question": "Why return None for a Python float argument?"}]},
        "quizzes/concepts.yaml",
    )
    warnings = near_duplicate_warnings(mine, shared)
    assert "quizzes/concepts.yaml quiz[0]" in warnings[0].message


@pytest.mark.parametrize(
    "data",
    [
        [{"question": "Q?"}],
        {"quiz": [{"question": "Q?"}]},
        {"questions": [{"question": "Q?"}]},
    ],
)
def test_a_shared_quiz_is_read_as_a_list_or_a_mapping_of_questions(data: object):
    assert shared_questions(data, "q") == [OtherQuestion("q", "quiz[0]", "Q?")]


@pytest.mark.parametrize("data", [None, "text", {"title": "x"}, [1, {"question": 2}]])
def test_a_shared_quiz_of_another_shape_gives_no_questions(data: object):
    assert shared_questions(data, "q") == []


# --- the last hint contains code -----------------------------------------------------


@pytest.mark.parametrize(
    "span",
    [
        "torch.sigmoid(x)",
        "x, t = ctx.saved_tensors",
        "return grad, -grad",
        "grad = grad_output * 2.0 * diff / diff.numel()",
        "grad_output.sum(dim=0)",
        "(g * y).sum(dim, keepdim=True)",
        "sum(dim=1)",
        "F.softplus(x)",
        "grad_output.T @ x",
        "grad_output @ weight",
        "b.mT",
        "local = 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * du_dx",
        "grad[torch.arange(n), target] -= 1",
        "probs[rows, target] = 0",
        "ctx.dim = dim",
        "total = 2 * x",
        "a = 1; b = 2",
    ],
)
def test_code_spans_that_read_as_python_count_as_code(span: str):
    assert span_is_code(span)


@pytest.mark.parametrize(
    "span",
    [
        "g · s · (1 − s)",
        "dL/dx = g · σ(x) · (1 − σ(x))",
        "dL/dx = ...",
        "dL/dx_i = 3 · g_i",
        "y = 0.5 * x * (1 + tanh(u))",
        "y_i = x_i - LSE",
        "s = softmax(x) = exp(y)",
        "1 - t**2",
        "grad_output * y * (1 - y)",
        "y_j·(g_j − Σ_i g_i·y_i)",
        "(B, out)",
        "None",
        "x ≥ 0",
        "σ(x) = 1 / (1 + exp(-x))",
        "var = mean((x - mu)**2)",
        "LSE = log(sum(exp(x)))",
    ],
)
def test_math_in_code_spans_does_not_count_as_code(span: str):
    assert not span_is_code(span)


def test_a_fenced_block_is_code_whatever_it_holds():
    assert code_in("The formula:\n\n```\ny = 3 * x\n```\n") == ["a fenced code block"]


def test_only_code_spans_of_python_are_reported_from_a_hint():
    hint = "Here `dL/dx = g · 3`, so `return 3 * grad_output` and `y = 3 * x`."
    assert code_in(hint) == ["return 3 * grad_output"]


def test_the_last_hint_with_code_is_warned_and_earlier_hints_are_not():
    code = "Return `grad_output.clone()`."
    assert code_in_last_hint_warnings(make_exercise(hints=[code, code, FORMULA])) == []
    warnings = code_in_last_hint_warnings(make_exercise(hints=[FORMULA, FORMULA, code]))
    assert [(w.rule, w.where) for w in warnings] == [(RULE_CODE_IN_LAST_HINT, "hints[2]")]
    assert "grad_output.clone()" in warnings[0].message


# --- the answer before the last hint ------------------------------------------------


def test_code_before_the_last_hint_is_warned():
    warnings = answer_before_last_hint_warnings(
        make_exercise(hints=["Return `grad_output.clone()`.", "The slope is 3.", FORMULA])
    )
    assert [(w.rule, w.where) for w in warnings] == [(RULE_ANSWER_BEFORE_LAST_HINT, "hints[0]")]
    assert "code (`grad_output.clone()`)" in warnings[0].message


def test_an_equation_for_the_loss_gradient_before_the_last_hint_is_warned():
    hints = ["Chain rule.", "So dL/dx_k = s · g · y_k for every k.", "The same, in full."]
    warnings = answer_before_last_hint_warnings(make_exercise(hints=hints))
    assert [(w.rule, w.where) for w in warnings] == [(RULE_ANSWER_BEFORE_LAST_HINT, "hints[1]")]
    assert "an equation for the gradient of the loss" in warnings[0].message


def test_the_last_hint_s_formula_in_an_earlier_hint_is_warned_even_as_a_local_slope():
    hints = [
        "The mask is a constant.",
        "For one element, `dy_i/dx_i = m_i / (1 − p)`.",
        "`∂L/∂x_i = g_i · m_i / (1 − p)`, with g the upstream gradient.",
    ]
    warnings = answer_before_last_hint_warnings(make_exercise(hints=hints))
    assert [(w.rule, w.where) for w in warnings] == [(RULE_ANSWER_BEFORE_LAST_HINT, "hints[1]")]
    assert "the last hint's formula" in warnings[0].message


def test_math_for_one_element_before_the_last_hint_is_not_warned():
    hints = [
        "The chain rule, element by element.",
        "For one element, dσ/dx = e^−x / (1 + e^−x)², and in 1-D `out[i] = x[index[i]]`.",
        "`dL/dx = g · σ(x) · (1 − σ(x))`, with g = grad_output.",
    ]
    assert answer_before_last_hint_warnings(make_exercise(hints=hints)) == []


# --- every stage named in the statement ----------------------------------------------


def test_a_statement_that_does_not_name_a_stage_is_warned_with_the_stages_it_misses():
    exercise = make_exercise()
    exercise.statement = (
        "Write it.\n\nWhat the checker tests: that the file loads; forward and the gradient "
        "against autograd's; the backward contract; gradcheck; calls as in training, a "
        "500 calls in a row; on a GPU, CUDA."
    )
    warnings = stage_naming_warnings(exercise)
    assert [(w.rule, w.where) for w in warnings] == [(RULE_STAGE_NOT_IN_STATEMENT, "statement")]
    assert "stability (Domain and stability), by_hand (Derived by hand)" in warnings[0].message


def test_a_statement_naming_every_stage_is_not_warned_and_the_scaffold_s_does():
    assert stage_naming_warnings(make_exercise()) == []


# --- the worked derivation ----------------------------------------------------------


def test_a_spec_without_a_derivation_is_warned_and_still_loads():
    bare = make_exercise()
    bare.derivation = ""
    (warning,) = derivation_warnings(bare)
    assert warning.rule == RULE_DERIVATION_MISSING and warning.where == "derivation"
    assert "`derivation:`" in warning.message and "`trainer explain`" in warning.message


def test_a_derivation_line_wider_than_72_columns_is_warned_with_its_number():
    mine = make_exercise()
    mine.derivation = "∂L/∂x = g\n" + "x" * 72 + "\n" + "y" * 73 + "\n" + "∂" * 80
    (warning,) = derivation_warnings(mine)
    assert warning.rule == RULE_DERIVATION_TOO_WIDE
    assert warning.message.startswith("lines 3 and 4 are wider than 72 columns")


def test_a_wide_character_counts_two_columns():
    mine = make_exercise()
    mine.derivation = "全" * 36 + "\n" + "x̂" * 72  # a combining hat takes no column
    assert derivation_warnings(mine) == []
    mine.derivation = "全" * 37
    assert rules_of(derivation_warnings(mine)) == [RULE_DERIVATION_TOO_WIDE]


@pytest.mark.parametrize(
    "line",
    [
        "grad = grad_output * y * (1 - y)",
        "• return g * y",
        "g.sum(dim=0)",
        "y = torch.sigmoid(x)",
        "`ctx.saved_tensors`",
    ],
)
def test_code_in_a_derivation_is_warned(line: str):
    mine = make_exercise()
    mine.derivation = f"∂L/∂x = 3 · g\n{line}"
    (warning,) = derivation_warnings(mine)
    assert warning.rule == RULE_CODE_IN_DERIVATION
    assert "leave the code to `trainer solution`" in warning.message


@pytest.mark.parametrize(
    "line",
    [
        "y[p] = x[index[p]]",
        "  y[n, c, i, j] = x[n, c, m(n, c, i, j)],",
        "∂L/∂x = g ⊙ y ⊙ (1 − y)",
        "• g ⊙ y: takes the output's value for the slope, which is 1.",
        "r = (mean(x²) + ε)^(−1/2)",
        "y = 3·x",
    ],
)
def test_maths_and_index_notation_in_a_derivation_are_not_code(line: str):
    mine = make_exercise()
    mine.derivation = line
    assert derivation_warnings(mine) == []


# --- all rules, and validate ----------------------------------------------------------


def test_content_warnings_applies_every_rule():
    mine = make_exercise(
        "mine",
        questions=[
            ("Why random upstream gradients?", ["the long right answer", "no"], 1),
            (*UNUSED_INDICES[:2], 1),
            ("A third?", ["b", "a long wrong one"], 1),
        ],
        hints=["`x.sum()`", FORMULA, "`return 3 * grad_output`"],
    )
    mine.statement = "Write it."
    mine.derivation = "∂L/∂x = " + "3 · g + " * 10 + "0\ngrad = 3 * grad_output"
    theirs = make_exercise(
        "theirs",
        questions=[("Why random upstream gradients?", ["a"], 1), UNUSED_OUTPUT],
    )
    theirs.derivation = ""  # a missing derivation excludes the other two derivation rules
    every_end = AnswerShares(questions=20, longest=20, shortest=20)
    warnings = content_warnings(mine, questions_of([mine, theirs]), every_end)
    warnings += content_warnings(theirs)
    assert sorted(set(rules_of(warnings))) == sorted(RULES)
    assert str(warnings[0]).startswith(f"{warnings[0].where}: ")


def test_the_scaffold_of_trainer_new_breaks_no_content_rule_against_the_bundled_catalogue():
    catalogue = sorted((REPO / "exercises").glob("*.yaml"))
    assert content_warnings_by_id([make_exercise()], catalogue, shared_quiz_paths([REPO])) == {
        "triple": []
    }


def test_validate_compares_questions_with_the_catalogue_and_shared_quizzes(tmp_path: Path):
    question = "What does the contract stage call directly?"
    other = tmp_path / "exercises" / "other.yaml"
    other.parent.mkdir()
    data = yaml.safe_load(_SPEC_TEMPLATE.format(id="other", class_name="MyOther", title="Other"))
    data["quiz"][0]["question"] = question
    other.write_text(yaml.safe_dump(data), encoding="utf-8")
    concepts = tmp_path / "quizzes" / "concepts.yaml"
    concepts.parent.mkdir()
    concepts.write_text(yaml.safe_dump({"quiz": [{"question": question}]}), encoding="utf-8")
    broken = tmp_path / "exercises" / "broken.yaml"
    broken.write_text("id: [", encoding="utf-8")
    mine = make_exercise("mine", questions=[(question, ["a", "b"], 1)])

    warnings = content_warnings_by_id([mine], [other, broken], [concepts])

    repeats = [w for w in warnings["mine"] if "nearly the same" in w]
    assert len(repeats) == 2
    assert "other quiz[0]" in repeats[0]
    assert "quizzes/concepts.yaml quiz[0]" in repeats[1]


def test_validate_attaches_each_specs_warnings_to_its_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    class NoService:
        def __enter__(self) -> NoService:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

    def no_check(*args: Any, **kwargs: Any) -> Any:
        raise TrainerError("not run in this test")

    monkeypatch.setattr(trainer.authoring, "CheckingService", NoService)
    monkeypatch.setattr(trainer.authoring, "run_check", no_check)
    spec = tmp_path / "exercises" / "triple.yaml"
    spec.parent.mkdir()
    data = yaml.safe_load(_SPEC_TEMPLATE.format(id="triple", class_name="MyTriple", title="T"))
    data["hints"][-1] = "Return `3 * grad_output.clone()`."
    spec.write_text(yaml.safe_dump(data), encoding="utf-8")

    (result,) = trainer.authoring.validate([(spec, "triple.yaml")], jobs=1)

    assert len(result.warnings) == 1
    assert result.warnings[0].startswith("hints[2]: the last hint contains code")


def test_a_spec_with_only_warnings_still_validates():
    result = Validation(spec="exercises/x.yaml", exercise_id="x", warnings=["quiz[0]: cue"])
    assert result.ok
    assert result.problems == []


def test_validate_shows_warnings_in_json_and_in_the_table_and_exits_0(
    monkeypatch: pytest.MonkeyPatch,
):
    calls: list[dict[str, Any]] = []

    def fake_validate(specs: Any, **options: Any) -> list[Validation]:
        calls.append(options)
        return [Validation(spec="exercises/x.yaml", exercise_id="x", warnings=["quiz[0]: cue"])]

    monkeypatch.setattr(trainer.authoring, "validate", fake_validate)
    as_json = run_cli("validate", "--json")
    assert as_json.exit_code == 0
    assert as_json.json()["specs"][0]["warnings"] == ["quiz[0]: cue"]
    assert as_json.json()["ok"] is True
    assert calls[0]["catalogue"], "validate must get the catalogue to compare questions with"
    table = run_cli("validate")
    assert table.exit_code == 0
    assert "⚠ exercises/x.yaml: quiz[0]: cue" in table.stdout
    assert "1 content warning" in table.stdout
