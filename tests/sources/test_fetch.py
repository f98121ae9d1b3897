"""``cocoeval fetch`` against a loopback HTTP server serving archives built here from tiny files:
success, resume after a truncated response, 404, truncated, corrupt and wrong-shaped archives
(clear errors, nothing half-written in place), the manifest and its copy in build reports."""

from __future__ import annotations

import io
import json
import shlex
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cocoeval import build
from cocoeval.cli import main
from cocoeval.core.errors import NotFoundError
from cocoeval.sources._download import DownloadError
from cocoeval.sources.demo import write_demo_data
from cocoeval.sources.fetch import MANIFEST, FetchError, fetch, file_hashes, tree_sha256

from ..conftest import qmsum_meeting


# ----------------------------------------------------------------------------- loopback server
class Server:
    """Serves ``routes[path] = (body, mode)``; mode "ok", "truncate" (always sends half the body
    under the full Content-Length), "truncate_once" (the first request only). Honours
    ``Range: bytes=N-`` with 206. Unknown paths: 404. Logs (path, Range header) of each request."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[bytes, str]] = {}
        self.log: list[tuple[str, str | None]] = []
        srv = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                rng = self.headers.get("Range")
                srv.log.append((self.path, rng))
                if self.path not in srv.routes:
                    self.send_error(404)
                    return
                body, mode = srv.routes[self.path]
                start = int(rng.removeprefix("bytes=").rstrip("-")) if rng else 0
                if start >= len(body):
                    self.send_error(416)
                    return
                self.send_response(206 if start else 200)
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                self.send_header("Content-Length", str(len(body) - start))
                self.end_headers()
                payload = body[start:]
                if mode == "truncate" or (mode == "truncate_once" and sum(p == self.path for p, _ in srv.log) == 1):
                    payload = payload[: len(payload) // 2]
                    self.close_connection = True
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def serve(self, path: str, body: bytes, mode: str = "ok") -> str:
        self.routes[path] = (body, mode)
        return self.url + path


@pytest.fixture
def server():
    s = Server()
    s.thread.start()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def make_zip(files: dict[str, bytes | str], *, stored: bool = False) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def qmsum_files(top: str = "QMSum-main/", domains=("Product", "Academic", "Committee")) -> dict[str, str]:
    files = {f"{top}LICENSE": "MIT License (test copy)", f"{top}README.md": "QMSum"}
    for d in domains:
        for split in ("train", "val"):
            files[f"{top}data/{d}/{split}/{d[:3]}-{split}.json"] = json.dumps(qmsum_meeting(80))
    return files


def nothing_in_place(out: Path) -> bool:
    """No dataset folder and no manifest (a partial download in .partial may stay, to resume)."""
    return not out.exists() or {p.name for p in out.iterdir()} <= {".partial"}


# ----------------------------------------------------------------------------- success
def test_fetch_unpacks_verifies_records_and_build_copies_the_manifest(server, tmp_path, capsys):
    url = server.serve("/qmsum.zip", make_zip(qmsum_files()))
    out = tmp_path / "data"
    assert main(["fetch", "qmsum", "--out", str(out), "--url", url]) == 0
    printed = capsys.readouterr().out
    folder = out / "qmsum"
    assert (folder / "data/Product/train/Pro-train.json").is_file()  # QMSum's own layout, top folder dropped
    assert not (out / ".partial").exists()
    entry = json.loads((out / MANIFEST).read_text())["datasets"]["qmsum"]
    assert entry["url"] == url and entry["files"] == file_hashes(folder)
    assert set(entry["files"]) == {p.removeprefix("QMSum-main/") for p in qmsum_files()}
    assert entry["tree_sha256"] == tree_sha256(entry["files"])
    assert entry["conversations"]["qmsum:data/Committee/val"] == 1
    # the printed build command works and build copies the manifest entry into its report
    cmd = next(line.strip() for line in printed.splitlines() if line.strip().startswith("cocoeval build"))
    words = shlex.split(cmd)
    sources = [words[i + 1] for i, w in enumerate(words) if w == "--source"]
    assert len(sources) == 6
    report = build(sources, tmp_path / "bench")
    assert set(report["datasets"]) == {"qmsum_product", "qmsum_academic", "qmsum_committee"}
    [copied] = report["fetched_data"]
    assert copied["dataset"] == "qmsum" and copied["tree_sha256"] == entry["tree_sha256"]
    assert copied["unchanged_since_fetch"] is True
    saved = json.loads((tmp_path / "bench/report.json").read_text())
    assert saved["fetched_data"][0]["files"] == entry["files"]
    # a changed file is seen by build, and refused by a second fetch (which otherwise skips)
    server.log.clear()
    assert main(["fetch", "qmsum", "--out", str(out), "--url", url]) == 0
    assert "skipped" in capsys.readouterr().out and server.log == []
    (folder / "LICENSE").write_text("edited")
    report = build(sources, tmp_path / "bench2")
    assert report["fetched_data"][0]["unchanged_since_fetch"] is False
    assert report["fetched_data"][0]["changed_files"] == ["LICENSE"]
    with pytest.raises(FetchError, match="does not match"):
        fetch("qmsum", out, url=url, log=lambda _: None)
    fetch("qmsum", out, url=url, force=True, log=lambda _: None)
    assert (folder / "LICENSE").read_text() == "MIT License (test copy)"


def test_fetch_iq2_and_tcr_through_the_environment_override(server, tmp_path, monkeypatch, capsys):
    gen = write_demo_data(tmp_path / "gen")
    iq2 = {f"iq2-corpus/{p.name}": p.read_bytes() for p in gen["convokit"].iterdir()}
    sim = (gen["tcr"] / "DEMO_SIM.json").read_bytes()
    monkeypatch.setenv("COCOEVAL_FETCH_IQ2_URL", server.serve("/iq2.zip", make_zip(iq2)))
    monkeypatch.setenv(
        "COCOEVAL_FETCH_TCR_URL", server.serve("/tcr.zip", make_zip({"data/SIM.json": sim, "data/NCPC.json": sim}))
    )
    out = tmp_path / "data"
    assert main(["fetch", "iq2", "tcr", "--out", str(out)]) == 0
    assert (out / "iq2-corpus/utterances.jsonl").is_file() and (out / "tcr/SIM.json").is_file()
    assert set(json.loads((out / MANIFEST).read_text())["datasets"]) == {"iq2", "tcr"}
    cmd = capsys.readouterr().out
    assert f"convokit:{out / 'iq2-corpus'}" in cmd and f"tcr:{out / 'tcr' / 'NCPC.json'}#ncpc" in cmd


# ----------------------------------------------------------------------------- failures
def test_resume_after_a_truncated_download(server, tmp_path):
    body = make_zip(qmsum_files())
    url = server.serve("/flaky.zip", body, "truncate_once")
    out = tmp_path / "data"
    with pytest.raises(DownloadError, match=r"truncated download: got [\d,]+ of [\d,]+ bytes") as e:
        fetch("qmsum", out, url=url, log=lambda _: None)
    assert "again" in str(e.value)
    assert nothing_in_place(out)
    part = out / ".partial" / "qmsum.zip"
    assert part.stat().st_size == len(body) // 2
    fetch("qmsum", out, url=url, log=lambda _: None)
    assert server.log[-1] == ("/flaky.zip", f"bytes={len(body) // 2}-")  # resumed, not restarted
    assert (out / "qmsum/data/Academic/val/Aca-val.json").is_file()
    assert not (out / ".partial").exists()


def test_always_truncated_download_leaves_nothing_in_place(server, tmp_path):
    url = server.serve("/cut.zip", make_zip(qmsum_files()), "truncate")
    out = tmp_path / "data"
    for _ in range(2):
        with pytest.raises(DownloadError, match="truncated"):
            fetch("qmsum", out, url=url, log=lambda _: None)
        assert nothing_in_place(out)


def test_404_is_a_clear_error(server, tmp_path):
    out = tmp_path / "data"
    code = main(["fetch", "qmsum", "--out", str(out), "--url", server.url + "/missing.zip"])
    assert code == 2
    with pytest.raises(NotFoundError, match="404"):
        fetch("qmsum", out, url=server.url + "/missing.zip", log=lambda _: None)
    assert not out.exists()


@pytest.mark.parametrize("case", ["missing folder", "unreadable meeting", "not a zip", "crc error"])
def test_wrong_shape_or_corrupt_archive_is_refused_and_removed(server, tmp_path, case):
    files = qmsum_files()
    if case == "missing folder":
        body = make_zip(qmsum_files(domains=("Product", "Academic")))
        match = "missing data/Committee/train"
    elif case == "unreadable meeting":
        files["QMSum-main/data/Academic/val/Aca-val.json"] = json.dumps({"meeting_transcripts": "oops"})
        body, match = make_zip(files), "loader cannot read"
    elif case == "not a zip":
        body, match = b"<html>moved</html>", "not a zip archive"
    else:
        body = bytearray(make_zip(files, stored=True))
        i = body.index(b"MIT License (test copy)")
        body[i] ^= 0x20
        body, match = bytes(body), "CRC error"
    out = tmp_path / "data"
    url = server.serve("/bad.zip", body)
    with pytest.raises(FetchError, match=match):
        fetch("qmsum", out, url=url, log=lambda _: None)
    assert not out.exists()  # not even the bad archive: the next call downloads anew
    code = main(["fetch", "qmsum", "--out", str(out), "--url", url])
    assert code == 2


def test_cli_refuses_a_url_for_several_datasets_and_unknown_names(tmp_path, capsys):
    assert main(["fetch", "qmsum", "iq2", "--url", "http://127.0.0.1:9/x.zip", "--out", str(tmp_path)]) == 2
    assert "--url names one archive" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["fetch", "squad"])
    assert e.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_a_server_error_is_a_clear_error_and_leaves_nothing(tmp_path):
    class Failing(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_error(503)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        out = tmp_path / "data"
        with pytest.raises(DownloadError, match="HTTP 503"):
            fetch("tcr", out, url=f"http://127.0.0.1:{httpd.server_address[1]}/data.zip", log=lambda _: None)
        assert not out.exists() or not any(out.iterdir())
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_partial_download_resumes_only_from_its_own_url(server, tmp_path):
    body = make_zip(qmsum_files())
    cut = server.serve("/a.zip", body, "truncate")
    other = server.serve("/b.zip", body)
    out = tmp_path / "data"
    with pytest.raises(DownloadError, match="truncated"):
        fetch("qmsum", out, url=cut, log=lambda _: None)
    fetch("qmsum", out, url=other, log=lambda _: None)
    assert server.log[-1] == ("/b.zip", None)  # started afresh from the other URL
    assert not (out / ".partial").exists() and (out / "qmsum/LICENSE").is_file()
