"""llm-serving: LLM serving for DeepSeek-V4-Flash on Kubernetes. See README.md."""

import pulumi

from components.ops_commands import OpsConfigError
from stacks import program
from stacks.loader import ConfigError, FileProblem, stack_file_name

try:
    outputs = program.run()
except ConfigError as err:
    # RunError prints the message without a traceback; nothing has been registered yet. The lines
    # are those of `make render` (render/__main__.py).
    raise pulumi.RunError(f"invalid stack configuration:\n{err}") from None
except OpsConfigError as err:
    # A Job builder's refusal that no config rule caught first (components/ops_commands.py).
    refusal = ConfigError(stack_file_name(pulumi.get_stack()), [FileProblem(path="", value=None, allowed=str(err))])
    raise pulumi.RunError(f"invalid stack configuration:\n{refusal}") from None

for key, value in outputs.items():
    pulumi.export(key, value)
