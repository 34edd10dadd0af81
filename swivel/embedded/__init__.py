"""Embedded mode: a StreamJob on this machine, no cluster (`swivel run`, `apply`, `status`,
`demo`; the `swivel bench reconfiguration` of the developer tools, `tools/`, builds on it).

It lives in `swivel/embedded/` beside `swivel/operator/` rather than in `jobs/`: like the
operator, it is a way to *deploy* a job - it starts the sidecar agent as a local process
and the job runtime (local Spark) in the calling process, and composes the two - while
`jobs/` holds what runs inside a job wherever it is deployed.
"""
