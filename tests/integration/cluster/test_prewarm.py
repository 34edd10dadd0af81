"""A prewarmed bin move on the 2-executor standalone cluster (docs/migration.md, "Prewarmed
moves: what Spark allows"): the bin's state is loaded on the target while the old owner
keeps serving it, the switch at a boundary hands that loaded provider to the bin, and the
bin's first batch on the target runs on it -- it is not reloaded from the checkpoint.

Own session (the helper jar in `spark.jars`, maintenance every second so that an eviction
of the prewarmed copy would show). Without the jar (no JDK at `make setup`) it skips, and
fails in CI (tests/prerequisites.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from swivel.controllers.assignments import bins_by_executor
from swivel.controllers.migration import Strategy, plan_migration
from swivel.jobs import spark_prewarm_answers
from swivel.jobs.jvm import jar_path, spark_jars
from swivel.jobs.migration.cluster import LocalCluster
from swivel.jobs.migration.executor import BinMover
from swivel.jobs.spark_internals import STORE_DEFAULT, SparkInternals
from swivel.jobs.spark_prewarm import RELEASED_EXECUTOR
from swivel_tools.bench.tws_workload import ROCKSDB_CONF, TransformWithStateWorkload
from swivel_tools.bench.workload import KeyedWorkload
from tests.integration.cluster.prewarm_support import (
    BINS,
    Boundary,
    assert_first_batch_on_the_loaded_copy,
    older_files,
    patiently,
    rocksdb_files,
    shadow_location,
)
from tests.prerequisites import require

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(420)]
require(
    None if jar_path() else "jobs/jvm/swivel-spark.jar (`make setup` builds it with javac)",
    "the prewarm test",
)


@pytest.fixture(scope="module")
def prewarm_spark(cluster: LocalCluster) -> Iterator[Any]:
    from pyspark import SparkContext

    conf = {
        "spark.jars": spark_jars() or "",
        "spark.sql.streaming.stateStore.maintenanceInterval": "1s",
        "spark.locality.wait": "30s",
    }
    try:
        # On a loaded machine the new driver's UI can miss the adapter's 10 s REST timeout
        # while the executors register; a second call finds the same session.
        session = patiently(
            lambda: cluster.session(
                executors=2, bins=BINS, app_name="swivel-prewarm-test", conf=conf
            )
        )
    except BaseException:
        if SparkContext._active_spark_context is not None:
            SparkContext._active_spark_context.stop()
        raise
    try:
        yield session
    finally:
        for query in session.streams.active:
            query.stop()
        session.stop()


def _rocksdb_session(spark: Any, settings: dict[str, str]) -> Any:
    """A new session of the module's: RocksDB with changelogs, a shuffle partition per bin,
    and `settings`."""
    session = spark.newSession()
    for key, value in {
        **ROCKSDB_CONF,
        "spark.sql.shuffle.partitions": str(BINS),
        **settings,
    }.items():
        session.conf.set(key, value)
    return session


def test_prewarmed_bin_switches_without_reload(
    prewarm_spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    internals = SparkInternals(prewarm_spark)
    prewarm = internals.prewarmer()
    assert prewarm.available()
    boundary = Boundary()
    workload = KeyedWorkload(prewarm_spark, tmp_path, bins=BINS, keys=4_000)
    workload.write_inputs(3)
    query = workload.start(boundary=boundary.wrap)
    workload.feed(ahead=2)  # more only lengthen `stop()`, which reads every file written
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    try:
        workload.wait_for_batch(2)
        run_id = str(query.runId)
        owned = bins_by_executor(internals.placement(query, BINS))
        hosts = {e.id: e.host for e in patiently(internals.executors)}
        owner = max(owned, key=lambda e: len(owned[e]))
        moved, control = owned[owner][:2]  # the prewarmed bin, and one moved the plain way
        target = next(e for e in hosts if e != owner)
        store = Path(workload.checkpoint) / "state" / "0" / str(moved)

        # 1. Load the bin on the target while the owner serves it (off the batch path). No
        #    poll job may answer, nor a read of its answer block: the load's job registered
        #    the target's endpoint, and the answer arrives over RPC.
        broadcasts = prewarm._helper().confBroadcasts  # the helper jobs' Hadoop-conf broadcasts
        before = broadcasts()
        updates_before = prewarm._helper().answerUpdates(internals.sc._jsc.sc())
        with monkeypatch.context() as patched:
            patched.setattr(spark_prewarm_answers, "PREWARM_POLL_S", 1e9)
            patched.setattr(spark_prewarm_answers, "PREWARM_FETCH_S", 1e9)
            loaded = internals.prewarm(query, [moved], target, hosts[target])
        assert [r["status"] for r in loaded] == ["loaded"], [r.get("error") for r in loaded]
        assert loaded[0].get("answered") == "rpc", loaded  # no block fetched by the driver
        # the driver's AnswerWatch saw the answer (it wakes the wait)
        assert prewarm._helper().answerUpdates(internals.sc._jsc.sc()) > updates_before
        assert loaded[0]["loader"] == "nice 10", loaded  # the batch's tasks win the core
        prewarm_version = int(loaded[0]["version"])
        # the load's job registered the target's endpoint: its next calls run no job
        helper = prewarm._helper()
        registered = list(helper.rpcExecutors(internals.sc._jsc.sc()))
        assert target in registered, registered
        # the helper's check (as after an attach) answers over RPC from each registered
        # executor, and names those without an endpoint
        expected = {
            e: "answered" if e in registered else "no helper endpoint registered" for e in hosts
        }
        assert prewarm.check(query) == expected, expected

        # 1b. An answer whose announcement is lost still arrives, by the poll (the
        #     control bin, whose copy is then released: it moves the plain way below).
        with monkeypatch.context() as patched:
            patched.setattr(spark_prewarm_answers, "PREWARM_POLL_S", 0.5)
            patched.setattr(spark_prewarm_answers, "_announced", lambda *_, **__: [])
            polled = internals.prewarm(query, [control], target, hosts[target])
        assert [r["status"] for r in polled] == ["loaded"], [r.get("error") for r in polled]
        assert polled[0].get("via") == "rpc", polled  # the load and the poll: no job
        #     A release naming another load (a timed-out step's, late) leaves this one's
        #     copy loaded; one naming this load drops it.
        stale = prewarm.release(query, [control], target, hosts[target], load_id="an-older-load")
        assert [r["status"] for r in stale] == ["superseded"], stale
        (kept,) = prewarm.probe(query, [control], target, hosts[target])
        assert kept["shadow_loaded"], kept
        #     A target whose endpoint the driver forgot (as after a failed ask) is called by
        #     a job again, whose task registers the endpoint anew.
        helper.forgetRpcEndpoint(target)
        (by_job,) = prewarm.probe(query, [control], target, hosts[target])
        assert by_job["shadow_loaded"] and "via" not in by_job, by_job
        assert target in list(helper.rpcExecutors(internals.sc._jsc.sc()))
        (by_rpc,) = prewarm.probe(query, [control], target, hosts[target])
        assert by_rpc.get("via") == "rpc", by_rpc
        released = prewarm.release(
            query, [control], target, hosts[target], load_id=polled[0]["load_id"]
        )
        assert [r["status"] for r in released] == ["released"], released
        # the helper's releaseShadows pointed the shadow id at no executor
        assert shadow_location(internals, query, control) == RELEASED_EXECUTOR

        # The helper calls so far (loads, a poll, releases, probes) shipped the
        # unchanged Hadoop conf as one broadcast, not each inside its tasks.
        assert broadcasts() - before <= 1, (before, broadcasts())
        unchanged = broadcasts()

        # 1c. A load released while it runs closes its own copy when it ends, and nothing
        #     else does: the driver does not point the shadow id away (patched out here),
        #     so the target's maintenance would keep a copy the load left. The load is held
        #     (the helper's failure switch: it waits while a file exists) until the release
        #     has answered, so the release finds it running whatever the machine's load.
        session = internals.query_session(query)
        orphan_id = spark_prewarm_answers.new_load_id()
        hold = tmp_path / "hold-the-load"
        hold.touch()
        with monkeypatch.context() as patched:
            patched.setattr(prewarm, "_release_shadows", lambda *_: None)
            session.conf().set("swivel.prewarm.test.holdWhileExists", str(hold))
            try:
                started = prewarm._run(
                    "load", query, [control], target, host=hosts[target],
                    stores=((0, STORE_DEFAULT),),
                    version=prewarm.committed_version(query), load_id=orphan_id,
                )  # fmt: skip
            finally:
                session.conf().unset("swivel.prewarm.test.holdWhileExists")
            assert [r["status"] for r in started] == ["loading"], started
            # a changed setting gets a new broadcast: the load is held only if it read it
            assert broadcasts() == unchanged + 1, (unchanged, broadcasts())
            time.sleep(0.5)  # the loader thread has taken it up (it is held there)
            try:
                dropped = prewarm.release(
                    query, [control], target, hosts[target], load_id=orphan_id
                )
            finally:
                hold.unlink()
            assert [r["status"] for r in dropped] == ["releasing"], dropped  # not waited for
            # The loader thread runs loads in order: once a later load has answered (the
            # prewarmed bin's again, topped up to now), the released one has ended.
            again = internals.prewarm(query, [moved], target, hosts[target])
            assert [r["status"] for r in again] == ["loaded"], again
            prewarm_version = int(again[0]["version"])
        (orphan,) = prewarm.probe(query, [control], target, hosts[target])
        assert not orphan["shadow_loaded"], orphan  # it closed its own copy

        # 1d. An ask that fails (the endpoints' failure switch) is answered by a job, which
        #     says why; the driver forgets the endpoint until that job's task registers it.
        session.conf().set("swivel.prewarm.test.failRpc", "true")
        try:
            (refused,) = prewarm.probe(query, [moved], target, hosts[target])
        finally:
            session.conf().unset("swivel.prewarm.test.failRpc")
        assert "refused by swivel.prewarm.test.failRpc" in refused.get("rpc_failed", ""), refused
        assert refused["shadow_loaded"] and "via" not in refused, refused
        assert target in list(helper.rpcExecutors(internals.sc._jsc.sc()))

        # 1e. A load whose answer message is lost (the loads' failure switch: none is sent)
        #     is answered by its block, read at the next fetch tick.
        session.conf().set("swivel.prewarm.test.dropRpcAnswers", "true")
        try:
            with monkeypatch.context() as patched:
                patched.setattr(spark_prewarm_answers, "PREWARM_POLL_S", 1e9)
                patched.setattr(spark_prewarm_answers, "PREWARM_FETCH_S", 0.5)
                by_block = internals.prewarm(query, [control], target, hosts[target])
        finally:
            session.conf().unset("swivel.prewarm.test.dropRpcAnswers")
        assert [(r["status"], r.get("answered")) for r in by_block] == [("loaded", "block")], (
            by_block
        )
        released = prewarm.release(
            query, [control], target, hosts[target], load_id=by_block[0]["load_id"]
        )
        assert [r["status"] for r in released] == ["released"], released

        # 2. The owner keeps serving it; the copy on the target survives the target's own
        #    state-store tasks and maintenance (every 1 s); the coordinator did not move.
        after = workload.batches_done() + 2
        workload.wait_for_batch(after)
        assert patiently(lambda: internals.served_by(run_id, after, BINS))[moved] == owner
        assert internals.location(query, moved) == owner
        (held,) = prewarm.probe(query, [moved], target, hosts[target])
        assert held["shadow_loaded"] and not held["loaded"], held

        # 3. Switch at a boundary; the control bin moves the plain way at the same one. The
        #    bin's files up to the prewarmed version are moved away first: a reload from
        #    the checkpoint would fail, the prewarmed provider needs only the later deltas.
        def switch() -> list[dict[str, Any]]:
            for path in older_files(store, prewarm_version):
                path.rename(hidden / path.name)
            results = internals.switch_prewarmed(query, [(moved, target, hosts[target])])
            internals.set_location(query, control, target, hosts[target])
            return results

        switched_at = boundary.at_next("switch", switch)
        activated = boundary.done["switch"][1]
        assert [(r["status"], r["provider_id_fixed"]) for r in activated] == [("activated", True)]
        assert activated[0].get("via") == "rpc", activated  # no job on the boundary
        # ... and the switch pointed the bin's shadow id at no executor (switchStep's release)
        assert shadow_location(internals, query, moved) == RELEASED_EXECUTOR
        first = switched_at + 1
        workload.wait_for_batch(first)
        assert query.exception() is None
        served = patiently(lambda: internals.served_by(run_id, first, BINS, timeout=30.0))
        assert served[moved] == target and served[control] == target, served
        attempts = [
            t
            for t in patiently(lambda: internals.batch_tasks_all(run_id, first, BINS))
            if t.partition == moved
        ]
        assert [(t.executor, t.status) for t in attempts] == [(target, "SUCCESS")], attempts
        for path in hidden.iterdir():
            path.rename(store / path.name)
        workload.wait_for_batch(first + 1)

        # 4. Its first batch on the target ran on the prewarmed provider (the same object).
        probed, tasks = assert_first_batch_on_the_loaded_copy(
            internals, query, (moved, control), target, first
        )
        print(
            f"prewarm {loaded[0]['load_ms']:.0f} ms at version {prewarm_version}; switch at "
            f"boundary {switched_at} ({switched_at + 1 - prewarm_version} delta(s) to catch "
            f"up); first batch on the target: prewarmed bin {tasks[moved].duration_ms:.0f} "
            f"ms, control bin {tasks[control].duration_ms:.0f} ms; probe {probed}"
        )
    finally:
        for path in hidden.iterdir():  # put back whatever a failure left hidden
            path.rename(Path(workload.checkpoint) / "state" / "0" / str(moved) / path.name)
        workload.stop()
    assert workload.state_counts() == workload.reference(workload.processed_files())


def test_the_helper_registry_takes_only_a_live_executors_endpoint(prewarm_spark: Any) -> None:
    """The driver's registry (HelperRpc) is reachable by whoever speaks Spark's RPC to the
    driver: a message that is not a registration, or one for an executor that is not live,
    or of an endpoint not the helper's, is refused with a failure naming why, and changes
    nothing; so is an answer that is not one. An executor's endpoint refuses what is not a
    call the same way."""
    internals = SparkInternals(prewarm_spark)
    helper = internals.prewarmer()._helper()
    sc = internals.sc._jsc.sc()
    internals.prewarmer().register_endpoints()  # every live executor's, as after an attach
    before = list(helper.rpcExecutors(sc))
    live = str(patiently(internals.executors)[0].id)
    assert live in before, before

    def refusal(tag: str, executor: str, with_ref: bool) -> str:
        return str(helper.askRpcRegistry(sc, tag, executor, with_ref))

    assert "not a swivel-register" in refusal("hello", live, True)
    assert "not a swivel-register" in refusal("swivel-register", live, False)  # no endpoint
    assert "no live executor no-such-executor" in refusal(
        "swivel-register", "no-such-executor", True
    )
    assert "not named swivel-prewarm-calls" in refusal("swivel-register", live, True)
    # a load's answer (HelperRpc.ANSWER) is refused unless it is one, from a live
    # executor with an endpoint here, named as an answer block, and a small JSON object
    assert "not a swivel-answer" in refusal("swivel-answer", live, True)

    def answer_refusal(executor: str, block: str, answer: str) -> str:
        message = ["swivel-answer", executor, block, answer]
        return str(helper.askRpcRegistryMessage(sc, message))

    block = "test_swivel-prewarm-00000000-0000-3000-8000-000000000000"
    assert "with an endpoint here" in answer_refusal("no-such-executor", block, "{}")
    assert "not an answer block" in answer_refusal(live, "rdd_0_0", "{}")
    assert "not a JSON object" in answer_refusal(live, block, "[1]")
    assert "not a JSON object" in answer_refusal(live, block, "{" + "x" * 9000 + "}")
    assert list(helper.rpcExecutors(sc)) == before  # nothing registered, nothing dropped

    # an executor's endpoint (HelperEndpoint.Calls) refuses what is not a call, naming why
    def call_refusal(message: Any) -> str:
        return str(helper.askRpcEndpointMessage(sc, live, message))

    assert "not a list" in call_refusal("hello")
    assert "not a swivel-call of 14 fields" in call_refusal(["swivel-call"])
    assert "field 1 is not a StateStoreConf" in call_refusal(["swivel-call"] + ["x"] * 13)

    # a call of the right shape and types that names another provider class (a call
    # instantiates it) or a target that is not "partition\texecutorId", or too many of them
    jvm = prewarm_spark._jvm
    hadoop_conf = internals.sc._jsc.broadcast(
        jvm.org.apache.spark.util.SerializableConfiguration(internals.sc._jsc.hadoopConfiguration())
    )

    def call(
        provider: str,
        targets: list[str],
        action: str = "probe",
        run_id: str = "6f1c2b0e-1a2b-4c3d-8e9f-0a1b2c3d4e5f",
    ) -> list[Any]:
        conf = prewarm_spark._jsparkSession.sessionState().conf().clone()
        conf.setConfString("spark.sql.streaming.stateStore.providerClass", provider)
        store_conf = jvm.org.apache.spark.sql.execution.streaming.state.StateStoreConf.apply(conf)
        long_id = 2**31  # py4j hands a Python int this large to Java as a Long, not an Integer
        return [
            "swivel-call",
            store_conf,
            hadoop_conf,
            action,
            "/nowhere/state",
            long_id,
            "default",
            run_id,
            "load",
            long_id,
            "",
            "",
            False,
            targets,
        ]

    hdfs = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
    assert call_refusal(call(hdfs, [f"0\t{live}"])) == "answered"  # well formed: it runs
    assert "provider org.example.Evil is not one of" in call_refusal(
        call("org.example.Evil", [f"0\t{live}"])
    )
    assert "action format-disk is not one of" in call_refusal(
        call(hdfs, [f"0\t{live}"], action="format-disk")
    )
    assert "run id ../../etc is not a UUID" in call_refusal(
        call(hdfs, [f"0\t{live}"], run_id="../../etc")
    )
    for target in ("0", f"zero\t{live}", f"0\t{live}\textra", "1234567890\t1"):
        assert "a target is not" in call_refusal(call(hdfs, [target])), target
    assert "4097 targets, over 4096" in call_refusal(call(hdfs, [f"0\t{live}"] * 4097))
    assert list(helper.rpcExecutors(sc)) == before  # a refusal forgets no endpoint


@pytest.mark.parametrize("in_place", [True, False], ids=["replayed", "reopened"])
def test_binmover_prewarms_a_transform_with_state_bin_ahead_of_its_switch(
    prewarm_spark: Any, tmp_path: Path, in_place: bool
) -> None:
    """The product path for Swivel's own kind of operator (transformWithState on RocksDB with
    changelog checkpointing): `BinMover.submit(plan, prewarm=True)` loads the bin on its
    target while the owner serves it, and switches it at the first boundary after, topped up
    to the version the next batch reads. Right after that switch every checkpoint file of the
    bin is moved away: its first batch on the target runs on the loaded copy, or it fails. A
    control bin re-pointed plainly at the same boundary reloads from the checkpoint. The
    switch tops the copy up in place; with the helper's failure switch set it falls back to
    Spark's reopening load, and both hand over the same state."""
    session = _rocksdb_session(
        prewarm_spark,
        {
            "spark.sql.streaming.stateStore.minDeltasForSnapshot": "100",
            "swivel.prewarm.test.refuseReplay": str(not in_place).lower(),
        },
    )
    internals = SparkInternals(session)
    mover = BinMover(session, BINS, internals=internals)
    # a pandas call per key and batch: few keys and rows keep its batches short
    workload = TransformWithStateWorkload(
        session, tmp_path, bins=BINS, keys=400, rows_per_batch=200
    )
    workload.write_inputs(3)
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    moved_away: list[tuple[Path, Path]] = []
    watch: dict[str, Any] = {}

    def after_switch(write: Callable[[Any, int], None]) -> Callable[[Any, int], None]:
        inner = mover.wrap(write)

        def run(frame: Any, batch_id: int) -> None:
            inner(frame, batch_id)  # the BinMover's boundary: it may switch the bin now
            migration = watch.get("migration")
            if migration is None or "switched_at" in watch or not migration.step_batches:
                return
            watch["switched_at"] = batch_id
            control, target, host = watch["control"]
            internals.set_location(workload.query, control, target, host)
            for path in rocksdb_files(watch["store"], batch_id + 1):
                parked = hidden / "-".join(path.relative_to(watch["store"]).parts)
                path.rename(parked)
                moved_away.append((parked, path))

        return run

    query = workload.start(boundary=after_switch)
    # attaching sets up every executor's helper endpoint, in the background (an earlier test
    # of this session registered them: forgotten first)
    helper, sc = internals.prewarmer()._helper(), internals.sc._jsc.sc()
    executors = {e.id for e in patiently(internals.executors)}
    for executor in executors:
        helper.forgetRpcEndpoint(executor)
    mover.attach(query)
    workload.feed(ahead=2)
    deadline = time.monotonic() + 60.0
    while not executors <= set(helper.rpcExecutors(sc)):
        assert time.monotonic() < deadline, (executors, list(helper.rpcExecutors(sc)))
        time.sleep(0.5)
    # ... and, once a batch committed, made one round trip to each over RPC
    while mover.helper_check is None:
        assert time.monotonic() < deadline + 60.0, "no helper check after attach"
        time.sleep(0.5)
    assert mover.helper_check == dict.fromkeys(executors, "answered"), mover.helper_check
    try:
        workload.wait_for_batch(2)
        assert internals.prewarmer().refusal(query) is None
        run_id = str(query.runId)
        current = mover.current_assignment()
        owned = bins_by_executor(current)
        owner = max(owned, key=lambda e: len(owned[e]))
        moved, control = owned[owner][:2]
        target = next(e for e in owned if e != owner) if len(owned) > 1 else None
        target = target or next(e for e in mover.executors() if e != owner)
        watch["store"] = Path(workload.checkpoint) / "state" / "0" / str(moved)
        watch["control"] = (control, target, internals.executor_host(target))
        plan = plan_migration(current, {**current, moved: target}, Strategy.FLUID)
        migration = watch["migration"] = mover.submit(plan, prewarm=True)
        mover.wait(migration, 240)
        assert migration.phase == "Completed", migration.to_dict()
        assert (migration.prewarmed, migration.prewarm_fallback) == ({moved}, ""), migration
        # the switch topped the copy up in place: it replayed only the changelogs of the
        # versions it missed, without reopening the database (ChangelogCatchUp); or, with
        # the failure switch, reopened it as Spark's own load does
        [topup] = migration.topups
        wanted = ("replayed ", "current") if in_place else ("reopened: refused by swivel.",)
        assert topup["how"] and all(how.startswith(wanted) for how in topup["how"]), topup
        assert moved_away, "no checkpoint file of the bin was found to move away"
        first = watch["switched_at"] + 1
        workload.wait_for_batch(first)
        assert query.exception() is None
        attempts = [
            t
            for t in patiently(lambda: internals.batch_tasks_all(run_id, first, BINS))
            if t.partition == moved
        ]
        assert [(t.executor, t.status) for t in attempts] == [(target, "SUCCESS")], attempts
        for parked, path in moved_away:
            path.parent.mkdir(parents=True, exist_ok=True)
            parked.rename(path)
        moved_away.clear()
        workload.wait_for_batch(first + 1)

        _, tasks = assert_first_batch_on_the_loaded_copy(
            internals, query, (moved, control), target, first
        )
        print(
            f"switched after batch {first - 1} (submitted at {migration.first_batch}); first "
            f"batch on the target: prewarmed bin {tasks[moved].duration_ms:.0f} ms, control "
            f"bin {tasks[control].duration_ms:.0f} ms; report {migration.to_dict()['binsPrewarmed']}"
        )
    finally:
        for parked, path in moved_away:  # put back whatever a failure left moved away
            path.parent.mkdir(parents=True, exist_ok=True)
            parked.rename(path)
        workload.stop()
        mover.close()
    assert workload.state_counts() == workload.reference(workload.processed_files())


