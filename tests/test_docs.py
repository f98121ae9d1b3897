"""The documentation stays true: every params example in README.md and docs/*.md passes
``cocoeval check``, the README stays short, and every page and anchor it links exists.

A params example is a ```yaml block whose top level has ``name:``, ``bench:``, ``build:``,
``setups:`` or ``judges:``. A fragment (no ``name``, or neither ``bench`` nor ``build``) is wrapped
in a minimal params file that builds the shipped demo data (``build: {demo_data: true}``). Each
example is written to a folder of its own, where what its relative paths name is provided: a
benchmark built from the shipped QMSum sample for ``bench:``, a copy of that sample for a
``qmsum:`` source. Fake API keys are in the environment, so ``check`` looks at everything else:
the schema, names, model specs, data and benchmark."""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import pytest
import yaml

from cocoeval.cli import main
from cocoeval.sources.demo import sample_dir

from .conftest import ROOT, TEST_KEY

README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
PARAMS_KEYS = {"name", "bench", "build", "setups", "judges"}
MAX_README_LINES = 200
MAX_README_WORDS = 900
"""Read in five minutes: the two commands, what the demo shows, a first real run, where the docs are."""
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[A-Za-z0-9_+-]*)[ \t]*$")
KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY", "OPENAI_COMPATIBLE_API_KEY")


def code_blocks(path: Path) -> list[tuple[int, str, str]]:
    """(line of the opening fence, language, dedented text) of every fenced block in ``path``."""
    blocks, lines = [], path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, indent, body = i + 1, m["indent"], []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        blocks.append((start, m["lang"].lower(), textwrap.dedent("\n".join(body))))
        i += 1
    return blocks


def params_examples(pages: list[Path] = PAGES) -> list[tuple[str, str]]:
    """(where, YAML text) of every params example of ``pages``."""
    found = []
    for page in pages:
        for line, lang, text in code_blocks(page):
            if lang not in ("yaml", "yml"):
                continue
            data = yaml.safe_load(text)
            if isinstance(data, dict) and PARAMS_KEYS & set(data):
                found.append((f"{_name(page)}:{line}", text))
    return found


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix() if page.is_relative_to(ROOT) else str(page)


def walkthrough(page: Path, name: str) -> str:
    """The code block after ``<!-- walkthrough: NAME -->`` in ``page``."""
    text = page.read_text(encoding="utf-8")
    at = text.index(f"<!-- walkthrough: {name} -->")
    line = text[:at].count("\n") + 1
    return next(body for start, lang, body in code_blocks(page) if start > line and lang == "python")


WALKTHROUGH = walkthrough(DOCS / "extending.md", "simulator")
exec(compile(WALKTHROUGH, "docs/extending.md (simulator walk-through)", "exec"), {"__name__": "docs_walkthrough"})
# registered now, so the docs' params examples that name it pass cocoeval check

EXAMPLES = params_examples()


def as_params(text: str) -> dict:
    """The example as a whole params file: a fragment gets a run name and the demo data."""
    data = yaml.safe_load(text)
    data.setdefault("name", "docs-example")
    if "extends" in data:  # the rest comes from the file it extends (``extended``)
        return data
    if "bench" not in data and "build" not in data:
        data["build"] = {"demo_data": True}
    return data


@pytest.fixture(scope="module")
def built_bench(tmp_path_factory) -> Path:
    """A small benchmark from the shipped QMSum sample, for examples that name ``bench:``."""
    out = tmp_path_factory.mktemp("bench") / "bench"
    rc = main(
        [
            "build",
            "--source",
            f"qmsum:{sample_dir()}",
            "--out",
            str(out),
            "--history-turns",
            "8",
            "--reference-turns",
            "6",
            "--min-prior-turns",
            "5",
            "--per-dataset",
            "2",
        ]
    )
    assert rc == 0 and (out / "eval.jsonl").is_file()
    return out


