"""Multi-node: the Ray cluster steps that must run before an engine that uses the Ray executor."""

from __future__ import annotations

from launchers.command import Step

RAY_PORT = 6379


def ray_steps(settings) -> tuple[Step, ...]:
    head = settings.head_address
    workers = settings.nodes - 1
    gpus_per_node = max(1, (settings.tp * settings.pp) // settings.nodes)
    return (
        Step("head", ("ray", "start", "--head", f"--node-ip-address={head}", f"--port={RAY_PORT}",
                      f"--num-gpus={gpus_per_node}"),
             "start the Ray head on the node that will run the server"),
        Step(f"each of the {workers} worker node(s)",
             ("ray", "start", f"--address={head}:{RAY_PORT}", f"--num-gpus={gpus_per_node}"),
             "join the Ray cluster; then check `ray status` shows all GPUs before starting the server"),
    )
