"""The answers the offline render gives in place of the engine and the providers: `pulumi up`'s
(stable ids and the outputs the program reads, shaped like the real ones) and `pulumi preview`'s for a
new stack (unknown wherever only the provider knows), and the stack's last deployment for the
program's readStackResourceOutputs invoke (stacks/transitions.py)."""

from __future__ import annotations

import uuid

import pulumi
from pulumi.runtime import rpc

from stacks.transitions import SELF_STATE

MOCK_ACCOUNT = "000000000000"


class MockResources(pulumi.runtime.Mocks):
    """Gives each resource a stable id and the outputs the program reads, shaped like the real ones
    (a mock AWS account id makes them recognisable in the render)."""

    def __init__(self, aws_region: str = "us-east-1", previous: dict[str, dict] | None = None):
        self.aws_region = aws_region
        self.previous = previous or {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        state = dict(args.inputs)
        if args.typ == "aws:ecr/repository:Repository":
            state["repositoryUrl"] = f"{MOCK_ACCOUNT}.dkr.ecr.{self.aws_region}.amazonaws.com/{state['name']}"
            return state["name"], state
        if args.typ == "aws:iam/accessKey:AccessKey":
            state["secret"] = "mock-secret-access-key"
            return "AKIAMOCKACCESSKEYID0", state
        if args.typ == "aws:iam/role:Role":
            state["arn"] = f"arn:aws:iam::{MOCK_ACCOUNT}:role/{state.get('name', args.name)}"
            return state.get("name", args.name), state
        if args.typ == "aws:s3/bucket:Bucket":
            state["arn"] = f"arn:aws:s3:::{state.get('bucket', args.name)}"
            return state.get("bucket", args.name), state
        meta = state.get("metadata") or {}
        if "name" in meta:
            object_id = "/".join(p for p in (meta.get("namespace"), meta["name"]) if p)
            if args.typ.startswith("kubernetes:") and isinstance(meta, dict):
                # The API server's metadata.uid, which an ownerReference must name; stable per object.
                state["metadata"] = {**meta, "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{args.typ}/{object_id}"))}
            return object_id, state
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs):
        if args.token == SELF_STATE:
            # The stack's last deployment, as the engine's builtin provider answers it
            # (stacks/transitions.py): a previous render's resources, their inputs as outputs.
            return {"name": args.args.get("stackName"), "outputs": self.previous}
        return {}


def previous_state(records: list[dict]) -> dict[str, dict]:
    """URN -> {type, outputs} from a render's resources.json (`python -m render --previous DIR`)."""
    # Keyed as the engine's checkpoint is (engineUrn; an older render has only the mock's urn), so an
    # alias the program derives from it is the URN the planner (render/changes.py) matches.
    return {r.get("engineUrn") or r["urn"]: {"type": r["type"], "outputs": r.get("inputs") or {}}
            for r in records if r.get("custom", True)}


class PreviewMocks(pulumi.runtime.Mocks):
    """What `pulumi preview` answers for a resource being created: no id yet, its inputs as given
    (unknown wherever another resource's output flows in) and unknown for every value only the
    provider computes: the ones the `up` mocks make up (ECR repositoryUrl, IAM access key secret,
    role and bucket ARN) and a Kubernetes object's status. The Python SDK sends each unknown as
    pulumi.runtime.rpc.UNKNOWN in the RegisterResource object of every dependant."""

    def __init__(self, up: pulumi.runtime.Mocks):
        self.up = up

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        resource_id, state = self.up.new_resource(args)
        if not args.custom:
            return resource_id, state
        computed = {k: rpc.UNKNOWN for k in state if k not in args.inputs}
        if args.typ.startswith("kubernetes:"):
            computed["status"] = rpc.UNKNOWN
        return None, {**args.inputs, **computed}  # an empty id is an unknown id (pulumi/runtime/resource.py)

    def call(self, args: pulumi.runtime.MockCallArgs):
        return self.up.call(args)
