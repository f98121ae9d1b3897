from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cocoeval import ConfigError, InputError, SourceReport, load_conversations, parse_source_spec
from cocoeval.sources import clean_transcript

from ..conftest import qmsum_meeting, write_json

ARTEFACT = re.compile(r"\{[a-z_]+\}", re.I)


# ---------------------------------------------------------------- cleaning


def test_clean_transcript_rules():
    raw = "Um {disfmarker} we took the L_C_D_ , right ? {vocalsound} {gap} Okay ."
    assert clean_transcript(raw) == "Um we took the LCD, right? Okay."
    assert clean_transcript("{vocalsound} {pause}") == ""
    assert clean_transcript(" . , ") == ""


_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFG", min_size=1, max_size=8)
_artefact = st.sampled_from(
    ["{disfmarker}", "{vocalsound}", "{gap}", "{pause}", "{comment}", "{nonvocalsound}", "{ VOCALSOUND }"]
)


@given(st.lists(st.one_of(_word, _artefact, st.sampled_from([",", ".", "?"])), max_size=40))
def test_cleaning_keeps_every_word_and_no_artefact(tokens):
    cleaned = clean_transcript(" ".join(tokens))
    assert not ARTEFACT.search(cleaned)
    assert "  " not in cleaned and cleaned == cleaned.strip()
    words = [t for t in tokens if re.fullmatch(r"[A-Za-z]+", t)]
    assert re.findall(r"[A-Za-z]+", cleaned) == words


# ---------------------------------------------------------------- specs


def test_source_spec_parsing():
    s = parse_source_spec("qmsum:data/q#qmsum_product")
    assert (s.kind, str(s.path), s.dataset) == ("qmsum", "data/q", "qmsum_product")
    with pytest.raises(ConfigError, match="unknown source kind"):
        parse_source_spec("csv:foo")
    with pytest.raises(ConfigError, match="KIND:PATH"):
        parse_source_spec("qmsum")


# ---------------------------------------------------------------- qmsum


def test_qmsum_domains_are_three_datasets_and_data_all_is_never_one(tmp_path):
    """QMSum's own layout data/{ALL,Product,Academic,Committee}/{train,val,test}/*.json: each
    domain folder is its dataset (any case), data/ALL (the same meetings again) is left out."""
    root = tmp_path / "qmsum" / "data"
    for domain, split, mid in [
        ("Product", "train", "ES2002a"),
        ("Academic", "val", "Bed003"),
        ("Committee", "test", "covid_1"),
    ]:
        write_json(root / domain / split / f"{mid}.json", qmsum_meeting(4))
        write_json(root / "ALL" / split / f"{mid}.json", qmsum_meeting(4))
    write_json(root / "ALL" / "train" / "only_in_all.json", qmsum_meeting(4))
    convs = list(load_conversations(f"qmsum:{root}"))
    assert sorted((c.dataset, c.id) for c in convs) == [
        ("qmsum_academic", "Bed003"),
        ("qmsum_committee", "covid_1"),
        ("qmsum_product", "ES2002a"),
    ]
    # flat, lowercase folders (as in the shared data) map the same way
    write_json(tmp_path / "flat" / "academic" / "Bmr001.json", qmsum_meeting(4))
    assert [c.dataset for c in load_conversations(f"qmsum:{tmp_path / 'flat'}")] == ["qmsum_academic"]
    # pointing at data/ALL itself: a clear error, never one "qmsum" dataset
    with pytest.raises(InputError, match="data/ALL") as e:
        list(load_conversations(f"qmsum:{root / 'ALL' / 'train'}"))
    assert "#qmsum_product" in e.value.hint
    # unless the dataset is named
    named = list(load_conversations(f"qmsum:{root / 'ALL' / 'test'}#qmsum_committee"))
    assert [c.dataset for c in named] == ["qmsum_committee"]