def test_a_loaded_copy_follows_the_committed_versions_until_its_switch(
    prewarm_spark: Any, tmp_path: Path
) -> None:
    """While a prewarmed RocksDB copy waits for its switch, the target's follower thread
    replays into it each version whose batch is in the commit log (ChangelogFollower), and
    never one that is not: at a boundary the batch has written its version's changelog but
    not its commit, and the copy stays a version short of it, however long the boundary
    lasts. The switch then replays that one version; the copy serves the bin's first batch
    on the target, and the state equals the reference."""
    session = _rocksdb_session(
        prewarm_spark, {"spark.sql.streaming.stateStore.minDeltasForSnapshot": "100"}
    )
    internals = SparkInternals(session)
    prewarm = internals.prewarmer()
    boundary = Boundary()
    workload = TransformWithStateWorkload(
        session, tmp_path, bins=BINS, keys=400, rows_per_batch=200
    )
    workload.write_inputs(3)
    query = workload.start(boundary=boundary.wrap)
    workload.feed(ahead=2)
    try:
        workload.wait_for_batch(2)
        stores = internals.state_stores(query)
        owned = bins_by_executor(internals.placement(query, BINS))
        hosts = {e.id: e.host for e in patiently(internals.executors)}
        owner = max(owned, key=lambda e: len(owned[e]))
        moved, control = owned[owner][:2]
        target = next(e for e in hosts if e != owner)
        loaded = internals.prewarm(query, [moved], target, hosts[target], stores)
        assert {r["status"] for r in loaded} == {"loaded"}, loaded
        # the load replayed what was committed while it loaded, and is followed from there
        assert all(int(r["caught_up"]) >= 0 for r in loaded), loaded
        loaded_at = min(int(r["version"]) for r in loaded)

        def copy_when_caught_up(batch_id: int) -> list[dict[str, Any]]:
            """At the boundary after `batch_id`: the copies once they hold version
            `batch_id` (batch `batch_id - 1` is committed), or after 10 s; then 1 s more, in
            which a follower that did not wait for the commit log would replay `batch_id + 1`
            (its changelog is written)."""
            deadline = time.monotonic() + 10.0
            while True:
                probed = prewarm.probe(query, [moved], target, hosts[target], stores=stores)
                if time.monotonic() > deadline or all(
                    p["shadow_version"] >= batch_id for p in probed
                ):
                    break
                time.sleep(0.2)
            time.sleep(1.0)
            return prewarm.probe(query, [moved], target, hosts[target], stores=stores)

        for sample in range(3):
            at = boundary.at_next(
                f"sample-{sample}", lambda: copy_when_caught_up(boundary.batch_id)
            )
            probed = boundary.done[f"sample-{sample}"][1]
            for copy in probed:
                assert copy["shadow_loaded"] and not copy["loaded"], copy
                assert copy["follower"] == "nice 10", copy
                assert copy["follow_stopped"] == "", copy  # still followed
                assert copy["shadow_version"] == at, (at, copy)  # caught up, not ahead
                assert copy["followed"] == at - loaded_at, (at, loaded_at, copy)

        def switch() -> list[dict[str, Any]]:
            at = boundary.batch_id
            copy_when_caught_up(at)
            results = internals.switch_prewarmed(
                query, [(moved, target, hosts[target])], stores, version=at + 1
            )
            internals.set_location(query, control, target, hosts[target], stores)
            return results

        switched_at = boundary.at_next("switch", switch)
        activated = boundary.done["switch"][1]
        for answer in activated:
            assert answer["status"] == "activated", answer
            assert answer["topup"] == "replayed 1", answer  # the follower did the rest
            assert answer["followed"] == switched_at - loaded_at, (switched_at, answer)
            assert answer["follow_stopped"] == "switched", answer
        first = switched_at + 1
        workload.wait_for_batch(first + 1)
        assert query.exception() is None
        probed, _ = assert_first_batch_on_the_loaded_copy(
            internals, query, (moved, control), target, first
        )
        assert probed[moved]["follow_stopped"] == "not followed", probed[moved]
    finally:
        workload.stop()
    assert workload.state_counts() == workload.reference(workload.processed_files())


