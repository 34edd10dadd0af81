"""The Spark side of Swivel: a StreamJob's dataflow compiled into one Structured Streaming
query whose operator functions switch mid-micro-batch on control messages (Fries).

Modules: `functions` (allow-listed function refs), `feeds` (where workers read
configuration snapshots from), `choosing` (the per-record configuration choice),
`operators` (the wrappers that run inside Python workers), `sources`/`sinks`, `compiling`
(dataflow -> streaming DataFrame), `driver` (the driver runtime), `testing` (run a job for
a few batches in a test).
"""