def provide_paths(data: dict, folder: Path, built_bench: Path) -> None:
    """Put what the example's relative paths name in place, beside its params file in ``folder``."""
    if data.get("bench"):
        bench = (folder / data["bench"]).resolve()
        if not bench.exists():
            shutil.copytree(built_bench, bench)
    for s in data.get("setups") or []:
        if isinstance(s, dict) and s.get("continuations"):  # an imported setup: a file to hash
            f = (folder / s["continuations"]).resolve()
            f.parent.mkdir(parents=True, exist_ok=True)
            f.touch()
    for spec in (data.get("build") or {}).get("sources") or []:
        kind, _, rest = str(spec).partition(":")
        path = (folder / rest.split("#")[0]).resolve()
        if kind == "qmsum" and not path.exists():
            shutil.copytree(sample_dir(), path, ignore=shutil.ignore_patterns("*.md", "LICENSE"))


def extended(name: str, page: str) -> dict:
    """The params example that an example's ``extends: NAME`` names: the example of the same
    ``page`` whose first line is the comment ``# params/NAME``."""
    found = [t for w, t in EXAMPLES if w.split(":")[0] == page and t.startswith(f"# params/{name}")]
    assert found, f"no params example starting '# params/{name}' for an example extending it"
    return as_params(found[0])


def check(path: Path, capsys) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["check", str(path)])
    out = capsys.readouterr()
    return rc, out.out + out.err


def validate(text: str, tmp_path: Path, built_bench: Path, monkeypatch, capsys, where: str = "") -> tuple[int, str]:
    """``cocoeval check`` on the example, and the id of every setup and judge (their prompts must
    exist). Returns check's exit status and output."""
    for key in KEYS:
        monkeypatch.setenv(key, TEST_KEY)
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://example.openai.azure.com")
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")
    data = as_params(text)
    folder = tmp_path / "example" / "params"  # "../x" in an example lands in tmp_path/example/x
    folder.mkdir(parents=True)
    provide_paths(data, folder, built_bench)
    if "extends" in data:  # the example it extends, beside it
        base = extended(data["extends"], where.split(":")[0])
        provide_paths(base, folder, built_bench)
        (folder / data["extends"]).write_text(yaml.safe_dump(base, sort_keys=False), encoding="utf-8")
    path = folder / "params.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    rc, output = check(path, capsys)
    if rc == 0:
        from cocoeval.run import load_params

        exp = load_params(path)
        for s in exp.params.setups:
            s.setup_id(exp.taxonomy)
        for j in exp.params.judges:
            for kind in j.kind:
                j.judge_id(kind, exp.taxonomy)
    return rc, output


def test_the_docs_have_params_examples():
    where = {w.split(":")[0] for w, _ in EXAMPLES}
    assert len(EXAMPLES) >= 5 and "README.md" in where, EXAMPLES


@pytest.mark.parametrize(("where", "text"), EXAMPLES, ids=[w for w, _ in EXAMPLES])
def test_params_example_passes_check(where, text, tmp_path, built_bench, monkeypatch, capsys):
    if "local/" in text:
        from cocoeval.llm.providers.local import smollm2_path

        if smollm2_path() is None:
            pytest.skip("the example uses the local model; the local extra is not installed")
    rc, output = validate(text, tmp_path, built_bench, monkeypatch, capsys, where)
    assert rc == 0, f"{where}: the params example does not pass cocoeval check:\n{output}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("setups:\n  - {name: a, model: openai/gpt-4.1, prompt: vanilla, turns_per_call: 0}\n", "turns_per_call"),
        ("setups:\n  - {name: a, model: openai/gpt-4.1, promt: vanilla}\n", "promt"),
        ("judges:\n  - {name: human, model: openai/o4-mini}\n", "human"),
        ("name: x\nbench: .\n", "no benchmark at"),  # a folder, but no benchmark in it
        ("name: x\nbuild: {sources: ['convokit:../data/iq2-corpus']}\n", "no data at"),
        ("setups:\n  - {name: a, model: nosuchprovider/m}\n", "nosuchprovider"),
    ],
    ids=["out-of-range", "unknown-key", "reserved-name", "no-benchmark", "no-data", "unknown-provider"],
)
def test_a_broken_example_fails(text, expected, tmp_path, built_bench, monkeypatch, capsys):
    """What the example test would say of a broken example: check fails and names the problem."""
    rc, output = validate(text, tmp_path, built_bench, monkeypatch, capsys)
    assert rc != 0 and expected in output, output