def test_qmsum_loader(tmp_path):
    m = qmsum_meeting(5)
    m["meeting_transcripts"].insert(2, {"speaker": "Marketing", "content": "{vocalsound}"})
    write_json(tmp_path / "committee" / "M1.json", m)
    rep = SourceReport()
    [c] = list(load_conversations(f"qmsum:{tmp_path}", rep))
    assert c.dataset == "qmsum_committee" and c.id == "M1"
    assert [t.source_index for t in c.turns] == [0, 1, 3, 4, 5]
    assert c.turns[0].text == "Turn number 0 about the budget."
    assert c.turns[0].raw_text.endswith("{vocalsound} .")
    assert c.goals == ["Budget"]
    assert rep.dropped_turns["empty after cleaning"] == 1
    assert [p.name for p in c.participants] == ["Project Manager", "Marketing", "User Interface"]


def test_qmsum_dataset_override_and_roles(tmp_path):
    write_json(tmp_path / "x.json", qmsum_meeting(3, ("Professor B", "PhD A", "The Chair")))
    [c] = list(load_conversations(f"qmsum:{tmp_path / 'x.json'}#mine"))
    assert c.dataset == "mine"
    assert [p.role for p in c.participants] == ["professor", "PhD student", "chair"]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["A", "B", "C"]),
            st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30),
        ),
        max_size=20,
    )
)
def test_qmsum_parsing_property(tmp_path_factory, rows):
    d = tmp_path_factory.mktemp("q")
    write_json(d / "m.json", {"meeting_transcripts": [{"speaker": s, "content": t} for s, t in rows]})
    rep = SourceReport()
    [c] = list(load_conversations(f"qmsum:{d}", rep))
    expected = [(i, s, clean_transcript(t)) for i, (s, t) in enumerate(rows) if clean_transcript(t)]
    assert [(t.source_index, t.speaker, t.text) for t in c.turns] == expected
    assert sum(rep.dropped_turns.values()) == len(rows) - len(expected)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "content,needle",
    [
        (b"", "file is empty"),
        (b"   \n", "file is empty"),
        (b'{"meeting_transcripts": [', "invalid JSON at line 1"),
        (b'{"topic_list": []}', "no 'meeting_transcripts'"),
        (b'{"meeting_transcripts": [{"speaker": "A"}]}', "meeting_transcripts.0.content"),
        (b'{"meeting_transcripts": [{"speaker": 3, "content": "x"}]}', "meeting_transcripts.0.speaker"),
        (b'{"meeting_transcripts": "nope"}', "meeting_transcripts"),
        ('{"meeting_transcripts": [{"speaker": "A", "content": "caf\xe9"}]}'.encode("latin-1"), "not valid UTF-8"),
    ],
)
def test_bad_qmsum_files_give_clear_errors(tmp_path, content, needle):
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    with pytest.raises(InputError) as e:
        list(load_conversations(f"qmsum:{p}"))
    assert needle in str(e.value) and "bad.json" in str(e.value)
    assert "how to fix" in str(e.value)


def test_on_error_skip_reports_and_continues(tmp_path):
    write_json(tmp_path / "good.json", qmsum_meeting(3))
    (tmp_path / "bad.json").write_text("{oops")
    rep = SourceReport()
    convs = list(load_conversations(f"qmsum:{tmp_path}", rep, on_error="skip"))
    assert [c.id for c in convs] == ["good"]
    assert rep.skipped[0]["file"].endswith("bad.json") and "invalid JSON" in rep.skipped[0]["reason"]


