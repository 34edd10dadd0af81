"""The benchmark harness behind `swivel bench`: the reconfiguration benchmark
(`reconfiguration.py`, with the control-channel overhead of `control_overhead.py` and
`pump.py` and the switch timelines of `timeline.py`) and the bin-migration benchmarks on a
local standalone cluster (`migration.py`, `runtime_overhead.py`, with `workload.py`,
`process_cpu.py` and, per thread, `thread_cpu.py`). Figures: docs/benchmarks.md, docs/migration.md."""
