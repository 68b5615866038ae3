"""``python -m colo_node_agent``: run the node agent (settings from ``COLO_*`` and ``COLO_NODE_AGENT_*``)."""

from __future__ import annotations

from colo.runtime import main
from colo_node_agent.service import NodeAgentService
from colo_node_agent.settings import ENV_PREFIX, NodeAgentSettings


def run() -> None:
    """Load settings, build the service, run until SIGTERM/SIGINT (exit 2 on invalid settings)."""
    main(NodeAgentService, NodeAgentSettings, ENV_PREFIX)


if __name__ == "__main__":
    run()
