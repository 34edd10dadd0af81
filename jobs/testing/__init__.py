"""Probes for Swivel's own tests (`probes`): functions with side effects on files.

They delete a file a manifest names (`counting`'s `fail_marker`), append to files in a
folder it names (`logged`, `logged_totals`) or hold a task up to a minute while a file is
missing (`parity`'s `hold`). That is what a test needs to observe a running query and
what no installation should run, so this package is deliberately NOT under the default
function allow-list (`swivel.jobs.examples`, `swivel.api.functions.DEFAULT_PREFIXES`):
a StreamJob may name these functions only where `SWIVEL_FUNCTION_PREFIXES` (chart value
`functions.allowedPrefixes`) adds `swivel.jobs.testing`. The tests add it by environment
(tests/conftest.py); the examples users run use `swivel.jobs.examples` only. The wheel
(and so the image) leaves this package out (`pyproject.toml`); a source checkout has it.
"""
