from __future__ import annotations

import pytest
import yaml

from cocoeval import InputError, load_taxonomy
from cocoeval.core.taxonomy import default_taxonomy_path


def test_default_taxonomy_has_the_ten_behaviours():
    tax = load_taxonomy()
    assert tax.ids == [
        "repetition",
        "redundant_information",
        "logical_contradiction",
        "misunderstanding",
        "persona_inconsistency",
        "unclear_intent",
        "under_answering",
        "off_topic",
        "interruption",
        "persistent_disagreement",
    ]
    assert [b.id for b in tax.by_category("inconsistent")] == tax.ids[:5]
    assert [b.id for b in tax.by_category("uncollaborative")] == tax.ids[5:]
    assert all(b.definition for b in tax.behaviours)


def test_hash_is_stable_and_content_addressed(tmp_path):
    a, b = load_taxonomy(), load_taxonomy()
    assert a.hash == b.hash and len(a.hash) == 16
    data = yaml.safe_load(default_taxonomy_path().read_text())
    p = tmp_path / "same.yaml"
    p.write_text(yaml.safe_dump(data))
    assert load_taxonomy(p).hash == a.hash  # formatting does not matter, content does
    data["behaviours"][0]["definition"] += " Even briefly."
    p.write_text(yaml.safe_dump(data))
    assert load_taxonomy(p).hash != a.hash


def test_user_taxonomy_and_lookup(tmp_path):
    p = tmp_path / "mine.yaml"
    p.write_text(
        yaml.safe_dump(
            {
                "name": "mine",
                "behaviours": [
                    {"id": "off_topic", "name": "Off topic", "category": "uncollaborative", "definition": "Drifts."},
                ],
            }
        )
    )
    tax = load_taxonomy(p)
    assert tax.ids == ["off_topic"]
    assert tax.get("Off-topic").id == "off_topic"
    assert tax.get("OFF TOPIC").id == "off_topic"
    assert tax.get("repetition") is None


@pytest.mark.parametrize(
    "content,needle",
    [
        ("name: x\nbehaviours: []\n", "at least one behaviour"),
        ("name: x\nbehaviours:\n  - {id: a, name: A, category: weird, definition: d}\n", "category"),
        (
            "name: x\nbehaviours:\n  - {id: a, name: A, category: inconsistent, definition: d}\n"
            "  - {id: a, name: B, category: inconsistent, definition: d}\n",
            "duplicate",
        ),
        (
            "name: x\nbehaviours:\n  - {id: a, name: Off topic, category: inconsistent, definition: d}\n"
            "  - {id: b, name: Off-topic, category: inconsistent, definition: d}\n",
            "cannot be told apart",
        ),
        (
            "name: x\nbehaviours:\n  - {id: a, name: Interruption, category: inconsistent, definition: d}\n"
            "  - {id: b, name: Interruptions, category: inconsistent, definition: d}\n",
            "cannot be told apart",
        ),
        (
            "name: x\nbehaviours:\n  - {id: off_topic, name: Drift, category: inconsistent, definition: d}\n"
            "  - {id: b, name: Off topic, category: inconsistent, definition: d}\n",
            "cannot be told apart",
        ),
        ("name: [unclosed\n", "YAML"),
        ("- just a list\n", "mapping"),
    ],
)
def test_bad_taxonomy_files_name_the_file(tmp_path, content, needle):
    p = tmp_path / "bad.yaml"
    p.write_text(content)
    with pytest.raises(InputError) as e:
        load_taxonomy(p)
    assert "bad.yaml" in str(e.value) and needle in str(e.value)


def test_missing_taxonomy_file(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_taxonomy(tmp_path / "nope.yaml")