def test_an_unknown_prompt_fails(tmp_path, built_bench, monkeypatch, capsys):
    from cocoeval.core.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown prompt"):
        validate(
            "setups:\n  - {name: a, model: openai/gpt-4.1, prompt: vanila}\n",
            tmp_path,
            built_bench,
            monkeypatch,
            capsys,
        )


def test_examples_are_found_in_indented_fences_and_fragments_are_wrapped(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# x\n\n1. step\n\n   ```yaml\n   judges:\n     - {name: j, model: openai/o4-mini}\n   ```\n\n"
        "```yaml\n# not params\nfoo: 1\n```\n\n```toml\n[a]\n```\n"
    )
    ((where, found),) = params_examples([page])
    assert where.endswith("page.md:5")
    data = as_params(found)
    assert data["name"] == "docs-example" and data["build"] == {"demo_data": True}
    assert data["judges"] == [{"name": "j", "model": "openai/o4-mini"}]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^\s*```.*?^\s*```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {slug(m) for m in re.findall(r"^#{1,6} +(.+?) *$", text, flags=re.M)}


def links(page: Path) -> list[tuple[str, str]]:
    """(target, anchor) of every relative Markdown link of ``page`` to a .md file or an anchor."""
    text = re.sub(r"^\s*```.*?^\s*```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    out = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        if file.endswith(".md") or (not file and anchor):
            out.append((file, anchor))
    return out


def test_readme_is_short_and_maps_every_docs_page():
    n = len(README.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_README_LINES, f"README.md has {n} lines; at most {MAX_README_LINES} (move the rest to docs/)"
    words = len(README.read_text(encoding="utf-8").split())
    assert words <= MAX_README_WORDS, (
        f"README.md has {words} words; at most {MAX_README_WORDS} (move the rest to docs/)"
    )
    linked = {f for f, _ in links(README) if f.startswith("docs/")}
    missing = sorted(f for f in linked if not (ROOT / f).is_file())
    assert not missing, f"README.md links docs pages that do not exist: {missing}"
    pages = sorted(p.relative_to(ROOT).as_posix() for p in DOCS.glob("*.md"))
    assert [p for p in pages if p not in linked] == [], "every docs/ page belongs in README's map"


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_links_between_pages_and_their_anchors_exist(page):
    bad = []
    for file, anchor in links(page):
        target = (page.parent / file).resolve() if file else page
        if not target.is_file():
            bad.append(f"{file}: no such page")
        elif anchor and anchor not in anchors(target):
            bad.append(f"{file}#{anchor}: no such heading")
    assert not bad, f"{page.relative_to(ROOT)}: {bad}"


def test_figures_the_readme_shows_exist():
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", README.read_text(encoding="utf-8"))
    assert images and all((ROOT / i).is_file() for i in images), images


def test_the_simulator_walkthrough_runs(srv, tmp_path):
    """docs/extending.md's simulator, run as the page says: registered by its decorator, named in a
    setup, its calls through the fake server; the forecast drives it too."""
    from cocoeval.core.errors import ConfigError
    from cocoeval.llm import LLMConfig, Runner
    from cocoeval.simulate.engine import simulate
    from cocoeval.simulate.plugins import check_setup
    from cocoeval.simulate.setup import PluginSetup

    from .sim_helpers import instance

    srv.configure(
        answers=[{"match": "What does Alice say next", "text": "Fine by me."}, {"match": "", "text": "Let us move on."}]
    )
    setup = PluginSetup(
        name="mine",
        simulator="echo-llm",
        model=f"openai/gpt-4.1-mini@{srv.openai_base}",
        options={"style": "brief", "window": 2},
    )
    inst = instance(n_ref=6)
    [c] = simulate([inst], [setup], Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False)))["mine"]
    assert c.status == "ok", c.reason
    assert [t.speaker for t in c.turns] == [t.speaker for t in inst.reference] and len(c.calls) == 6
    assert {t.text for t in c.turns if t.speaker == "Alice"} == {"Fine by me."}
    shown = srv.stats()["bodies"][0]["messages"][-1]["content"]
    assert shown.count("\n") == 3 and inst.history[-1].text in shown  # window: 2 turns, a blank line, the ask
    with pytest.raises(ConfigError, match="window"):  # refused when the params are read
        check_setup(PluginSetup(name="m", simulator="echo-llm", model="openai/gpt-4.1-mini", options={"window": 0}))
