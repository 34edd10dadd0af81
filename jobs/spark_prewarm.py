"""Prewarmed bin moves: load a bin's state on its target executor while the old owner still
serves it, then switch at a boundary so the switching batch loads only the versions
committed since (docs/migration.md, "Prewarmed moves: what Spark allows").

Part of the Spark adapter (`SparkInternals`, same version check: Spark 4.3.x). The work
on the executors is done by a small Java class, `io.swivel.spark.StatePrewarm`
(jobs/jvm/src/...), compiled at install time into jobs/jvm/swivel-spark.jar and shipped
with `spark.jars` or attached by `StatePrewarm` to the running application when the jar
is built; without it `available()` is False and callers move bins the plain way.

    prewarm = StatePrewarm(internals)
    prewarm.prewarm(query, bins, target, host)   # off the batch path: loads on target's
                                                 # loader thread, holding no task slot
    ...                                          # the old owner keeps serving the bins
    prewarm.switch(query, [(bin, target, host)]) # at a boundary (inside foreachBatch)

What Spark allows (and therefore how): a provider loaded on an executor under the query's
own provider id reports itself to the StateStoreCoordinator as the bin's active instance
(StateStore.getStateStoreProvider), and a provider that is not the active instance is
evicted by the executor's next state-store task or by maintenance. So the prewarm loads
the bin under a *shadow* provider id (same StateStoreId, hence the same checkpoint files;
another queryRunId, which the scheduler never asks about), and `switch` re-points the real
id and re-keys the loaded provider to it on the target (one job for the step, a task per
bin on its target).
Stores of both kinds are supported: single-column-family stores (schema files v1/v2:
streaming aggregations, dedup, (flat)mapGroupsWithState, applyInPandasWithState), whose
schemas are read from the checkpoint, and transformWithState's column-family stores (schema
v3, Swivel's keyed operators), opened as the operator opens them. On RocksDB a loaded
database is reused only at the exact version a task asks for, so `switch` first tops the
copy up to the version the next batch reads (in the same task on the target: it replays the
changelogs of the versions since its load into the open database, `ChangelogCatchUp`;
where it cannot, Spark's own load reopens it). `refusal()` names the settings
under which no prewarm is safe; callers then move bins the plain way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from swivel.jobs.spark_helper_jar import HelperUnavailableError, helper_class, java_list
from swivel.jobs.spark_internals import STORE_DEFAULT, SparkInternals
from swivel.jobs.spark_prewarm_answers import AnswerWait, new_load_id
from swivel.jobs.spark_prewarm_context import (
    JobContext,
    StoreSchemas,
    job_context,
    settings_refusal,
)
from swivel.protocol.bodies import ANSWERED

HELPER_CLASS = "io.swivel.spark.StatePrewarm"
HELPER_API = 14
# where the helper's `releaseShadows` points a released shadow id (StatePrewarm.RELEASED_EXECUTOR)
RELEASED_EXECUTOR = "swivel-released"


class PrewarmUnavailableError(HelperUnavailableError):
    """The prewarm helper is not loadable (jar not built or not in `spark.jars`), or it
    speaks another API version."""


class StatePrewarm:
    """Bound to one SparkInternals (its session and version check)."""

    def __init__(self, internals: SparkInternals) -> None:
        self.internals = internals
        self._schemas = StoreSchemas(internals)

    # -- availability ---------------------------------------------------------------------

    def _helper(self) -> Any:
        return helper_class(self.internals, HELPER_CLASS, HELPER_API, PrewarmUnavailableError)

    def refusal(self, query: Any) -> str | None:
        """Why no bin of `query` may be prewarmed under its session's settings, or None."""
        return settings_refusal(self.internals, query)

    def available(self) -> bool:
        """Whether the helper can run (attaching the built jar when needed)."""
        try:
            self._helper()
        except PrewarmUnavailableError:
            return False
        return True

    # -- the three steps --------------------------------------------------------------------

    def prewarm(
        self,
        query: Any,
        bins: Iterable[int],
        target: str,
        host: str,
        *,
        stores: Sequence[tuple[int, str]] = ((0, STORE_DEFAULT),),
        version: int | None = None,
        timeout_s: float | None = None,
        load_id: str | None = None,
    ) -> list[dict[str, Any]]:
        """Load `bins` (every store) on executor `target` at state `version` (default: the
        last committed one) under their shadow ids. The loads run on the executor's loader
        thread, not in a task (over Spark's RPC where the target's helper endpoint is
        registered, else from a task that only starts them), and each load sends its answer
        back without a Spark job (`spark_prewarm_answers.AnswerWait`); so the query's tasks
        keep every slot while a bin downloads. A poll job every `PREWARM_POLL_S` catches an
        answer whose message and block were both lost. Blocks until every
        load has answered (call it from a thread, not from a batch); raises when they have
        not after `timeout_s` (None: `PREWARM_TIMEOUT_S`), or when `target`'s block manager
        has been gone for `PREWARM_LOST_S` (the executor is lost). Per bin and store:
        `status` (`loaded`, `already-loaded` when the target holds the real provider,
        `wrong-executor`, `failed`, `no-load` when the target lost the load, `superseded`
        when another load of the bin replaced it), `load_ms`. `load_id` names this load
        (default: a new one); `release` takes it, so that it drops this load and no later
        one."""
        bins = list(bins)
        if version is None:
            version = self.committed_version(query)
        load_id = load_id or new_load_id()  # no other load's answers can pass for this one's
        helper = self._helper()  # resolved once: the loop below may read many times
        sc = self.internals.sc._jsc.sc()
        # read before the loads start: an answer announced before the first wait wakes it
        seen = helper.answerUpdates(sc)
        started = self._run(
            "load", query, bins, target, host=host, stores=stores, version=version, load_id=load_id
        )

        def poll(waiting: list[int]) -> list[dict[str, Any]]:
            return self._run(
                "poll", query, waiting, target, host=host, stores=stores, load_id=load_id
            )

        wait = AnswerWait(
            helper,
            sc,
            target=target,
            root=self.internals.state_root(query),
            run_id=str(query.runId),
            stores=stores,
            load_id=load_id,
            poll=poll,
        )
        return wait.until_answered(started, seen, timeout_s)

    def switch(
        self,
        query: Any,
        moves: Sequence[tuple[int, str, str]],
        *,
        stores: Sequence[tuple[int, str]] = ((0, STORE_DEFAULT),),
        version: int | None = None,
    ) -> list[dict[str, Any]]:
        """At a boundary: point each bin of `moves` (bin, target executor, its host) at its
        target (as `set_location`) and hand each prewarmed provider to the real id on the
        target (`activated`; `no-shadow` when it was never loaded or was evicted: the bin
        then reloads in its batch as without prewarm). `version` is the one the next batch
        reads (the boundary after batch b: b + 1; default: the last progress's); a RocksDB
        copy is topped up to it first. One Spark job for all targets, one task per bin on
        its target: the boundary is on the batch path, and every target tops up at once.
        The re-pointing, the job and the shadows' release are one call into the helper
        (`switchStep`): from here each bin's re-pointing took a dozen py4j round trips."""
        moves = list(moves)
        if not moves:
            return []
        if version is None:
            version = self.committed_version(query)
        try:
            job = self._job_context(query)
            store_specs = []
            for operator, store in stores:
                key_json, value_json, column_families = self._schema(job, operator, store)
                families = "true" if column_families else "false"  # Boolean.parseBoolean
                store_specs.append(
                    "\t".join((str(operator), store, key_json, value_json, families))
                )
            coordinator = self.internals._coordinator()
        except Exception:  # switchStep never ran: no shadow copy may stay active anywhere
            self._release_shadows(query, [bin_id for bin_id, _, _ in moves], stores)
            raise
        answers = job.helper.switchStep(
            self.internals.sc._jsc.sc(),
            job.state.conf(),
            job.hadoop_conf,
            coordinator,
            [f"{b}\t{executor}\t{host}" for b, executor, host in moves],
            store_specs,
            job.root,
            job.run_id,
            version,
        )
        return [json.loads(str(a)) for a in java_list(answers)]

    def release(
        self,
        query: Any,
        bins: Iterable[int],
        target: str,
        host: str,
        *,
        stores: Sequence[tuple[int, str]] = ((0, STORE_DEFAULT),),
        load_id: str,
    ) -> list[dict[str, Any]]:
        """Drop the copies that load `load_id` made and that will not be switched (a
        cancelled step). A bin whose load is by now another one (a later step's) keeps it:
        it answers `superseded`, and its shadow id stays where that load reported it. A
        load still running closes its own copy when it ends (`releasing`); its shadow id is
        not pointed away before, or the target's maintenance could close the copy while it
        loads. Shadow ids are one per bin and store: a bin any of whose stores answered
        either keeps them all where they are."""
        bins = list(bins)
        results = self._run(
            "release", query, bins, target, host=host, stores=stores, load_id=load_id
        )
        kept = {
            int(r["partition"]) for r in results if r.get("status") in ("superseded", "releasing")
        }
        self._release_shadows(query, [b for b in bins if b not in kept], stores)
        return results

    def probe(
        self,
        query: Any,
        bins: Iterable[int],
        executor: str,
        host: str,
        *,
        stores: Sequence[tuple[int, str]] = ((0, STORE_DEFAULT),),
    ) -> list[dict[str, Any]]:
        """What `executor` holds for `bins`: `loaded`, `prewarmed_provider` (the provider
        object serving the real id is the one a prewarm loaded), `shadow_loaded`, and for
        the HDFS-backed store its cache counters and `loaded_versions`."""
        return self._run("probe", query, bins, executor, host=host, stores=stores)

    def register_endpoints(self) -> dict[str, str]:
        """Set up the helper endpoint of each live executor that has none registered yet,
        in one job of a task per executor: a migration's first steps then run no helper
        job either, their calls go over Spark's RPC (HelperRpc.java). An executor that
        joins later registers with its first helper job. Executor id -> its state
        (`registered`, or why not)."""
        helper = self._helper()
        known = {str(e) for e in java_list(helper.rpcExecutors(self.internals.sc._jsc.sc()))}
        wanted = [
            f"{e.id}\t{e.host}"
            for e in self.internals.executors()
            if e.active and e.id not in known
        ]
        if not wanted:
            return {}
        answers = helper.registerEndpoints(self.internals.sc._jsc.sc(), wanted)
        return dict(str(a).split("\t", 1) for a in java_list(answers))

    def check(self, query: Any) -> dict[str, str]:
        """One round trip of the helper's before any migration: each store's schema read
        (kept for the loads) and a probe of one bin on every executor whose endpoint is
        registered (over RPC, as a step's calls go). It tells at start whether the helper
        answers, not at the first prewarmed migration (docs/migration.md, "Answers over
        RPC"). Live executor id -> `answered` or why not."""
        stores = self.internals.state_stores(query) or [(0, STORE_DEFAULT)]
        job = self._job_context(query)
        for operator, store in stores:
            self._schema(job, operator, store)
        helper, sc = job.helper, self.internals.sc._jsc.sc()
        executors = {str(e) for e in java_list(helper.rpcExecutors(sc))}
        live = [e for e in self.internals.executors() if e.active]
        states = {e.id: "no helper endpoint registered" for e in live if e.id not in executors}
        placed = [(0, e.id, e.host) for e in live if e.id in executors]
        for result in self._run_placed("probe", query, placed, stores=stores):
            executor = str(result.get("executor"))
            if result.get("via") != "rpc" or "error" in result:
                states.setdefault(executor, str(result.get("rpc_failed") or result))
            states.setdefault(executor, ANSWERED)  # every store's answer must be one
        return states

    # -- helpers --------------------------------------------------------------------------

    def committed_version(self, query: Any) -> int:
        """The newest state version every bin has committed: batch b writes version b + 1."""
        progress = query.lastProgress
        if not progress:
            raise RuntimeError("the query has completed no batch yet: nothing to prewarm")
        return int(progress["batchId"]) + 1

    def _job_context(self, query: Any) -> JobContext:
        return job_context(self.internals, self._helper(), query)

    def _schema(self, job: JobContext, operator: int, store: str) -> tuple[str, str, bool]:
        return self._schemas.of(job, operator, store)

    def _run(
        self,
        action: str,
        query: Any,
        bins: Iterable[int],
        executor: str,
        *,
        host: str,
        stores: Sequence[tuple[int, str]],
        version: int = 0,
        load_id: str = "",
    ) -> list[dict[str, Any]]:
        placed = [(b, executor, host) for b in bins]
        return self._run_placed(
            action, query, placed, stores=stores, version=version, load_id=load_id
        )

    def _run_placed(
        self,
        action: str,
        query: Any,
        placed: Sequence[tuple[int, str, str]],
        *,
        stores: Sequence[tuple[int, str]],
        version: int = 0,
        load_id: str = "",
    ) -> list[dict[str, Any]]:
        """`action` for each (bin, executor, host), once per store: over Spark's RPC on
        executors whose helper endpoint is registered (no job; each answer has `via`:
        `rpc`), otherwise one task each on its executor, in one Spark job."""
        if not placed:
            return []
        job = self._job_context(query)
        targets = [f"{b}\t{executor}\t{host}" for b, executor, host in placed]
        results: list[dict[str, Any]] = []
        for operator, store in stores:
            key_json, value_json, column_families = ("", "", False)
            if action in ("load", "activate"):
                key_json, value_json, column_families = self._schema(job, operator, store)
            answers = job.helper.run(
                self.internals.sc._jsc.sc(),
                job.state.conf(),
                job.hadoop_conf,
                action,
                targets,
                job.root,
                operator,
                store,
                job.run_id,
                load_id,
                version,
                key_json,
                value_json,
                column_families,
            )
            results.extend(json.loads(str(a)) for a in java_list(answers))
        return results

    def _release_shadows(
        self, query: Any, bins: Iterable[int], stores: Sequence[tuple[int, str]]
    ) -> None:
        """Point each shadow id at no executor (`RELEASED_EXECUTOR` on a host of that name):
        a shadow copy left anywhere is then not the active instance, and that executor's
        maintenance unloads it. The helper's `releaseShadows`, which `switchStep` also
        calls: one implementation of the release."""
        entries = [str(b) for b in bins]
        if not entries:
            return
        self._helper().releaseShadows(
            self.internals._coordinator(),
            entries,
            [f"{operator}\t{store}" for operator, store in stores],
            self.internals.state_root(query),
            str(query.runId),
        )
