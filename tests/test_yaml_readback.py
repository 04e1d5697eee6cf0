"""build/<stack>/kubernetes.yaml reads back as written (render/serialize.py, render/yaml_scalars.py):
every render of the tests' stacks, read by a YAML 1.2 reader (ruamel.yaml), a YAML 1.1 reader (PyYAML),
go-yaml v3 (render/yaml12.py, the port the stack files are read with) and go-yaml v2's resolution of
every plain scalar (what kubectl reads manifests with: sigs.k8s.io/yaml v1.6.0 over go.yaml.in/yaml/v2
v2.4.4), gives back exactly the objects the program registered. Hypothesis does the same for any
string, as a key and as a value. make e2e holds the same renders to the real go-yaml v2 (e2e/tools/yamlread)."""

from __future__ import annotations

import io
import json

import pytest
import ruamel.yaml as ruamel_yaml
import yaml
from conftest import STACKS, k8s_objects, render_stack
from engine_containers import rendered_variants
from hypothesis import example, given, settings
from hypothesis import strategies as st
from variants import render, variant_file

from components.pod_template import API_KEY_ENTRY
from components.secrets import ANN_CONTENT_TAG, API_KEY_SECRET, content_tag
from render import serialize, yaml12
from render.yaml_scalars import GO_YAML_V2_ONLY, go_yaml_v2_reads_as_text, plain_is_safe


def ruamel_load_all(text: str) -> list:
    """YAML 1.2 (ruamel.yaml's default) with its pure-Python safe loader."""
    reader = ruamel_yaml.YAML(typ="safe", pure=True)
    reader.version = (1, 2)
    return [d for d in reader.load_all(io.StringIO(text)) if d is not None]


def go_v3_load_all(text: str) -> list:
    """go-yaml v3's decoding (render/yaml12.py reads one document: each separately)."""
    return [yaml12.load(doc.encode()) for doc in documents(text)]


def go_v2_mismatches(text: str, expected: list) -> list[str]:
    """Each plain scalar of `text` that go-yaml v2's resolve() would read as something else than the
    program's value at that place (a quoted or block scalar is text to every reader)."""
    out: list[str] = []

    def walk(node, want, path):
        if isinstance(node, yaml.MappingNode):
            assert isinstance(want, dict), path
            for key, value in node.value:
                walk(key, key.value, path + ("<key>",))
                walk(value, want[key.value], path + (key.value,))
        elif isinstance(node, yaml.SequenceNode):
            for i, (item, w) in enumerate(zip(node.value, want, strict=True)):
                walk(item, w, path + (i,))
        elif not node.style:   # plain: None from PyYAML's Python parser, '' from libyaml's
            as_text = go_yaml_v2_reads_as_text(node.value)
            if isinstance(want, str) != as_text or (not as_text and _go_v2_value(node.value) != want):
                out.append(f"{'/'.join(map(str, path))}: {node.value!r} for {want!r}")

    # libyaml's parser (PyYAML's C binding) gives the same nodes as the Python one, ten times faster.
    docs = [d for d in yaml.compose_all(text, Loader=yaml.CSafeLoader) if d is not None]
    assert len(docs) == len(expected)
    for doc, want in zip(docs, expected):
        walk(doc, want, ())
    return out


def _go_v2_value(text: str):
    if text in GO_YAML_V2_ONLY:
        return text in ("y", "Y", "yes", "Yes", "YES", "on", "On", "ON") if text != "<<" else "<<"
    return yaml12.resolve(text)[1]


# What each pure-Python reader read from one document's text. The renders share most of their documents
# (a variant differs from dev in a few objects: 1,663 documents, 488 distinct, over every render), and a
# document reads the same whichever stream holds it: a line `---` at the start of a line is a document
# marker and nothing else (YAML 1.2.2 spec, production [206] c-forbidden; PyYAML and ruamel.yaml's
# scanners end a document there or refuse the text), anchors and tag handles do not reach past their
# document, and the renders have no directives (`%`). So the stream is read a document at a time
# (go_v3_load_all's split) and each distinct document once per reader; PyYAML's libyaml reader, which
# costs little, still reads each stream whole, and every reader's documents must add up to the objects.
_READ: dict[tuple[str, str], list] = {}
_GO_V2: dict[str, tuple[object, list[str]]] = {}


def documents(text: str) -> list[str]:
    return [doc for doc in text.split("\n---\n") if doc.strip() not in ("", "---")]


def _read_once(reader, doc: str) -> list:
    key = (reader.__name__, doc)
    if key not in _READ:
        _READ[key] = reader(doc)
    return _READ[key]


def _go_v2_once(doc: str, want) -> list[str]:
    seen = _GO_V2.get(doc)
    if seen is None or seen[0] != want:
        seen = _GO_V2[doc] = (want, go_v2_mismatches(doc, [want]))
    return seen[1]


