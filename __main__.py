"""llm-serving: LLM serving for DeepSeek-V4-Flash on Kubernetes. See README.md."""

import pulumi

from stacks import program
from stacks.loader import ConfigError

try:
    outputs = program.run()
except ConfigError as err:
    # RunError prints the message without a traceback; nothing has been registered yet.
    raise pulumi.RunError(f"invalid stack configuration:\n{err}") from None

for key, value in outputs.items():
    pulumi.export(key, value)
