"""The policy rules in one namespace: resource rules (policy.resource_rules), stack rules
(policy.stack_rules) and the manifest readers they share (policy.manifests)."""

from policy.manifests import PROBES, ROLE, pod_gpus  # noqa: F401
from policy.resource_rules import *  # noqa: F401,F403
from policy.resource_rules import RESOURCE_POLICIES, ResourcePolicy  # noqa: F401
from policy.stack_rules import *  # noqa: F401,F403
from policy.stack_rules import StackResource  # noqa: F401
