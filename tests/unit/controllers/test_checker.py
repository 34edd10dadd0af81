"""The schedule checker: parsing, the all-old/all-new (epoch) rule, and the precedence graph."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from swivel.controllers.checker import (
    Event,
    Observation,
    ProcessEvent,
    RecordNode,
    ScheduleError,
    TransactionNode,
    UpdateEvent,
    UpdateStep,
    Verdict,
    Violation,
    check_schedule,
    is_acyclic,
    precedence_graph,
)
from swivel.controllers.schedule_parsing import iter_events, parse_schedule


def update(operator: str, old: int, new: int, txn: int | None = None, line: int = 0) -> UpdateEvent:
    return UpdateEvent(operator, old, new, txn, line)


def process(
    record: str, operator: str, version: int, line: int = 0, state: int | None = None
) -> ProcessEvent:
    return ProcessEvent(record, operator, version, line, state)


def as_lines(*objects: dict[str, Any]) -> list[str]:
    return [json.dumps(o) for o in objects]


def check_raises(events: list[Event]) -> ScheduleError:
    with pytest.raises(ScheduleError) as caught:
        check_schedule(events)
    return caught.value


# --- parsing ---------------------------------------------------------------------------


def test_parses_both_event_kinds_and_keeps_line_numbers_across_blank_lines() -> None:
    lines = [
        '{"event": "update", "operator": "A", "from": 1, "to": 2}',
        "",
        "   ",
        '{"event": "process", "record": "r1", "operator": "A", "version": 2, "ts": 9}',
        '{"event": "update", "operator": "B", "from": -3, "to": 70, "txn": 4}',
    ]
    assert parse_schedule(lines) == [
        UpdateEvent("A", 1, 2, None, 1),
        ProcessEvent("r1", "A", 2, 4),
        UpdateEvent("B", -3, 70, 4, 5),
    ]


def test_accepts_bytes_lines_and_a_leading_byte_order_mark() -> None:
    lines = [b'\xef\xbb\xbf{"event": "process", "record": "r", "operator": "A", "version": 1}\n']
    assert parse_schedule(lines) == [ProcessEvent("r", "A", 1, 1)]


def test_parsing_is_lazy_so_a_bad_line_is_reported_after_the_good_ones() -> None:
    events = iter_events(
        ['{"event": "process", "record": "r", "operator": "A", "version": 1}', "{"]
    )
    assert next(events) == ProcessEvent("r", "A", 1, 1)
    with pytest.raises(ScheduleError):
        next(events)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{not json", "not JSON"),
        ('{"event": "update"} trailing', "not JSON"),
        ("[1, 2]", "expected a JSON object, got array"),
        ('"update"', "expected a JSON object, got string"),
        ('{"operator": "A"}', "missing field 'event'"),
        ('{"event": 3}', "field 'event' must be a string"),
        ('{"event": "commit"}', "unknown event 'commit'"),
        ('{"event": "process", "operator": "A", "version": 1}', "missing field 'record'"),
        ('{"event": "process", "record": "r", "version": 1}', "missing field 'operator'"),
        ('{"event": "process", "record": "r", "operator": "A"}', "missing field 'version'"),
        ('{"event": "process", "record": 7, "operator": "A", "version": 1}', "'record' must be"),
        ('{"event": "process", "record": "r", "operator": "", "version": 1}', "non-empty"),
        ('{"event": "process", "record": "r", "operator": "A", "version": 1.0}', "integer"),
        ('{"event": "process", "record": "r", "operator": "A", "version": true}', "integer"),
        ('{"event": "process", "record": "r", "operator": "A", "version": "1"}', "integer"),
        ('{"event": "update", "operator": "A", "to": 2}', "missing field 'from'"),
        ('{"event": "update", "operator": "A", "from": 1}', "missing field 'to'"),
        ('{"event": "update", "operator": "A", "from": 1, "to": 2, "txn": "x"}', "'txn'"),
    ],
)
def test_malformed_lines_name_their_line_and_reason(line: str, reason: str) -> None:
    good = '{"event": "update", "operator": "Z", "from": 1, "to": 2}'
    with pytest.raises(ScheduleError) as caught:
        parse_schedule([good, "", line])
    assert caught.value.line == 3
    assert reason in caught.value.reason
    assert str(caught.value).startswith("line 3: ")


def test_a_line_that_is_not_utf8_is_named() -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule([b"\n", b'{"event": "\xff"}\n'])
    assert caught.value.line == 2
    assert "UTF-8" in caught.value.reason


def test_a_null_txn_counts_as_absent() -> None:
    [event] = parse_schedule(
        ['{"event": "update", "operator": "A", "from": 1, "to": 2, "txn": null}']
    )
    assert event == UpdateEvent("A", 1, 2, None, 1)


# --- one function-update transaction -----------------------------------------------------


def test_without_updates_nothing_conflicts() -> None:
    verdict = check_schedule([process("r1", "A", 1), process("r1", "A", 5)])
    assert verdict == Verdict(records=1, process_events=2, transactions=(), violations=())
    assert verdict.serializable


def test_records_entirely_old_or_entirely_new_are_serializable() -> None:
    verdict = check_schedule(
        [
            update("A", 1, 2),
            update("B", 1, 2),
            *(process("r1", op, 1) for op in "AB"),
            *(process("r2", op, 2) for op in "AB"),
            process("r3", "B", 2),
        ]
    )
    assert verdict.serializable
    assert (verdict.records, verdict.process_events) == (3, 5)
    assert verdict.versions == {"A": (1, 2), "B": (1, 2)}
    [transaction] = verdict.transactions
    assert transaction.steps == (UpdateStep("A", 1, 2), UpdateStep("B", 1, 2))


def test_the_papers_bad_schedule_old_at_one_operator_new_at_the_other() -> None:
    verdict = check_schedule(
        [update("A", 1, 2), update("B", 1, 2), process("r7", "A", 1), process("r7", "B", 2)]
    )
    assert not verdict.serializable
    assert verdict.violations == (
        Violation("r7", old=(Observation("A", 1),), new=(Observation("B", 2),)),
    )
    assert verdict.violations[0].describe() == "r7: A@old(1) but B@new(2)"


def test_operators_outside_the_update_conflict_with_nothing() -> None:
    verdict = check_schedule(
        [
            update("A", 1, 2),
            process("r1", "Source", 1),
            process("r1", "Source", 9),  # versions of a non-updated operator are irrelevant
            process("r1", "A", 2),
            process("r2", "Sink", 4),
        ]
    )
    assert verdict.serializable


def test_a_fan_out_split_by_the_switch_is_a_violation() -> None:
    # A one-to-many operator emitted two tuples for r1; the switch landed between them.
    verdict = check_schedule([update("B", 3, 4), process("r1", "B", 3), process("r1", "B", 4)])
    assert [v.describe() for v in verdict.violations] == ["r1: B@old(3) but B@new(4)"]


def test_each_operator_of_a_multi_operator_update_has_its_own_versions() -> None:
    events: list[Event] = [update("A", 1, 2), update("B", 10, 20), update("C", 7, 3)]
    assert check_schedule([*events, process("r", "A", 2), process("r", "C", 3)]).serializable
    assert check_schedule([*events, process("r", "B", 10), process("r", "C", 7)]).serializable
    mixed = check_schedule([*events, process("r", "B", 20), process("r", "C", 7)])
    assert [v.describe() for v in mixed.violations] == ["r: C@old(7) but B@new(20)"]


def test_violations_come_in_order_of_first_appearance() -> None:
    events: list[Event] = [update("A", 1, 2), update("B", 1, 2)]
    for record in ["z", "a", "m"]:
        events += [process(record, "A", 1), process(record, "B", 2)]
    assert [v.record for v in check_schedule(events).violations] == ["z", "a", "m"]


def test_update_lines_may_come_after_the_process_lines() -> None:
    lines = as_lines(
        {"event": "process", "record": "r", "operator": "A", "version": 1},
        {"event": "process", "record": "r", "operator": "B", "version": 2},
        {"event": "update", "operator": "B", "from": 1, "to": 2},
        {"event": "update", "operator": "A", "from": 1, "to": 2},
    )
    assert not check_schedule(parse_schedule(lines)).serializable


def test_a_version_an_updated_operator_never_had_is_malformed_at_its_first_line() -> None:
    lines = as_lines(
        {"event": "process", "record": "r1", "operator": "A", "version": 1},
        {"event": "process", "record": "r2", "operator": "A", "version": 5},
        {"event": "process", "record": "r3", "operator": "A", "version": 5},
        {"event": "update", "operator": "A", "from": 1, "to": 2},
    )
    with pytest.raises(ScheduleError) as caught:
        check_schedule(parse_schedule(lines))
    assert caught.value.line == 2
    assert "never had version 5" in caught.value.reason


# --- several transactions in sequence -----------------------------------------------------


SEQUENTIAL: list[Event] = [
    update("A", 2, 3),
    update("B", 6, 7),
    update("A", 1, 2),
    update("B", 5, 6),
]


@pytest.mark.parametrize(
    ("a", "b", "serializable"),
    [(1, 5, True), (2, 6, True), (3, 7, True), (2, 7, False), (1, 6, False), (3, 5, False)],
)
def test_sequential_updates_without_labels_pair_up_by_step(
    a: int, b: int, serializable: bool
) -> None:
    verdict = check_schedule([*SEQUENTIAL, process("r", "A", a), process("r", "B", b)])
    assert verdict.serializable is serializable
    assert verdict.versions == {"A": (1, 2, 3), "B": (5, 6, 7)}


def test_a_record_spanning_three_versions_names_the_replaced_ones_as_old() -> None:
    events = [*SEQUENTIAL, process("r", "A", 1), process("r", "A", 2), process("r", "A", 3)]
    [violation] = check_schedule(events).violations
    assert violation.old == (Observation("A", 1), Observation("A", 2))
    assert violation.new == (Observation("A", 3),)


def test_labelled_transactions_on_disjoint_operators_keep_their_order() -> None:
    # txn 1 updates A, then txn 2 updates B: epochs are (A1,B5), (A2,B5), (A2,B6).
    updates: list[Event] = [update("B", 5, 6, txn=2), update("A", 1, 2, txn=1)]
    assert check_schedule([*updates, process("r", "A", 2), process("r", "B", 5)]).serializable
    late = check_schedule([*updates, process("r", "A", 1), process("r", "B", 6)])
    assert [v.describe() for v in late.violations] == ["r: A@old(1) but B@new(6)"]
    assert [t.txn for t in late.transactions] == [1, 2]


def test_labels_order_transactions_numerically_not_by_line() -> None:
    events: list[Event] = [update("A", 2, 3, txn=10), update("A", 1, 2, txn=9)]
    assert check_schedule(events).versions == {"A": (1, 2, 3)}


@pytest.mark.parametrize(
    ("updates", "line", "reason"),
    [
        ([update("A", 1, 1, line=1)], 1, "does not change its version"),
        ([update("A", 1, 2, line=1), update("A", 1, 3, line=2)], 2, "updated from version 1 twice"),
        ([update("A", 1, 3, line=1), update("A", 2, 3, line=2)], 2, "updated to version 3 twice"),
        ([update("A", 1, 2, line=1), update("A", 3, 4, line=2)], 2, "do not link into one chain"),
        ([update("A", 1, 2, line=1), update("A", 2, 1, line=2)], 1, "form a cycle"),
        (
            [update("A", 1, 2, line=1), update("A", 3, 4, line=2), update("A", 4, 3, line=3)],
            2,
            "form a cycle",
        ),
        (
            [update("A", 1, 2, line=1), update("A", 2, 3, line=2), update("B", 1, 2, line=3)],
            3,
            "ambiguous transactions",
        ),
        ([update("A", 1, 2, txn=1, line=1), update("B", 1, 2, line=2)], 2, "every update"),
        ([update("A", 1, 2, line=1), update("B", 1, 2, txn=1, line=2)], 2, "every update"),
        (
            [update("A", 1, 2, txn=1, line=1), update("A", 2, 3, txn=1, line=2)],
            2,
            "twice in txn 1",
        ),
        (
            [update("A", 1, 2, txn=1, line=1), update("A", 3, 4, txn=2, line=2)],
            2,
            "left it at version 2",
        ),
        (
            [update("A", 1, 2, txn=1, line=1), update("A", 2, 1, txn=2, line=2)],
            2,
            "returns to version 1",
        ),
    ],
)
def test_inconsistent_updates_are_malformed(updates: list[Event], line: int, reason: str) -> None:
    error = check_raises(updates)
    assert error.line == line
    assert reason in error.reason


def test_the_ambiguity_message_suggests_txn_labels() -> None:
    error = check_raises([update("A", 1, 2), update("A", 2, 3), update("B", 1, 2)])
    assert "'A' has 2 update(s) (1->2->3) but 'B' has 1 (1->2)" in error.reason
    assert "'txn'" in error.reason


# --- the precedence graph ---------------------------------------------------------------


def test_the_precedence_graph_of_the_papers_bad_schedule_has_a_cycle() -> None:
    events: list[Event] = [
        update("A", 1, 2),
        update("B", 1, 2),
        process("r7", "A", 1),
        process("r7", "B", 2),
    ]
    graph = precedence_graph(events)
    txn, record = TransactionNode(0), RecordNode("r7")
    assert graph == {txn: {record}, record: {txn}}
    assert not is_acyclic(graph)


def test_crossing_disjoint_transactions_closes_a_cycle_through_the_chain() -> None:
    graph = precedence_graph(CROSSED_DISJOINT)
    first, second, record = TransactionNode(0), TransactionNode(1), RecordNode("r")
    assert graph == {first: {second}, second: {record}, record: {first}}
    assert not is_acyclic(graph)
    assert not check_schedule(CROSSED_DISJOINT).serializable


def test_update_transactions_are_chained_in_order() -> None:
    graph = precedence_graph([update("A", 1, 2, txn=1), update("B", 1, 2, txn=2)])
    assert graph == {TransactionNode(0): {TransactionNode(1)}}
    assert is_acyclic(graph)


def fresh_version(history: list[int]) -> st.SearchStrategy[int]:
    """A version the operator has not had yet: versions never repeat in one history."""
    return st.integers(-1000, 1000).filter(lambda version: version not in history)


@st.composite
def schedules(draw: st.DrawFn) -> list[Event]:
    """Well-formed random schedules: labelled or not, several transactions, any line order."""
    operators = ["A", "B", "C"]
    labelled = draw(st.booleans())
    count = draw(st.integers(0, 3))
    labels: list[int | None]
    if labelled:
        unique_labels = st.lists(st.integers(-50, 50), min_size=count, max_size=count, unique=True)
        labels = [*sorted(draw(unique_labels))]
        covers = [draw(st.sets(st.sampled_from(operators), min_size=1)) for _ in labels]
    else:
        every = draw(st.sets(st.sampled_from(operators), min_size=1))
        labels, covers = [None] * count, [every] * count
    versions: dict[str, list[int]] = {}
    events: list[Event] = []
    for label, covered in zip(labels, covers, strict=True):
        for operator in sorted(covered):
            if operator not in versions:
                versions[operator] = [draw(st.integers(-1000, 1000))]
            history = versions[operator]
            new = draw(fresh_version(history))
            events.append(update(operator, history[-1], new, label))
            history.append(new)
    for record in range(draw(st.integers(0, 6))):
        for _ in range(draw(st.integers(1, 4))):
            # Mostly updated operators, where conflicts live; sometimes one nothing updates.
            anywhere = st.sampled_from([*operators, "S"])
            updated = st.sampled_from(sorted(versions)) if versions else anywhere
            operator = draw(updated | anywhere)
            state = None
            if operator in versions:
                version = draw(st.sampled_from(versions[operator]))
                # a keyed operator's state read: mostly at the function's version, as the
                # runtime brings it there, sometimes at another (old on transformed state)
                if draw(st.booleans()):
                    state = draw(st.sampled_from([version, *versions[operator]]))
            else:
                version = draw(st.integers(-5, 5))
            events.append(process(f"r{record}", operator, version, state=state))
    return draw(st.permutations(events))


# Random schedules rarely hit this one: transactions on disjoint operators, and a record that
# saw the later transaction's operator new but the earlier one's old. Only the chain edges
# between transactions make the graph reject it, as the epoch rule does.
CROSSED_DISJOINT: list[Event] = [
    update("B", 5, 6, txn=2),
    update("A", 1, 2, txn=1),
    process("r", "A", 1),
    process("r", "B", 6),
]


@settings(max_examples=400, deadline=None)
@given(schedules())
@example(CROSSED_DISJOINT)
def test_the_epoch_rule_and_the_precedence_graph_agree(events: list[Event]) -> None:
    verdict = check_schedule(events)
    graph = precedence_graph(events)
    assert verdict.serializable == is_acyclic(graph)
    # Per record too: a record is a violation iff it closes a cycle with the transactions.
    violating = {v.record for v in verdict.violations}
    transactions = {node for node in graph if isinstance(node, TransactionNode)}
    for node in graph:
        if isinstance(node, RecordNode):
            keep = {*transactions, node}
            subgraph = {n: graph[n] & keep for n in keep if n in graph}
            assert is_acyclic(subgraph) == (node.record not in violating)


def configurations(verdict: Verdict) -> list[dict[str, int]]:
    """Epoch k's configuration: every updated operator's version after k transactions."""
    epochs = [{operator: versions[0] for operator, versions in verdict.versions.items()}]
    for transaction in verdict.transactions:
        epochs.append({**epochs[-1], **{s.operator: s.to_version for s in transaction.steps}})
    return epochs


@settings(max_examples=200, deadline=None)
@given(schedules(), st.data())
def test_records_that_run_inside_one_epoch_are_always_serializable(
    events: list[Event], data: st.DataObject
) -> None:
    """Re-run every record inside one epoch, as an epoch-based scheduler would (Lemma 4.11)."""
    updates = [e for e in events if isinstance(e, UpdateEvent)]
    epochs = configurations(check_schedule(updates))
    epoch_of: dict[str, int] = {}
    serial: list[Event] = list(updates)
    for event in events:
        if isinstance(event, ProcessEvent):
            if event.record not in epoch_of:
                epoch_of[event.record] = data.draw(st.integers(0, len(epochs) - 1))
            version = epochs[epoch_of[event.record]].get(event.operator, event.version)
            serial.append(process(event.record, event.operator, version))
    assert check_schedule(serial).serializable


@given(schedules())
def test_the_verdict_does_not_depend_on_line_order_or_json_round_trips(events: list[Event]) -> None:
    def to_json(event: Event) -> str:
        if isinstance(event, UpdateEvent):
            labelled = {} if event.txn is None else {"txn": event.txn}
            fields = {
                "operator": event.operator,
                "from": event.from_version,
                "to": event.to_version,
            }
            return json.dumps({"event": "update", **fields, **labelled})
        fields = {"record": event.record, "operator": event.operator, "version": event.version}
        keyed = {} if event.state is None else {"state": event.state}
        return json.dumps({"event": "process", **fields, **keyed})

    direct = check_schedule(events)
    reparsed = check_schedule(parse_schedule(to_json(e) for e in reversed(events)))
    assert reparsed.transactions == direct.transactions
    assert set(reparsed.violations) == set(direct.violations)
    assert (reparsed.records, reparsed.process_events) == (direct.records, direct.process_events)


# --- keyed state ------------------------------------------------------------------------


def test_an_old_function_on_transformed_state_is_a_violation() -> None:
    """The mixed transaction of issue 10 section 2: the key's state was transformed by the
    update (a new-version row ran first), then an old-tagged row ran the old function on it."""
    verdict = check_schedule(
        [
            update("det", 1, 2),
            process("r1", "head", 1),
            process("r1", "det", 1, state=2),
        ]
    )
    assert [v.describe() for v in verdict.violations] == ["r1: det@old(1) but det.state@new(2)"]


def test_a_state_read_at_the_function_version_is_consistent() -> None:
    verdict = check_schedule(
        [
            update("det", 1, 2),
            update("head", 1, 2),
            process("old", "head", 1),
            process("old", "det", 1, state=1),
            process("new", "head", 2),
            process("new", "det", 2, state=2),
        ]
    )
    assert verdict.serializable


def test_a_state_read_is_judged_with_the_records_other_operators() -> None:
    """All-new at the head and the keyed operator, but the key's state still at the old
    version: the new function ran on untransformed state."""
    verdict = check_schedule(
        [
            update("det", 1, 2, txn=1),
            update("head", 1, 2, txn=1),
            process("r", "head", 2),
            process("r", "det", 2, state=1),
        ]
    )
    assert [v.describe() for v in verdict.violations] == [
        "r: det.state@old(1) but det@new(2), head@new(2)"
    ]


def test_state_parses_and_a_bad_state_is_named() -> None:
    line = '{"event": "process", "record": "r", "operator": "A", "version": 1, "state": 2}'
    assert parse_schedule([line]) == [ProcessEvent("r", "A", 1, 1, 2)]
    null = '{"event": "process", "record": "r", "operator": "A", "version": 1, "state": null}'
    assert parse_schedule([null]) == [ProcessEvent("r", "A", 1, 1)]
    with pytest.raises(ScheduleError, match="field 'state' must be an integer"):
        parse_schedule(
            ['{"event": "process", "record": "r", "operator": "A", "version": 1, "state": "2"}']
        )


def test_a_state_version_the_operator_never_had_is_malformed() -> None:
    error = check_raises([update("A", 1, 2), process("r", "A", 1, line=7, state=5)])
    assert (error.line, "never had version 5" in error.reason) == (7, True)


def test_a_large_schedule_is_checked_in_linear_time() -> None:
    lines = ['{"event": "update", "operator": "B", "from": 1, "to": 2}']
    for i in range(200_000):
        version = 1 if i < 100_000 else 2
        lines.append(
            f'{{"event": "process", "record": "r{i // 4}", "operator": "{"ABCD"[i % 4]}", '
            f'"version": {version}}}'
        )
    started = time.perf_counter()
    verdict = check_schedule(iter_events(lines))
    assert verdict.serializable
    assert verdict.records == 50_000
    assert time.perf_counter() - started < 10  # about 0.6 s; quadratic would be hours
