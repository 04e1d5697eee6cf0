"""The ConfigMap holding the scripts of the Jobs, the model gate and the preStop drain (components/scripts/)."""

from __future__ import annotations

import json
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from components.base import Component, metadata

SCRIPTS_DIR = Path(__file__).parent / "scripts"
SCRIPT_FILES = ("drain.py", "load_test.py", "mirror_images.sh", "model_files.py", "model_gate.py", "openai_client.py",
                "pd_proxy.py", "route_evidence.py",
                "smoke.py", "sync_model.sh", "verify_model.py", "warmup.py")


# model_files.py reads the required files of each model directory from here (REQUIRED_FILES_DATA).
REQUIRED_FILES_DATA = "model_files.json"


def script_data(required_files: dict[str, tuple[str, ...]] | None = None) -> dict[str, str]:
    """The scripts, and the files each model directory's checkpoint must hold (its profile's,
    policy/profiles/) for the verifier and the gate."""
    data = {name: (SCRIPTS_DIR / name).read_text(encoding="utf-8") for name in SCRIPT_FILES}
    data[REQUIRED_FILES_DATA] = json.dumps({d: list(f) for d, f in sorted((required_files or {}).items())},
                                           sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    return data


class ModelScripts(Component):
    config_map_name: str

    def __init__(self, name: str, namespace: str, required_files: dict[str, tuple[str, ...]] | None = None,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:scripts:ModelScripts", name, opts)
        self.config_map_name = "llm-serving-model-scripts"
        self.config_map = k8s.core.v1.ConfigMap(
            f"{name}-configmap",
            metadata=metadata(self.config_map_name, namespace, "model-scripts"),
            data=script_data(required_files),
            opts=self.child_opts(),
        )
        self.register_outputs({"configMapName": self.config_map_name})
