"""`swivel operator`: run the kopf operator for StreamJob and Reconfiguration.

Credentials come from the pod's service account in a cluster, else from the kubeconfig
(`$KUBECONFIG` or ~/.kube/config). docs/operator.md lists the RBAC it needs.
"""

from __future__ import annotations

import asyncio

import click


@click.command("operator")
@click.option(
    "--namespace", "-n", "namespaces", multiple=True, help="Watch this namespace (repeatable)."
)
@click.option("--all-namespaces", "-A", is_flag=True, help="Watch every namespace.")
@click.option(
    "--standalone/--peering",
    default=True,
    show_default=True,
    help="Standalone: no kopf peering (run exactly one replica, Recreate strategy).",
)
@click.option(
    "--liveness-endpoint",
    default=None,
    help="Serve kopf's liveness probe here, e.g. http://0.0.0.0:8080/healthz.",
)
@click.option("--metrics-port", type=int, default=None, help="Serve Prometheus metrics here.")
@click.option("--agent-url", default=None, help="Reach every agent here (a port-forward, tests).")
def command(  # noqa: PLR0917 - click passes options positionally
    namespaces: tuple[str, ...],
    all_namespaces: bool,
    standalone: bool,
    liveness_endpoint: str | None,
    metrics_port: int | None,
    agent_url: str | None,
) -> None:
    """Reconcile StreamJobs and Reconfigurations (Ctrl-C to stop)."""
    if bool(namespaces) == all_namespaces:
        raise click.UsageError("give --namespace NS (repeatable) or --all-namespaces")
    from kubernetes import client, config
    from prometheus_client import start_http_server

    from swivel.operator.agents import ClientAgentLink, service_url
    from swivel.operator.clusters import KubernetesCluster
    from swivel.operator.contexts import OperatorContext
    from swivel.operator.main import run

    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]

    def fixed_url(_namespace: str, _job: str) -> str:
        return str(agent_url)

    link = ClientAgentLink(fixed_url if agent_url else service_url)
    ctx = OperatorContext(cluster=KubernetesCluster(client.ApiClient(configuration)), agents=link)
    if metrics_port is not None:
        start_http_server(metrics_port)
    asyncio.run(
        run(
            ctx,
            namespaces=list(namespaces),
            clusterwide=all_namespaces,
            standalone=standalone,
            liveness_endpoint=liveness_endpoint,
        )
    )
