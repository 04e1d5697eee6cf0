"""Programs broken on purpose, for the e2e to show that the real CLI's preview blocks them with the pack.

The program refuses every bad stack file itself, so a stack the pack alone would stop cannot be written
as config; a resource transform (registered by e2e/pulumi_client.py when E2E_BREAK names one) changes
what the program registers, the way a hand edit of a component would.
"""

from __future__ import annotations

import pulumi


def _http_liveness(args: pulumi.ResourceTransformArgs):
    # engine-probes-tcp: a liveness probe that generates would be killed under load (field report 12.4).
    if args.type_ != "kubernetes:apps/v1:Deployment" or not args.name.endswith("-deployment"):
        return None
    containers = args.props.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []
    for container in containers:
        if isinstance(container, dict) and container.get("livenessProbe"):
            container["livenessProbe"] = {"httpGet": {"path": "/health", "port": 8000}, "periodSeconds": 10}
    return pulumi.ResourceTransformResult(props=args.props, opts=args.opts)


TRANSFORMS = {"engine-probes-tcp": _http_liveness}


def install(name: str) -> None:
    pulumi.runtime.register_resource_transform(TRANSFORMS[name])