def test_missing_path(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        list(load_conversations(f"qmsum:{tmp_path / 'nope'}"))


# ---------------------------------------------------------------- convokit


def _corpus(d, utterances, conversations=None, speakers=None, name="iq2-corpus-subset"):
    d.mkdir(parents=True, exist_ok=True)
    (d / "utterances.jsonl").write_text("".join(json.dumps(u) + "\n" for u in utterances))
    write_json(d / "conversations.json", conversations or {})
    write_json(d / "speakers.json", speakers or {})
    write_json(d / "corpus.json", {"name": name})
    return d


def _utt(i, speaker, conv="deb", ts=None, text=None, st=None):
    return {
        "id": f"{conv}-{i}",
        "speaker": speaker,
        "conversation_id": conv,
        "reply_to": None,
        "timestamp": i if ts is None else ts,
        "text": text if text is not None else f"u{i}",
        "meta": {"speakertype": st or "other"},
    }


def test_convokit_orders_by_timestamp_drops_pseudo_speakers_and_finds_roles(tmp_path):
    utts = [
        _utt(3, "B", ts=3, st="for"),
        _utt(1, "RESULTS", ts=1),
        _utt(2, "MOD", ts=2, st="mod"),
        _utt(4, "C", ts=4, st="against"),
        _utt(5, "B", ts=5, text="  "),
    ]
    d = _corpus(
        tmp_path / "c", utts, {"deb": {"title": "Ban cars", "for": ["B"], "against": ["C"], "moderator": ["MOD"]}}
    )
    rep = SourceReport()
    [c] = list(load_conversations(f"convokit:{d}", rep))
    assert c.dataset == "iq2"
    assert [t.speaker for t in c.turns] == ["MOD", "B", "C"]
    assert rep.dropped_turns["pseudo-speaker (e.g. RESULTS)"] == 1
    assert rep.dropped_turns["empty utterance"] == 1
    assert c.goals == ["Debate the motion: Ban cars"]
    roles = {p.name: (p.role, p.stance) for p in c.participants}
    assert roles == {
        "MOD": ("moderator", "mod"),
        "B": ("debater for the motion", "for"),
        "C": ("debater against the motion", "against"),
    }


def test_convokit_motion_from_transcript_when_title_is_noisy(tmp_path):
    utts = [
        _utt(1, "MOD", text='Our motion is "Men are finished." Welcome.'),
        _utt(2, "A", text='I oppose the motion, "Men are finished".'),
    ]
    d = _corpus(tmp_path / "c", utts, {"deb": {"title": "590 Madison Avenue, 30th Fl. Contact Publicist: X"}})
    [c] = list(load_conversations(f"convokit:{d}"))
    assert c.meta["motion"] == "Men are finished" and c.meta["motion_source"] == "transcript"


def test_convokit_bad_utterance_names_line(tmp_path):
    utts = [_utt(1, "A"), {"id": "x", "speaker": "B"}]
    d = _corpus(tmp_path / "c", utts)
    with pytest.raises(InputError) as e:
        list(load_conversations(f"convokit:{d}"))
    assert "utterances.jsonl" in str(e.value) and "line 2" in str(e.value)
    assert "conversation_id" in str(e.value)


def test_convokit_duplicate_utterance_ids_keep_the_first_and_are_reported(tmp_path):
    utts = [_utt(1, "A"), _utt(2, "B"), {**_utt(1, "A"), "text": "a second copy"}, _utt(3, "A"), _utt(2, "B")]
    d = _corpus(tmp_path / "c", utts)
    rep = SourceReport()
    [c] = list(load_conversations(f"convokit:{d}", rep))
    assert [t.text for t in c.turns] == ["u1", "u2", "u3"]  # no doubled turn, the first copy kept
    dups = [s for s in rep.skipped if "duplicate utterance id" in s["reason"]]
    assert [(s["record"], s["reason"]) for s in dups] == [
        ("line 3", "duplicate utterance id 'deb-1' (line 1 kept)"),
        ("line 5", "duplicate utterance id 'deb-2' (line 2 kept)"),
    ]
    assert all(s["file"].endswith("utterances.jsonl") for s in dups)


@pytest.mark.parametrize(
    "conversations,speakers,needle",
    [
        ({"deb": [1, 2]}, {}, "conversations.json, record deb: expected an object, got list"),
        ({"deb": "x"}, {}, "conversations.json, record deb: expected an object, got str"),
        ({"deb": {"for": 3}}, {}, "conversations.json, record deb: 'for' must be a list of speaker names"),
        ({"deb": {"moderator": [1]}}, {}, "record deb: 'moderator' must be a list of speaker names"),
        ({"deb": {"title": {"a": 1}}}, {}, "record deb: 'title' must be text, got dict"),
        ({}, {"A": 5}, "speakers.json, record A: expected an object, got int"),
        ({}, {"B": {"stance": ["for"]}}, "speakers.json, record B: a stance/speakertype must be a word"),
    ],
)
def test_convokit_wrong_types_name_file_and_record(tmp_path, conversations, speakers, needle):
    utts = [{**_utt(1, "A"), "meta": {}}, {**_utt(2, "B"), "meta": {}}]  # stances from speakers.json
    d = _corpus(tmp_path / "c", utts, conversations, speakers)
    with pytest.raises(InputError) as e:
        list(load_conversations(f"convokit:{d}"))
    assert needle in str(e.value)


@pytest.mark.parametrize("kind", ["qmsum", "tcr", "chat", "convokit"])
def test_deeply_nested_json_is_an_input_error(tmp_path, kind):
    deep = "[" * 50_000 + "]" * 50_000
    if kind == "convokit":
        d = _corpus(tmp_path / "c", [_utt(1, "A")])
        (d / "utterances.jsonl").write_text(json.dumps(_utt(1, "A")) + "\n" + deep + "\n")
        path, where = d, "line 2"
    else:
        path = tmp_path / "deep.json"
        path.write_text(deep)
        where = "deep.json"
    with pytest.raises(InputError) as e:
        list(load_conversations(f"{kind}:{path}"))
    assert "nested too deeply" in str(e.value) and where in str(e.value)


# ---------------------------------------------------------------- tcr


def _tcr_meeting(n=6):
    lines = [
        {
            "line_id": float(i),
            "speaker": "AB"[i % 2],
            "start_s": float(i),
            "end_s": i + 0.5,
            "contents": f"line {i} {{gap}}",
            "word_count": 2.0,
            "cum_wc": 2.0 * i,
        }
        for i in range(n)
    ]
    return {
        "topics": {
            "Second": {"topic_start_line": 3.0, "transcripts": lines[3:]},
            "First": {"topic_start_line": 0.0, "transcripts": lines[:3]},
        },
        "metadata": {"topic_annotation_source": "x", "variations": {}},
    }


@pytest.mark.parametrize("layout", ["nested", "meetings", "single"])
def test_tcr_layouts(tmp_path, layout):
    m = _tcr_meeting()
    doc = {"nested": {"NCPC": {"m1": m}}, "meetings": {"m1": m}, "single": m}[layout]
    write_json(tmp_path / "NCPC.json", doc)
    [c] = list(load_conversations(f"tcr:{tmp_path}"))
    assert c.dataset == "ncpc"
    assert [t.text for t in c.turns] == [f"line {i}" for i in range(6)]
    assert c.goals == ["First", "Second"]


def test_tcr_nan_and_missing_contents_are_dropped(tmp_path):
    m = _tcr_meeting(4)
    m["topics"]["First"]["transcripts"][1]["contents"] = float("nan")
    m["topics"]["First"]["transcripts"][2]["contents"] = None
    (tmp_path / "SIM.json").write_text(json.dumps({"SIM": {"m": m}}))  # json.dumps writes NaN
    rep = SourceReport()
    [c] = list(load_conversations(f"tcr:{tmp_path}", rep))
    assert [t.source_index for t in c.turns] == [0, 3]
    assert rep.dropped_turns["empty after cleaning"] == 2


def test_tcr_bad_meeting(tmp_path):
    write_json(tmp_path / "x.json", {"SIM": {"m1": {"metadata": {}}}})
    with pytest.raises(InputError, match="SIM/m1"):
        list(load_conversations(f"tcr:{tmp_path}"))
    write_json(tmp_path / "x.json", {"SIM": {"m1": {"topics": {"t": {"transcripts": [{"contents": 5}]}}}}})
    with pytest.raises(InputError, match="contents"):
        list(load_conversations(f"tcr:{tmp_path}"))


# ---------------------------------------------------------------- chat


def test_chat_formats(tmp_path):
    sharegpt = [{"id": "s1", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}]
    bare = [
        {"role": "system", "content": "Be nice."},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
    ]
    write_json(tmp_path / "a.json", sharegpt)
    write_json(tmp_path / "b.json", bare)
    (tmp_path / "c.jsonl").write_text(
        json.dumps(
            {
                "id": "o1",
                "messages": [
                    {"role": "user", "content": "x"},
                    {"role": "tool", "content": "y"},
                    {"role": "assistant", "content": "z"},
                ],
            }
        )
        + "\n"
    )
    rep = SourceReport()
    convs = {c.id: c for c in load_conversations(f"chat:{tmp_path}#sharechat", rep)}
    assert set(convs) == {"s1", "b-conversation0", "o1"}
    assert [(t.speaker, t.text) for t in convs["s1"].turns] == [("user", "hi"), ("assistant", "hello")]
    assert convs["b-conversation0"].meta["system"] == ["Be nice."]
    assert [t.text for t in convs["b-conversation0"].turns] == ["q", "a"]
    assert rep.dropped_turns["unknown chat role 'tool'"] == 1
    assert all(c.dataset == "sharechat" for c in convs.values())


def test_chat_bad_message(tmp_path):
    write_json(tmp_path / "x.json", [{"id": 1, "messages": [{"role": "user", "content": 3}]}])
    with pytest.raises(InputError) as e:
        list(load_conversations(f"chat:{tmp_path}"))
    assert "x.json" in str(e.value) and "conversation 0" in str(e.value)


def test_qmsum_speaker_merge_rule():
    from cocoeval.sources.qmsum import speaker_merges

    counts = {
        "Mr. Pierre Paul-Hus (Charlesbourg, CPC)": 1,
        "Mr. Pierre Paul-Hus": 5,
        "The Acting Chair (Mr. Bruce Stanton (Simcoe North, CPC))": 1,
        "Mr. Bruce Stanton": 2,
        "The Chair": 9,
        "Hon. Mona Fortier (Minister of Finance)": 1,
        "Hon. Mona Fortier (Ottawa, Lib.)": 1,
        "The Honourable Patty Hajdu (Minister of Health)": 1,
        "Hon. Patty Hajdu": 3,
        "Dr David Blaney": 1,
        "David Blaney": 1,
        "Mr. Sam Lee": 1,
        "Mrs. Sam Lee": 1,
        "Mr. Smith": 1,
        "Mrs. Smith": 1,
        "Eluned Morgan AM": 1,
        "Julie Morgan AM": 1,
        "Professor B": 1,
        "PhD B": 1,
    }
    merges = speaker_merges(counts)
    assert merges["Mr. Pierre Paul-Hus"] == (
        "Mr. Pierre Paul-Hus (Charlesbourg, CPC)",
        ["Mr. Pierre Paul-Hus", "Mr. Pierre Paul-Hus (Charlesbourg, CPC)"],
    )
    assert merges["Mr. Bruce Stanton"][0] == "The Acting Chair (Mr. Bruce Stanton (Simcoe North, CPC))"
    assert merges["Hon. Mona Fortier (Ottawa, Lib.)"][0] == "Hon. Mona Fortier (Minister of Finance)"
    assert merges["Hon. Patty Hajdu"][0] == "The Honourable Patty Hajdu (Minister of Health)"
    assert merges["David Blaney"][0] == "Dr David Blaney"
    # never merged: a role naming nobody, different people, one word, honorifics of two genders
    for label in (
        "The Chair",
        "Mr. Sam Lee",
        "Mrs. Sam Lee",
        "Mr. Smith",
        "Mrs. Smith",
        "Eluned Morgan AM",
        "Julie Morgan AM",
        "Professor B",
        "PhD B",
    ):
        assert label not in merges, label


def test_qmsum_a_bare_label_and_its_qualified_form_are_one_participant(tmp_path):
    """ "The Chair" beside "The Chair (Hon. Anthony Rota (…))" (QMSum Committee's Canadian
    meetings) is one speaker: one participant, the full label kept, every turn mapped to it; a bare
    label that several people's qualified labels share stays apart."""
    from cocoeval.sources.qmsum import speaker_merges

    rota = "The Chair (Hon. Anthony Rota (Nipissing, Lib.))"
    counts = {
        rota: 1,
        "The Chair": 9,
        "Mr. Smith (Carleton, CPC)": 1,
        "Mr. Smith": 4,
        "Hon. Anthony Rota": 2,
        "The Acting Chair (Mr. A. Bee)": 1,
        "The Acting Chair (Mrs. C. Dee)": 1,
        "The Acting Chair": 3,
    }
    merges = speaker_merges(counts)
    assert merges["The Chair"] == (rota, ["Hon. Anthony Rota", "The Chair", rota])  # with the name rule's label
    assert merges["Hon. Anthony Rota"][0] == merges[rota][0] == rota
    assert merges["Mr. Smith"] == ("Mr. Smith (Carleton, CPC)", ["Mr. Smith", "Mr. Smith (Carleton, CPC)"])
    assert "The Acting Chair" not in merges  # two acting chairs: which one is unknown
    # through the reader: one participant, every turn under the full label, the merge listed
    speakers = ["The Chair", rota, "Mr. Smith (Carleton, CPC)", "The Chair", "Mr. Smith", "The Chair"]
    write_json(
        tmp_path / "committee" / "m.json",
        {
            "topic_list": [],
            "meeting_transcripts": [{"speaker": sp, "content": f"point {i}"} for i, sp in enumerate(speakers)],
        },
    )
    rep = SourceReport()
    [conv] = load_conversations(f"qmsum:{tmp_path}", rep)
    assert [p.name for p in conv.participants] == [rota, "Mr. Smith (Carleton, CPC)"]
    assert [t.speaker for t in conv.turns] == [
        rota,
        rota,
        "Mr. Smith (Carleton, CPC)",
        rota,
        "Mr. Smith (Carleton, CPC)",
        rota,
    ]
    assert conv.participants[0].role == "chair"
    assert {(m["canonical"], tuple(m["labels"])) for m in rep.merged_speakers} == {
        (rota, ("The Chair", rota)),
        ("Mr. Smith (Carleton, CPC)", ("Mr. Smith", "Mr. Smith (Carleton, CPC)")),
    }


def test_qmsum_committee_sample_merges_one_persons_labels_and_reports_every_merge(tmp_path):
    from cocoeval import BuildConfig, build
    from cocoeval.sources.demo import sample_dir

    committee = sample_dir() / "committee"
    rep = SourceReport()
    convs = {c.id: c for c in load_conversations(f"qmsum:{committee}", rep)}
    covid = convs["covid_10"]
    names = [p.name for p in covid.participants]
    raw = {t["speaker"] for t in json.loads((committee / "covid_10.json").read_text())["meeting_transcripts"]}
    assert len(raw) == 82 and len(names) == 46 == len(set(names))
    [paul_hus] = [n for n in names if "Paul-Hus" in n]
    assert paul_hus.startswith("Mr. Pierre Paul-Hus (Charlesbourg") and paul_hus.endswith(", CPC)")
    assert "Mr. Pierre Paul-Hus" not in {t.speaker for t in covid.turns}
    # the chair named in its label and the bare role label are one participant, the chair, under the full label
    chairs = [p for p in covid.participants if p.name.startswith("The Chair")]
    assert [p.name for p in chairs] == ["The Chair (Hon. Anthony Rota (NipissingTimiskaming, Lib.))"]
    assert chairs[0].role == "chair" and "The Chair" not in {t.speaker for t in covid.turns}
    # every merge is listed (conversation, labels, canonical), in the report and in the conversation
    merged = [m for m in rep.merged_speakers if m["conversation"] == "covid_10"]
    assert len(merged) == len(raw) - len(names) == 36
    assert {
        "file": str(committee / "covid_10.json"),
        "dataset": "qmsum_committee",
        "conversation": "covid_10",
        "canonical": paul_hus,
        "labels": ["Mr. Pierre Paul-Hus", paul_hus],
    } in merged
    assert [m["canonical"] for m in covid.meta["merged_speakers"]] == [m["canonical"] for m in merged]
    # two people of one surname are not merged (the Welsh committee's Morgans and Davieses)
    assert {"Eluned Morgan AM", "Julie Morgan AM"} <= {p.name for p in convs["education_19"].participants}
    assert {"Suzy Davies AM", "Steve Davies"} <= {p.name for p in convs["education_1"].participants}
    assert not [m for m in rep.merged_speakers if m["conversation"].startswith("education")]
    # ... and the build's report.json lists them per source
    report = build([f"qmsum:{committee}"], tmp_path / "bench", BuildConfig(per_dataset=1))
    # (each file named relative to the folder holding the source: no absolute path in the report)
    assert report["sources"][0]["merged_speakers"] == [
        {**m, "file": f"{committee.name}/{m['file'].rsplit('/', 1)[1]}"} for m in rep.merged_speakers
    ]


@pytest.mark.realdata
def test_real_qmsum_committee_participants_are_the_distinct_people(shared_data):
    """On the real QMSum Committee meetings the participant count drops from the labels listed
    (33.2 a meeting; 89.7 in the nine Canadian House of Commons meetings) to the distinct people
    (22.2; 52.9), counted here by an independent reading of the labels; a bare label ("The Chair")
    is the one person its qualified form ("The Chair (Hon. Anthony Rota (…))") names."""
    from pathlib import Path

    def named(label: str) -> str:
        label = re.sub(r"^The (?:Acting )?Chair \(((?:Mr|Mrs|Ms|Hon)\..*)\)$", r"\1", label)
        label = label.split(" (")[0]
        return re.sub(r"^(?:Right Hon\.|The Honourable|Hon\.|Mr\.|Mrs\.|Ms\.|Dr) ", "", label)

    def people(labels: set[str]) -> set[str]:
        out = set()
        for x in labels:
            full = {named(y) for y in labels if y.startswith(x + " (")} if "(" not in x else set()
            out.add(full.pop() if len(full) == 1 else named(x))
        return out

    rep = SourceReport()
    convs = [c for c in load_conversations(f"qmsum:{shared_data / 'qmsum'}", rep) if c.dataset == "qmsum_committee"]
    assert len(convs) == 30
    listed = distinct = participants = 0
    for c in convs:
        labels = {t["speaker"].strip() for t in json.loads(Path(c.source_file).read_text())["meeting_transcripts"]}
        listed += len(labels)
        distinct += len(people(labels))
        participants += len(c.participants)
        assert len({p.name for p in c.participants}) == len(c.participants)
    assert (listed, distinct, participants) == (996, 665, 665)
    for c in convs:  # one speaker, one participant: no bare label beside its qualified form
        names = {p.name for p in c.participants}
        assert not [x for x in names if any(y.startswith(x + " (") for y in names)], c.id
    assert {m["dataset"] for m in rep.merged_speakers} == {"qmsum_committee"}  # Product, Academic: none
    assert sum(len(m["labels"]) - 1 for m in rep.merged_speakers) == listed - participants
    assert len(rep.merged_speakers) == 330  # 329 merges of two labels, one of three (Bruce Stanton, covid_7)
    assert sum(m["labels"][0] == "The Chair" for m in rep.merged_speakers) == 9  # the nine Canadian meetings


# ---------------------------------------------------------------- unreadable files (issue #24)


def _good_source(kind, d):
    d.mkdir(parents=True, exist_ok=True)
    if kind == "qmsum":
        write_json(d / "good.json", qmsum_meeting(3))
    elif kind == "tcr":
        write_json(d / "good.json", {"NCPC": {"good": _tcr_meeting()}})
    elif kind == "chat":
        write_json(
            d / "good.json",
            [{"id": "good", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}],
        )
    else:
        _corpus(d / "good", [{**_utt(1, "A", conv="good"), "meta": {}}, {**_utt(2, "B", conv="good"), "meta": {}}])
    return d


@pytest.mark.parametrize("kind", ["qmsum", "tcr", "chat", "convokit"])
@pytest.mark.parametrize("on_error", ["fail", "skip"])
def test_dangling_symlink_and_symlink_loop_are_reported_never_silently_skipped(tmp_path, kind, on_error):
    d = _good_source(kind, tmp_path / "src")
    name = "utterances.jsonl" if kind == "convokit" else "gone.json"
    for sub in ("gone", "loop"):
        (d / sub).mkdir()
    (d / "gone" / name).symlink_to(tmp_path / "nowhere.json")
    (d / "loop" / name).symlink_to(d / "loop" / name)
    rep = SourceReport()
    convs = list(load_conversations(f"{kind}:{d}", rep, on_error=on_error))
    assert [c.id for c in convs] == ["good"]
    assert [(s["file"], s["record"], s["reason"]) for s in rep.skipped] == [
        (
            str(d / "gone" / name),
            None,
            f"unreadable: dangling symlink (to {tmp_path / 'nowhere.json'}, which does not exist)",
        ),
        (str(d / "loop" / name), None, "unreadable: symlink loop"),
    ]
    assert rep.files_read == 1


def test_convokit_dangling_optional_file_is_reported(tmp_path):
    d = _good_source("convokit", tmp_path / "src") / "good"
    (d / "speakers.json").unlink()
    (d / "speakers.json").symlink_to(tmp_path / "nowhere.json")
    rep = SourceReport()
    [c] = list(load_conversations(f"convokit:{d}", rep))
    assert c.id == "good"
    assert [(s["file"], s["reason"]) for s in rep.skipped] == [
        (
            str(d / "speakers.json"),
            f"unreadable: dangling symlink (to {tmp_path / 'nowhere.json'}, which does not exist)",
        )
    ]


def test_unreadable_file_and_folder_are_reported(tmp_path, monkeypatch):
    import os

    d = _good_source("qmsum", tmp_path / "src")
    write_json(d / "secret.json", qmsum_meeting(3))
    (d / "locked").mkdir()  # tests run as root, who may read anything: the refusals are simulated
    real_access, real_walk = os.access, os.walk

    def walk(top, onerror=None, **kw):  # as when os.scandir is refused on the locked folder
        for root, dirs, files in real_walk(top, onerror=onerror, **kw):
            if "locked" in dirs:
                dirs.remove("locked")
                onerror(PermissionError(13, "Permission denied", str(d / "locked")))
            yield root, dirs, files

    monkeypatch.setattr(
        os, "access", lambda p, mode: real_access(p, mode) and os.path.basename(p) not in ("secret.json", "locked")
    )
    monkeypatch.setattr(os, "walk", walk)
    rep = SourceReport()
    assert [c.id for c in load_conversations(f"qmsum:{d}", rep)] == ["good"]
    reasons = {s["file"]: s["reason"] for s in rep.skipped}
    assert reasons[str(d / "secret.json")] == "unreadable: permission denied"
    assert reasons[str(d / "locked")] == "unreadable: folder cannot be listed (permission denied)"


def test_build_prints_unreadable_files(tmp_path, capsys):
    from cocoeval.cli import main

    d = tmp_path / "src" / "product"
    for i in range(2):
        write_json(d / f"M{i}.json", qmsum_meeting(150))
    (d / "gone.json").symlink_to(tmp_path / "nowhere.json")
    assert (
        main(["build", "--source", f"qmsum:{tmp_path / 'src'}", "--out", str(tmp_path / "o"), "--per-dataset", "1"])
        == 0
    )
    out = capsys.readouterr().out
    assert "skipped 0 conversation(s) and 1 file/record(s)" in out
    # named relative to the folder holding the source (the report carries no absolute path)
    assert "  skipped src/product/gone.json: unreadable: dangling symlink" in out
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["sources"][0]["skipped"][0]["file"] == "src/product/gone.json"
