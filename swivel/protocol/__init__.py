"""The one typed protocol: every document that crosses a process boundary between the
operator and CLI, the agent, the driver and the Python workers, as a strict pydantic model.

- `documents`: the base (`Document`: `parse` refuses as `field: reason`, `to_wire`
  renders), the limits, the JSON reader and the query parameters;
- `bodies`: what the operator submits and the driver reports; `acks`: the workers' acks;
  `loads`: the driver's load measurement;
- `snapshots`: the configuration the workers long-poll, and its transition;
- `plans`: the plan document; `answers`: every other answer of the agent.

The agent's OpenAPI document is generated from these models (`swivel openapi`). This layer
imports only the models (`swivel.api`) and the planners (docs/architecture.md, "Layers").
"""
