"""The catalog notebook runs in a real Jupyter server, as it does in JupyterLab.

`Server` starts `python -m jupyter_server` (or `jupyterlab`) on 127.0.0.1 with a random free port and a token; the test
starts a kernel over the REST API in the session's JupyterLab (conftest's `jupyterlab`, shared with the files that look
at views in it), runs the code cells of nbs/core/catalog.ipynb through the kernel's websocket channel, and shuts the
kernel down with bounded waits.
"""
import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from tornado.websocket import websocket_connect

from omni_npu_port.docs.site import cell_directives, find_root, nbdev_settings

ROOT = find_root(Path(__file__).parent)
SETTINGS = nbdev_settings(ROOT)
NOTEBOOK = ROOT / SETTINGS["nbs_path"] / "core" / "catalog.ipynb"
CELL_TIMEOUT = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    "A jupyter_server process and a small REST client for it."
    def __init__(self, tmp: Path, app: str = "jupyter_server", root: Path = ROOT, env: dict | None = None, args=()):
        ("`app`: the module to run (`jupyter_server`, or `jupyterlab` for the whole JupyterLab); `env` added to the "
         "environment; `args` added to its command line.")
        self.port, self.token, self.tmp = free_port(), secrets.token_hex(16), tmp
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"), "JUPYTER_CONFIG_DIR": str(tmp / "config"),
               "JUPYTER_DATA_DIR": str(tmp / "data"), "IPYTHONDIR": str(tmp / "ipython"),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])), **(env or {})}
        self.log = open(tmp / "server.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", app, "--no-browser", "--ip=127.0.0.1", f"--port={self.port}",
             "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={root}",
             *args]
            + (["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),  # CI containers run as root
            env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def request(self, method: str, path: str, body=None, timeout: float = 10):
        req = urllib.request.Request(self.url + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            data = r.read()
            return r.status, (json.loads(data) if data else None)

    def wait_ready(self, timeout: float = 60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None: break
            try: return self.request("GET", "/api/status", timeout=2)[1]
            except (urllib.error.URLError, ConnectionError, TimeoutError): time.sleep(0.2)
        pytest.fail(f"jupyter_server did not answer /api/status within {timeout:.0f} s "
                    f"(exit code {self.proc.poll()}); its log:\n{self.logtext()}")

    def logtext(self) -> str:
        self.log.flush()
        return (self.tmp / "server.log").read_text(errors="replace")[-3000:]

    def stop(self):
        "Ask the server to shut down, then terminate and kill its process group if it doesn't."
        if self.proc.poll() is None:
            try: self.request("POST", "/api/shutdown", timeout=5)
            except (urllib.error.URLError, ConnectionError, TimeoutError): pass
            try: self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
                    try: os.killpg(self.proc.pid, sig)
                    except ProcessLookupError: break
                    try:
                        self.proc.wait(timeout=wait)
                        break
                    except subprocess.TimeoutExpired: continue
        self.log.close()


@pytest.fixture
def server(jupyterlab):
    "The session's JupyterLab (a jupyter_server with the lab extension), with a folder of this test's for its kernel."
    (jupyterlab.root / "catalog").mkdir(exist_ok=True)
    return jupyterlab


def code_cells(nb_path: Path) -> list:
    "The code cells a user runs in JupyterLab, less `#| eval: false` cells and cells for devices this test lacks."
    flags = SETTINGS.get("tst_flags", "")
    flags = set(flags.split() if isinstance(flags, str) else flags)
    cells = json.loads(nb_path.read_text(encoding="utf-8"))["cells"]
    out = []
    for c in cells:
        if c["cell_type"] != "code": continue
        src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        opts, _ = cell_directives(src)
        if opts.get("eval", "").lower() == "false" or flags & opts.keys(): continue
        out.append(src)
    return out


def message(session: str, code: str) -> dict:
    return {"header": {"msg_id": uuid.uuid4().hex, "username": "test", "session": session, "msg_type": "execute_request",
                       "version": "5.3", "date": ""},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}


async def run_cells(ws_url: str, token: str, cells: list) -> list:
    "Run each cell through the kernel's websocket channel; returns (reply status, error messages, outputs) per cell."
    conn = await asyncio.wait_for(websocket_connect(f"{ws_url}?token={token}"), 30)
    session, results = uuid.uuid4().hex, []
    try:
        for code in cells:
            msg = message(session, code)
            await conn.write_message(json.dumps(msg))
            reply, errors, outputs, idle = None, [], 0, False
            deadline = time.monotonic() + CELL_TIMEOUT
            while reply is None or not idle:
                left = deadline - time.monotonic()
                if left <= 0: raise TimeoutError(f"no reply within {CELL_TIMEOUT} s to cell:\n{code}")
                raw = await asyncio.wait_for(conn.read_message(), left)
                if raw is None: raise ConnectionError("the kernel's websocket closed while a cell was running")
                m = json.loads(raw)
                if m.get("parent_header", {}).get("msg_id") != msg["header"]["msg_id"]: continue
                kind = m["msg_type"]
                if kind == "execute_reply": reply = m["content"]
                elif kind == "error": errors.append(f"{m['content']['ename']}: {m['content']['evalue']}")
                elif kind in ("stream", "execute_result", "display_data"): outputs += 1
                elif kind == "status" and m["content"]["execution_state"] == "idle": idle = True
            results.append((reply["status"], errors, outputs))
    finally: conn.close()
    return results


def in_own_loop(make):
    ("The result of the coroutine `make()` returns, run by `asyncio.run` on a thread of its own (joined): this thread "
     "may run an event loop already (the session's Chromium, Playwright's sync API, when a browser test ran first).")
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(1) as pool: return pool.submit(lambda: asyncio.run(make())).result()


def test_catalog_notebook_runs_in_jupyter(server):
    status = server.request("GET", "/api/status")[1]
    assert "started" in status
    cells = code_cells(NOTEBOOK)
    assert len(cells) >= 5, f"only {len(cells)} code cells found in {NOTEBOOK}"
    code, kernel = server.request("POST", "/api/kernels", {"name": "python3", "path": "catalog"})
    assert code == 201, f"starting a kernel answered {code}"
    try:
        ws = f"ws://127.0.0.1:{server.port}/api/kernels/{kernel['id']}/channels"
        results = in_own_loop(lambda: asyncio.wait_for(run_cells(ws, server.token, cells), CELL_TIMEOUT * 3))
        for src, (st, errors, _) in zip(cells, results):
            assert st == "ok" and not errors, f"{NOTEBOOK.name}: a cell failed in the Jupyter kernel ({st}; {errors}):\n{src}"
        assert len(results) == len(cells)
        assert sum(n for *_, n in results) > 0, "no cell produced any output"
    finally:
        code, _ = server.request("DELETE", f"/api/kernels/{kernel['id']}", timeout=30)
        assert code == 204, f"shutting the kernel down answered {code}"
    assert kernel["id"] not in [k["id"] for k in server.request("GET", "/api/kernels")[1]]   # gone from the server


def test_a_coroutine_runs_where_this_thread_runs_an_event_loop():
    ("Fires: `asyncio.run` where this thread runs a loop already (as after a Playwright test in this process) raises; "
     "must not: `in_own_loop` runs the coroutine on a thread of its own, joined before it returns.")
    import threading

    async def answer(): return 42

    async def inside_a_loop():
        first = answer()
        with pytest.raises(RuntimeError, match="running event loop"): asyncio.run(first)
        first.close()
        return in_own_loop(answer)
    before, got = set(threading.enumerate()), []
    looping = threading.Thread(target=lambda: got.append(asyncio.run(inside_a_loop())))   # this thread may loop already
    looping.start()
    looping.join()
    assert got == [42] and set(threading.enumerate()) <= before