def _oldest_snapshot(store: Path) -> int:
    """The oldest `<v>.zip` (or `<v>_<id>.zip`) of a RocksDB bin's checkpoint folder; 0: none."""
    stems = (path.name.split(".", 1)[0].split("_", 1)[0] for path in store.glob("*.zip"))
    return min((int(stem) for stem in stems if stem.isdigit()), default=0)


def test_a_loaded_copy_knows_the_oldest_version_its_bin_keeps(
    prewarm_spark: Any, tmp_path: Path
) -> None:
    """Spark's maintenance lists a RocksDB bin's whole checkpoint folder on each pass until
    its file manager knows the oldest version kept, which it learns only from a pass that
    deleted something (`ProviderInternals.setCleanupFloor`). A copy of a bin whose owner has
    already deleted its old versions would learn nothing and list on every pass. The load
    tells the copy's file manager the folder's oldest snapshot: the probe reads it there."""
    session = _rocksdb_session(
        prewarm_spark,
        {
            "spark.sql.streaming.stateStore.minDeltasForSnapshot": "1",
            "spark.sql.streaming.minBatchesToRetain": "2",
        },
    )
    internals = SparkInternals(session)
    prewarm = internals.prewarmer()
    workload = KeyedWorkload(session, tmp_path, bins=BINS, keys=400)
    workload.write_inputs(8)  # and no more: the query then idles, its folder settles
    query = workload.start()
    try:
        workload.wait_for_batch(7)
        owned = bins_by_executor(internals.placement(query, BINS))
        hosts = {e.id: e.host for e in patiently(internals.executors)}
        owner = max(owned, key=lambda e: len(owned[e]))
        moved = owned[owner][0]
        target = next(e for e in hosts if e != owner)
        store = Path(workload.checkpoint) / "state" / "0" / str(moved)
        # the owner's maintenance (every second here) deletes the versions beyond the two
        # kept: wait until the oldest snapshot is past 1 and has stayed put for 3 passes
        deadline, seen, since = time.monotonic() + 60.0, -1, time.monotonic()
        while True:
            oldest = _oldest_snapshot(store)
            if oldest != seen:
                seen, since = oldest, time.monotonic()
            if oldest > 1 and time.monotonic() - since > 3.0:
                break
            assert time.monotonic() < deadline, (oldest, sorted(p.name for p in store.iterdir()))
            time.sleep(0.5)
        loaded = internals.prewarm(query, [moved], target, hosts[target])
        assert [r["status"] for r in loaded] == ["loaded"], loaded
        assert loaded[0]["cleanup_floor"] == oldest, (loaded, oldest)
        (probed,) = prewarm.probe(query, [moved], target, hosts[target])
        assert probed["shadow_loaded"] and probed["shadow_cleanup_floor"] == oldest, probed
        released = prewarm.release(
            query, [moved], target, hosts[target], load_id=loaded[0]["load_id"]
        )
        assert [r["status"] for r in released] == ["released"], released
    finally:
        workload.stop()
