"""CrossGuard entry point: `pulumi preview --policy-pack policy`. Only here is the PolicyPack built,
because building it starts the policy server and blocks."""

import os
import sys

# The rules live in the `policy` package of the repository this pack sits in.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

from policy.pack import policies  # noqa: E402

PolicyPack(name="llm-serving", enforcement_level=EnforcementLevel.ADVISORY, policies=policies())
