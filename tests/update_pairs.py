"""Before/after pairs of a committed stack for the update planner (render/changes.py): each case edits
a copy of the stack file, and the expected verdict of `python -m render --previous` sits in this one
table. When a fix lands that makes a refused update apply, flip its `verdict` here (and its `expect`).
Issue 14's e2e can apply the same pairs with the real CLI: `variant_project` writes the edited project.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent

APPLIES, REFUSED = "applies", "refused"


@dataclass(frozen=True)
class Pair:
    name: str
    stack: str
    edits: tuple[tuple[str, str], ...]  # (text in the stack file, replacement), each present exactly once
    verdict: str                        # APPLIES: exit 0 and changes.md; REFUSED: exit 2, nothing written
    expect: str                         # a line of changes.md (APPLIES) or of stderr (REFUSED)


PAIRS = [
    Pair("no-change", "dev", (), APPLIES, "Nothing changes"),
    # The new Deployment takes the old one's place, delete first (stacks/transitions.py): without it the
    # old one would be deleted only after every create (phase 2), 16 of budget 8 GPUs at once.
    Pair("rename-model", "dev", (("- name: deepseek-v4-flash\n", "- name: deepseek-flash\n"),), APPLIES,
         "| DeepSeek-V4-Flash | no serving | about 12.0 min | Deployment llm-serving-dev/deepseek-flash is replaced "
         "delete-first"),
    # Every namespaced object is replaced create-first (metadata.namespace), except the engine: the
    # budget has no room for a second copy, so it goes first (stacks/transitions.py).
    Pair("switch-namespace", "dev", (("llm-serving:namespace: llm-serving-dev\n",
                                      "llm-serving:namespace: llm-serving-dev2\n"),), APPLIES,
         "GPU peak during the update: 8 of budget 8 (fits)."),
    # Only the PVs grow (in place); the claims of static PVs are never resized (components/volume.py),
    # which the PersistentVolumeClaimResize admission would refuse.
    Pair("model-volume-capacity", "dev", (("capacityGiB: 400\n", "capacityGiB: 500\n"),), APPLIES,
         "| DeepSeek-V4-Flash | no downtime | none |"),
    # Issue 18 case 5: the PV and claim names follow the source, so the new pair is created first, the
    # pods move (Recreate on dev: a cold start), and the old pair goes at the end.
    Pair("storage-source", "dev", (("path: /volumes/llm/models\n", "path: /volumes/llm/models2\n"),), APPLIES,
         "| DeepSeek-V4-Flash | no serving | about 12.0 min | Deployment llm-serving-dev/deepseek-v4-flash rolls out "
         "Recreate"),
    # Issue 18 case 6: turning the load test off drops the bench-results claim, retained (not protected)
    # outside dev: the engine drops it from the state and the results stay (components/retention.py).
    Pair("load-test-off", "staging", (("    loadTest:\n      enabled: true\n", "    loadTest:\n      enabled: false\n"),),
         APPLIES, "| PersistentVolumeClaim llm-serving-staging/llm-bench-results | delete | 2 | - | retainOnDelete"),
    # Issue 18 case 6: a load test never runs against live traffic unless the stack says so.
    Pair("load-test-on-prod", "prod", (("  llm-serving:operations:\n    monitoring:\n",
                                        "  llm-serving:operations:\n    loadTest:\n      enabled: true\n    monitoring:\n"),),
         REFUSED, "operations.loadTest.allowLiveTraffic: true"),
    # Two replicas need 16 GPUs at steady state, so the budget grows with them; the pod template stays
    # (the routing default no longer depends on the replica count): the serving pod keeps serving.
    Pair("scale-replicas-1-to-2", "dev", (("      replicas: 1\n", "      replicas: 2\n"),
                                          ("llm-serving:gpuBudget: 8\n", "llm-serving:gpuBudget: 16\n")), APPLIES,
         "| DeepSeek-V4-Flash | no downtime | none | Deployment llm-serving-dev/deepseek-v4-flash's pods do not restart"),
    # Issue 21: a first consumer. Its key joins the engine's argv by reference and the consumer-keys Secret
    # is created before the engine rolls (Recreate on dev: a cold start); the compile cache is kept. The key
    # itself is set with the CLI (`pulumi config set --secret --path`), like every secret of the committed
    # stacks; the render stands in for it.
    Pair("add-consumer", "dev", (("  llm-serving:models:\n",
                                  "  llm-serving:consumers:\n    - name: search\n      namespace: team-search\n"
                                  "      requestsPerMinute: 600\n  llm-serving:models:\n"),), APPLIES,
         "| Secret llm-serving-dev/llm-serving-consumer-keys | create | 1 |"),
]


def variant_project(pair: Pair, directory: Path) -> Path:
    """A project directory holding Pulumi.yaml and the edited Pulumi.<stack>.yaml (the program itself is
    the checkout's: the render imports it from there)."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", directory / "Pulumi.yaml")
    text = (PROJECT_DIR / f"Pulumi.{pair.stack}.yaml").read_text()
    for before, after in pair.edits:
        assert text.count(before) == 1, f"{pair.name}: {before!r} is not in Pulumi.{pair.stack}.yaml exactly once"
        text = text.replace(before, after)
    (directory / f"Pulumi.{pair.stack}.yaml").write_text(text)
    return directory
