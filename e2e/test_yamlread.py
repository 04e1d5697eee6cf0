"""build/<stack>/kubernetes.yaml as kubectl reads it (issue 28): the renders go to .e2e/bin/yamlread
(k8s.io/apimachinery's util/yaml decoder over sigs.k8s.io/yaml and go.yaml.in/yaml/v2, at the versions
kube-apiserver is built with: e2e/tools/yamlread, `make e2e-tools`), and every document must come back
as the object the program registered: no string read as a number, a boolean or null. make test reads
the same renders with Python readers and a port of go-yaml v2's resolver (tests/test_yaml_readback.py);
this is the real thing.

No cluster: only the binary. The corpus: the shipped stacks, the dev stack with an API key whose content
tag is all digits after a 0 (the issue's `06589482`), and one object whose keys and values are strings
that look like numbers, booleans, nulls, dates and times to one reader or another, and 3000 from a
seeded generator over their alphabet.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest
import yaml
from harness import BIN, ROOT

sys.path.insert(0, str(ROOT))
from components.pod_template import API_KEY_ENTRY  # noqa: E402
from components.secrets import ANN_CONTENT_TAG, API_KEY_SECRET, content_tag  # noqa: E402
from render import runtime, serialize, stackfile  # noqa: E402

TOOL = BIN / "yamlread"
SHIPPED = ("dev", "staging", "prod")
EDGES = ["06589482", "4802e56", "0o17", "0O17", "0x1F", "0B1", "-0b101", "017", "08", "1_000", "1:20", "1:20:30.5",
         "y", "Y", "n", "N", "yes", "No", "on", "ON", "off", "Off", "true", "False", "null", "Null", "~", "", "=", "<<",
         ".inf", "-.Inf", ".nan", ".5", "1.", "1e3", "1E-3", "+1", "-0", "2001-12-14", "2001-12-14t21:59:43.10-05:00",
         "2001-12-14 21:59:43.10", "12:00", "0.88", "8000", "9223372036854775808", "1e400", "x", "ok", "b9055db1"]


def kubectl_reads(text: str) -> list:
    if not os.access(TOOL, os.X_OK):
        pytest.fail("missing in .e2e/bin: yamlread; build it with `make e2e-tools` (e2e/build-tools.sh yamlread)",
                    pytrace=False)
    run = subprocess.run([TOOL], input=text, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines()]


def meant(objects: list) -> list:
    """The objects as JSON holds them (what the API server receives)."""
    return json.loads(json.dumps(objects))


def generated(rng: random.Random, n: int) -> list[str]:
    alphabet = "0123456789._-+:eExXoObBaAfFiInNlLuUsStTrRyY~=<"
    return ["".join(rng.choices(alphabet, k=rng.randint(1, 10))) for _ in range(n)]


def test_the_shipped_stacks_read_back_as_registered():
    for stack in SHIPPED:
        rendered = runtime.render(stackfile.read(ROOT, stack))
        objects = serialize.kubernetes_objects(rendered)
        assert kubectl_reads(serialize.kubernetes_yaml(rendered)) == meant(objects), stack


def test_a_content_tag_of_digits_stays_an_annotation_string():
    stack = stackfile.read(ROOT, "dev")
    key = next(k for k in (f"key-{i}" for i in range(100_000))
               if (tag := content_tag("dev", API_KEY_SECRET, {API_KEY_ENTRY: k}))[0] == "0" and tag.isdigit())
    stack.config["llm-serving:apiKey"] = key
    stack.secret_keys.append("llm-serving:apiKey")
    rendered = runtime.render(stack)
    tag = content_tag("dev", API_KEY_SECRET, {API_KEY_ENTRY: key})
    read = kubectl_reads(serialize.kubernetes_yaml(rendered))
    assert read == meant(serialize.kubernetes_objects(rendered))
    assert tag in [o["metadata"].get("annotations", {}).get(ANN_CONTENT_TAG) for o in read]


def test_strings_that_look_like_other_types_stay_strings():
    strings = list(dict.fromkeys(EDGES + generated(random.Random(28), 3000)))
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "annotations": {s: s for s in strings}},
           "data": {f"k{i}": s for i, s in enumerate(strings)}, "list": strings}
    text = "---\n" + yaml.dump(obj, Dumper=serialize._ManifestDumper, sort_keys=True, default_flow_style=False,
                               width=120)
    assert kubectl_reads(text) == [obj]
    # The reference does resolve what the dumper quotes: the same strings written plain are not all text.
    # (JSON has no infinity or NaN: those lines are left out.)
    plain = [s for s in EDGES if s and s not in ("<<", "=") and "inf" not in s.lower() and "nan" not in s.lower()]
    (back,) = kubectl_reads("".join(f"k{i}: {s}\n" for i, s in enumerate(plain)))
    read = {s: back[f"k{i}"] for i, s in enumerate(plain)}
    assert read["06589482"] == 6589482 and read["4802e56"] == 4.802e59 and read["0o17"] == 15
    assert read["y"] is True and read["Off"] is False and read["null"] is None and read["b9055db1"] == "b9055db1"
