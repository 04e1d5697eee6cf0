"""The ConfigMap holding the scripts of the Jobs, the model gate and the preStop drain (components/scripts/)."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from components.base import Component, metadata

SCRIPTS_DIR = Path(__file__).parent / "scripts"
SCRIPT_FILES = ("drain.py", "load_test.py", "mirror_images.sh", "model_files.py", "model_gate.py", "openai_client.py",
                "pd_proxy.py", "route_evidence.py",
                "smoke.py", "sync_model.sh", "verify_model.py", "warmup.py")


def script_data() -> dict[str, str]:
    return {name: (SCRIPTS_DIR / name).read_text(encoding="utf-8") for name in SCRIPT_FILES}


class ModelScripts(Component):
    config_map_name: str

    def __init__(self, name: str, namespace: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:scripts:ModelScripts", name, opts)
        self.config_map_name = "llm-serving-model-scripts"
        self.config_map = k8s.core.v1.ConfigMap(
            f"{name}-configmap",
            metadata=metadata(self.config_map_name, namespace, "model-scripts"),
            data=script_data(),
            opts=self.child_opts(),
        )
        self.register_outputs({"configMapName": self.config_map_name})
