"""End to end in a real browser: `opforge serve` and `opforge worker` processes on one SQLite store; headless Chromium
(Debian's `chromium` package) opens the queue page, fills in the submit form — token, task file, seed kernel, a tiny
budget — submits it, lands on the job's page and watches it (the page reloads itself) until the worker has finished
the job and the page shows its best speedup; then the run's page shows the best kernel's source.

Chromium is driven through the Chrome DevTools Protocol over `--remote-debugging-pipe` (JSON messages separated by
NUL bytes on file descriptors 3 and 4): no websocket client and no downloaded browser needed. Skipped with a reason
when no Chromium is installed (.ci/run installs it when it runs as root).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from store import JobState, get_store

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "tests" / "tasks" / "relu.py"
SEED = ROOT / "benchmarks" / "tiny" / "relu.seed.py"
OPFORGE = [sys.executable, "-m", "opforge"]
TOKEN = "browser-test-token"
DEADLINE_S = 150.0


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """A headless Chromium and one page of it, over the DevTools protocol on a pipe."""

    def __init__(self, binary: str, profile: Path, log: Path) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        args = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--remote-debugging-pipe",
                f"--user-data-dir={profile}", "about:blank"]
        # The browser reads commands on fd 3 and writes answers on fd 4: the shell puts the pipes there.
        self.proc = subprocess.Popen(["sh", "-c", 'exec "$@" 3<&0 4>&1 0</dev/null 1>&2', "sh", *args],
                                     stdin=to_browser_r, stdout=from_browser_w, stderr=log.open("w"),
                                     start_new_session=True)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._next_id = 0
        self._answers: dict[int, dict[str, Any]] = {}
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable", session=True)

    def _read(self) -> None:
        buffer = b""
        while chunk := os.read(self._from_browser, 1 << 16):
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for raw in messages:
                msg = json.loads(raw)
                if "id" in msg:
                    with self._cond:
                        self._answers[msg["id"]] = msg
                        self._cond.notify_all()

    def call(self, method: str, params: dict[str, Any] | None = None, session: bool = False,
             timeout_s: float = 30.0) -> dict[str, Any]:
        self._next_id += 1
        ident = self._next_id
        msg: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        with self._cond:
            if not self._cond.wait_for(lambda: ident in self._answers, timeout=timeout_s):
                raise TimeoutError(f"Chromium did not answer {method} within {timeout_s:g} s")
            answer = self._answers.pop(ident)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def eval(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float, what: str) -> Any:
        """Poll a JS expression until it is truthy (a page loading in between just means: not yet)."""
        end = time.monotonic() + timeout_s
        last: Any = None
        while time.monotonic() < end:
            try:
                last = self.eval(expression)
            except RuntimeError:
                last = None
            if last:
                return last
            time.sleep(0.25)
        text = self.eval("document.body ? document.body.innerText : ''")
        raise AssertionError(f"timed out waiting for {what}; the page says:\n{text}")

    def goto(self, url: str) -> None:
        self.call("Page.navigate", {"url": url}, session=True)
        self.wait_for(f"document.readyState === 'complete' && location.href === {json.dumps(url)}", 30, url)

    def set_files(self, selector: str, path: Path) -> None:
        root = self.call("DOM.getDocument", {"depth": 0}, session=True)["root"]["nodeId"]
        node = self.call("DOM.querySelector", {"nodeId": root, "selector": selector}, session=True)["nodeId"]
        assert node, f"no {selector} on the page"
        self.call("DOM.setFileInputFiles", {"nodeId": node, "files": [str(path)]}, session=True)

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout_s=5)
        except Exception:  # noqa: BLE001 - closing anyway
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until_up(base: str, server: subprocess.Popen, log: Path) -> None:
    end = time.monotonic() + 60
    while time.monotonic() < end:
        if server.poll() is not None:
            raise AssertionError(f"opforge serve exited with {server.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{base}/api/health", timeout=2) as r:
                if json.load(r)["submissions_enabled"]:
                    return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"opforge serve did not answer within 60 s:\n{log.read_text()}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_a_task_submitted_through_the_page_runs_to_the_end(tmp_path: Path) -> None:
    binary = _chromium()
    if binary is None:
        pytest.skip("no Chromium installed (Debian: apt-get install chromium); the browser test needs one")
    url = f"sqlite:///{tmp_path / 'opforge.db'}"
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "OPFORGE_TOKEN": TOKEN}
    env.pop("OPFORGE_LLM_MODEL", None)  # the offline tuner, whatever the machine has configured
    server_log, worker_log = tmp_path / "serve.log", tmp_path / "worker.log"
    server = subprocess.Popen([*OPFORGE, "serve", "--db", url, "--port", str(port)], cwd=tmp_path, env=env,
                              stdout=subprocess.DEVNULL, stderr=server_log.open("w"))
    worker = subprocess.Popen([*OPFORGE, "worker", "--no-require-sandbox", "--db", url, "--runner", "local", "--workers", "2", "--max-jobs",
                               "1", "--poll-s", "0.5", "--heartbeat-s", "0.5", "--lease-s", "30"],
                              cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=worker_log.open("w"))
    browser = None
    started = time.monotonic()
    try:
        _wait_until_up(base, server, server_log)
        browser = Browser(binary, tmp_path / "profile", tmp_path / "chromium.log")
        browser.goto(f"{base}/")
        browser.set_files("#task", TASK)
        browser.set_files("#seed_kernel", SEED)
        browser.eval(f"""(() => {{
            const set = (id, v) => {{ document.getElementById(id).value = v; }};
            set('token', {json.dumps(TOKEN)}); set('budget', '3'); set('timing_s', '0.2');
            document.getElementById('no_archive').checked = true;
            document.getElementById('go').click();
        }})()""")
        path = browser.wait_for("/^\\/jobs\\/\\d+$/.test(location.pathname) && document.readyState === 'complete'"
                                " && location.pathname", 30, "the job's page after submitting")
        job_id = int(path.rsplit("/", 1)[1])

        # The job page reloads itself every few seconds until the job ends.
        remaining = DEADLINE_S - (time.monotonic() - started)
        state = browser.wait_for("(() => { const s = document.getElementById('state');"
                                 " return s && ['done', 'failed', 'cancelled'].includes(s.dataset.state)"
                                 " && s.dataset.state; })()", remaining, "the job to end")
        assert state == "done", worker_log.read_text()[-3000:]
        speedup = browser.eval("document.getElementById('best').dataset.speedup")
        shown = browser.eval("document.getElementById('best').innerText")
        assert speedup and float(speedup) > 0 and re.fullmatch(r"[0-9.e+-]+x", shown), shown
        assert browser.eval("document.getElementById('progress').innerText").strip().startswith("3/3")

        # The run's page: the best kernel's source, escaped into a <pre>.
        run_link = browser.eval("document.querySelector('a[href^=\"/runs/\"]').getAttribute('href')")
        browser.goto(f"{base}{run_link}")
        source = browser.eval("document.querySelector('pre.source').textContent")
        assert "@triton.jit" in source and "class ModelNew" in source

        with get_store(url) as store:  # what the store says agrees with the pages
            job = store.get_job(job_id)
            assert job.state is JobState.DONE and job.config.get("via") == "http"
            assert store.run_totals(job.run_id).queue == {"done": 3}
        assert worker.wait(timeout=30) == 0  # --max-jobs 1: the worker exits after the job
    finally:
        if browser is not None:
            browser.close()
        _stop(worker)
        _stop(server)
