"""Swivel's developer tools: the sandbox and the benchmark harness (the `swivel-tools`
distribution in `tools/`).

They are kept out of the `swivel` wheel and image because nothing in a deployment runs
them: the sandbox is an in-memory Kubernetes API with a process kubelet for laptops and
tests, the benchmarks start their own jobs and clusters to measure them. The `swivel`
command finds `swivel sandbox` and `swivel bench` through the `swivel.commands` entry points
this distribution registers (docs/packaging.md, "The developer tools").
"""