def assert_reads_back(text: str, objects: list) -> None:
    expected = json.loads(json.dumps(objects))
    # libyaml parses, PyYAML's own resolver (YAML 1.1) and SafeConstructor decide the types.
    assert [d for d in yaml.load_all(text, Loader=yaml.CSafeLoader) if d is not None] == expected, "PyYAML (YAML 1.1)"
    assert "\n%" not in text and not text.startswith("%"), "a directive: documents() would split it from its document"
    docs = documents(text)
    assert len(docs) == len(expected)
    assert [o for d in docs for o in _read_once(ruamel_load_all, d)] == expected, "ruamel.yaml (YAML 1.2)"
    assert [o for d in docs for o in _read_once(go_v3_load_all, d)] == expected, "go-yaml v3 (render/yaml12.py)"
    assert [m for d, want in zip(docs, expected) for m in _go_v2_once(d, want)] == [], \
        "go-yaml v2 (kubectl's sigs.k8s.io/yaml)"


def every_render() -> dict:
    from pool_stacks import pool_renders
    return {s: render_stack(s) for s in STACKS} | rendered_variants() | pool_renders()


# Four readers over every render take about 0.5 s a render: in shards, so a failure names its quarter.
# make test runs --dist loadgroup: one worker takes the whole file, so each distinct document is read once
# (_READ), not once on every worker that takes a shard.
SHARDS = 4
pytestmark = pytest.mark.xdist_group("yaml-readback")


@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_render_of_the_tests_stacks_reads_back_as_the_program_meant(shard):
    renders = every_render()
    assert len(renders) > len(STACKS)
    for where, rendered in list(renders.items())[shard::SHARDS]:
        text = serialize.kubernetes_yaml(rendered)
        try:
            assert_reads_back(text, serialize.kubernetes_objects(rendered))
        except AssertionError as err:
            raise AssertionError(f"{where}: {err}") from None


def numeric_looking_api_key() -> tuple[str, str]:
    """An apiKey whose content tag on stack `variant` is all digits with a leading 0 (as `06589482`)."""
    for i in range(100_000):
        key = f"key-{i}"
        tag = content_tag("variant", API_KEY_SECRET, {API_KEY_ENTRY: key})
        if tag[0] == "0" and tag.isdigit():
            return key, tag
    raise AssertionError("no such key in 100000 tries")


def test_a_content_tag_that_looks_like_a_number_stays_text():
    """The issue's case: the API-key Secret's content tag 0xxxxxxx, an annotation kubectl read as a number."""
    key, tag = numeric_looking_api_key()
    sf = variant_file()
    sf.config["llm-serving:apiKey"] = key
    rendered = render(sf)
    text = serialize.kubernetes_yaml(rendered)
    assert f"{ANN_CONTENT_TAG}: '{tag}'" in text and f"{ANN_CONTENT_TAG}: {tag}\n" not in text
    tags = [o["metadata"].get("annotations", {}).get(ANN_CONTENT_TAG) for o in k8s_objects(rendered)]
    assert tag in tags
    assert_reads_back(text, serialize.kubernetes_objects(rendered))


# Strings that look like numbers, booleans, nulls, dates, times or floats to one reader or another.
NUMBERISH = st.text(alphabet="0123456789._-+:eExXoObBaAfFiInNlLuUsStTrRyY~=<", max_size=12)


@pytest.mark.parametrize("text", ["06589482", "4802e56", "0o17", "y", "N", "on", "OFF", "1:20", ".inf", "~", "null",
                                  "1_000", "0x1F", "+1", "=", "<<", "2001-12-14", "1e3", "-0b101", ".5", "0B1", ""])
def test_what_some_reader_reads_as_another_type_is_quoted(text):
    assert not plain_is_safe(text)
    out = yaml.dump({"k": text}, Dumper=serialize._ManifestDumper)
    assert out != f"k: {text}\n"
    assert_reads_back(out, [{"k": text}])


@pytest.mark.parametrize("text", ["ok", "b9055db1", "deepseek-v4-flash", "vllm", "1.2.3", "v0.26.0", "sm90", "fp8"])
def test_plain_text_stays_plain(text):
    assert plain_is_safe(text)
    assert yaml.dump({"k": text}, Dumper=serialize._ManifestDumper) == f"k: {text}\n"


@settings(max_examples=400, deadline=None)
@given(st.one_of(NUMBERISH, st.text(max_size=40)), st.one_of(NUMBERISH, st.text(max_size=40)))
@example("06589482", "4802e56")
def test_any_string_key_or_value_reads_back(key, value):
    objects = [{"metadata": {"annotations": {key: value}}, "args": [value, key]}]
    text = "---\n" + yaml.dump(objects[0], Dumper=serialize._ManifestDumper, sort_keys=True,
                               default_flow_style=False, width=120)
    assert_reads_back(text, objects)
