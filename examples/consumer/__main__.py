"""A consumer of the llm-serving outputs (see consumer.py)."""

import pulumi
from consumer import client_settings

for key, value in client_settings(pulumi.Config().require("servingStack")).items():
    pulumi.export(key, value)
