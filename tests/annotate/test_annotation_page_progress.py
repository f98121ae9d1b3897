"""What ``cocoeval annotate-import`` reports after each import: every annotator's progress through
the export (``--key``) and Krippendorff's α per behaviour so far among all annotators of the run,
checked against α computed here by hand from its coincidence matrix (binary labels, missing
values as Krippendorff allows), and labels of an earlier continuation left out."""

from __future__ import annotations

import json
import math

from cocoeval.cli import main
from cocoeval.core.jsonio import write_jsonl
from cocoeval.core.schema import Continuation

from ..sim_helpers import instance
from .test_annotation_page import hostile_run_dir

HEAD = "annotator,instance_id,target,turn,behaviours,not_in_taxonomy,consistency,collaborativeness\n"

# {annotator: {(instance, target, turn): behaviours}}; carol labels only some turns
LABELS = {
    "ann": {
        ("d/c0/0", "reference", 1): "repetition",
        ("d/c0/0", "reference", 2): "none",
        ("d/c0/0", "reference", 3): "repetition;off_topic",
        ("d/c1/0", "reference", 1): "none",
        ("d/c1/0", "reference", 2): "repetition",
        ("d/c1/0", "reference", 3): "none",
        ("d/c0/0", "simA", 1): "off_topic",
        ("d/c0/0", "simA", 2): "none",
        ("d/c0/0", "simA", 3): "none",
    },
    "bob": {
        ("d/c0/0", "reference", 1): "repetition",
        ("d/c0/0", "reference", 2): "repetition",
        ("d/c0/0", "reference", 3): "off_topic",
        ("d/c1/0", "reference", 1): "none",
        ("d/c1/0", "reference", 2): "none",
        ("d/c1/0", "reference", 3): "none",
        ("d/c0/0", "simA", 1): "off_topic",
        ("d/c0/0", "simA", 2): "repetition",
        ("d/c0/0", "simA", 3): "none",
    },
    "carol": {
        ("d/c0/0", "reference", 1): "none",
        ("d/c0/0", "reference", 2): "repetition",
        ("d/c1/0", "reference", 2): "repetition",
        ("d/c0/0", "simA", 1): "off_topic",
    },
}


def by_hand(labels: dict[str, dict[tuple[str, str, int], str]], behaviour: str, units: set) -> float:
    """Krippendorff's nominal α of binary labels: 1 - D_o/D_e with the coincidence matrix over the
    units two or more annotators labelled; o01 = sum over units of 2·k·(m-k)/(m-1) / 2."""
    n0 = n1 = o01 = 0.0
    for u in units:
        vals = [behaviour in lab[u].split(";") for lab in labels.values() if u in lab]
        m, k = len(vals), sum(vals)
        if m < 2:
            continue
        n0, n1, o01 = n0 + m - k, n1 + k, o01 + k * (m - k) / (m - 1)
    n = n0 + n1
    return 1 - (n - 1) * o01 / (n0 * n1)


def _import(tmp_path, run, ann, rows, capsys):
    f = tmp_path / f"{ann}.csv"
    f.write_text(HEAD + "".join(f"{ann},{i},{t},{n},{b}\n" for (i, t, n), b in rows.items()))
    rep = tmp_path / f"{ann}.json"
    assert main(["annotate-import", str(f), str(run), "--report", str(rep)]) == 0
    return capsys.readouterr().out, json.loads(rep.read_text())["status"]


def test_alpha_so_far_agrees_with_a_computation_by_hand_and_grows_with_each_annotator(tmp_path, capsys):
    run = hostile_run_dir(tmp_path)
    out, st = _import(tmp_path, run, "ann", LABELS["ann"], capsys)
    assert "1 annotator(s) so far: α needs two" in out and all(a["alpha"] is None for a in st["alpha"])
    assert "give the export's key.json (--key)" in out and st["progress"] == [] and st["label"] == "beyond the paper"
    out, st = _import(tmp_path, run, "bob", LABELS["bob"], capsys)
    alpha = {a["behaviour"]: a for a in st["alpha"]}
    units = set(LABELS["ann"]) | set(LABELS["bob"])
    for b in ("repetition", "off_topic"):
        assert math.isclose(alpha[b]["alpha"], by_hand(dict(list(LABELS.items())[:2]), b, units), abs_tol=1e-12)
    assert alpha["repetition"]["turns"] == 9
    assert alpha["interruption"]["alpha"] is None and "no turn marked with it" in alpha["interruption"]["note"]
    out, st = _import(tmp_path, run, "carol", LABELS["carol"], capsys)
    alpha = {a["behaviour"]: a for a in st["alpha"]}
    for b in ("repetition", "off_topic"):
        want = by_hand(LABELS, b, units)
        assert math.isclose(alpha[b]["alpha"], want, abs_tol=1e-12)
        assert f"{alpha[b]['name']}: α {want:.2f}" in out
    assert "among 3 annotator(s), over the 9 turn(s) two or more labelled" in out
    # any behaviour: a turn marked with anything
    anyb = {a: {u: ("x" if v != "none" else "none") for u, v in lab.items()} for a, lab in LABELS.items()}
    assert math.isclose(alpha["any behaviour"]["alpha"], by_hand(anyb, "x", units), abs_tol=1e-12)

    # simA simulated again (another continuation): its labels are stale and leave α
    insts = [instance(f"d/c{i}/0", n_hist=3, n_ref=3) for i in range(2)]
    write_jsonl(
        run / "continuations" / "simA.jsonl",
        [Continuation(instance_id=i.id, setup_id="idB", setup_name="simA", turns=i.reference) for i in insts],
    )
    from cocoeval.analysis.agreement import nominal_alpha
    from cocoeval.annotate.progress import import_status
    from cocoeval.core.taxonomy import load_taxonomy
    from cocoeval.run import Run

    st2 = import_status(Run.open(run), run, load_taxonomy(), nominal_alpha)
    ref = {u for u in units if u[1] == "reference"}
    a2 = {a.behaviour: a for a in st2.alpha}
    assert a2["repetition"].turns == 6
    assert a2["repetition"].alpha is not None
    assert math.isclose(
        a2["repetition"].alpha,
        by_hand({k: {u: v for u, v in lab.items() if u in ref} for k, lab in LABELS.items()}, "repetition", ref),
        abs_tol=1e-12,
    )


def test_progress_counts_items_labelled_completely_and_begun(tmp_path, capsys):
    run = hostile_run_dir(tmp_path)
    exp = tmp_path / "exp"
    assert main(["annotate-export", str(run), "--out", str(exp), "--fine-conversations", "4"]) == 0
    key = json.loads((exp / "key.json").read_text())
    items = list(key)
    # dan: the first item completely (3 turns and both scores), the second one turn only
    rows = [f"dan,{items[0]},{n},none,,,\n" for n in (1, 2, 3)] + [
        f"dan,{items[0]},,,,5,6\n",
        f"dan,{items[1]},1,none,,,\n",
    ]
    f = tmp_path / "dan.csv"
    f.write_text("annotator,item_id,turn,behaviours,not_in_taxonomy,consistency,collaborativeness\n" + "".join(rows))
    capsys.readouterr()
    assert main(["annotate-import", str(f), str(run), "--key", str(exp / "key.json")]) == 0
    out = capsys.readouterr().out
    assert f"progress through the export of {exp / 'key.json'} (4 items):" in out
    assert "  dan: 1 of 4 items labelled, 1 begun" in out
