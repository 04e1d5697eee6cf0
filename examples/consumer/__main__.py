"""A consumer of the llm-serving outputs (see consumer.py and README.md)."""

import pulumi
import pulumi_kubernetes as k8s
from consumer import client_settings

config = pulumi.Config()
settings = client_settings(config.require("servingStack"), config.get("model"), config.get("consumer"))
for key, value in settings.items():
    pulumi.export(key, value)   # apiKey stays secret: [secret] in `pulumi stack output`

app_namespace = config.get("appNamespace")
if app_namespace:
    # The application's settings as a Secret in its namespace, read as environment variables
    # (envFrom); the key reaches the cluster only inside a Secret, never a ConfigMap.
    k8s.core.v1.Secret("llm-serving-client", metadata={"name": "llm-serving-client", "namespace": app_namespace},
                       type="Opaque", string_data={"OPENAI_BASE_URL": settings["openaiBaseUrl"],
                                                   "OPENAI_MODEL": settings["model"],
                                                   "OPENAI_API_KEY": settings["apiKey"]})
