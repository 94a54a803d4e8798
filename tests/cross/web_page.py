"""Opens examples/web-classifier's page in headless Chromium and checks what it shows.

Serves the built site (the page, the wasm module, the weights) and the first
N test images on 127.0.0.1, drives Chromium through its DevTools protocol
(python3-websocket) in real time, so that the page's time per image is a real
measurement, waits for the page to finish, reads the predicted classes back
from the DOM, compares them with the native build's, and saves a screenshot.
Everything is bounded: the page gets --timeout seconds, then the test fails.
"""
import argparse
import base64
import functools
import http.server
import json
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
import urllib.request

import websocket

CHROMIUM_FLAGS = [
    # As root, without a display, GPU or network (and nothing that would try one).
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
]


def write_subset(data_dir, site_data, n):
    """The first n images and labels of the test set as IDX files the page fetches."""
    os.makedirs(site_data, exist_ok=True)
    with open(os.path.join(data_dir, "t10k-images-idx3-ubyte"), "rb") as f:
        images = f.read(16 + n * 784)
    with open(os.path.join(data_dir, "t10k-labels-idx1-ubyte"), "rb") as f:
        labels = f.read(8 + n)
    with open(os.path.join(site_data, "t10k-images-idx3-ubyte"), "wb") as f:
        f.write(images[:4] + struct.pack(">III", n, 28, 28) + images[16:])
    with open(os.path.join(site_data, "t10k-labels-idx1-ubyte"), "wb") as f:
        f.write(labels[:4] + struct.pack(">I", n) + labels[8:])


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".wasm": "application/wasm"}

    def log_message(self, *args):
        pass


class DevTools:
    """One page of a Chromium started with --remote-debugging-port=0."""

    def __init__(self, profile, deadline):
        port_file = os.path.join(profile, "DevToolsActivePort")
        while not os.path.exists(port_file):
            if time.time() > deadline:
                raise TimeoutError("Chromium did not open its DevTools port")
            time.sleep(0.1)
        time.sleep(0.2)
        port = open(port_file).read().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            pages = [t for t in json.load(r) if t["type"] == "page"]
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=30)
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def evaluate(self, expression):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--site", required=True, help="the built web folder (page, module, weights)")
    p.add_argument("--data", required=True, help="the uncompressed Fashion-MNIST test IDX files")
    p.add_argument("--images", type=int, default=60)
    p.add_argument("--expect", required=True, help="the native build's classes, one digit per image")
    p.add_argument("--screenshot", required=True)
    p.add_argument("--profile", required=True, help="a fresh Chromium user-data-dir")
    p.add_argument("--timeout", type=float, default=120)
    a = p.parse_args()

    write_subset(a.data, os.path.join(a.site, "data"), a.images)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=a.site))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/index.html"

    shutil.rmtree(a.profile, ignore_errors=True)
    chromium = subprocess.Popen(["chromium", *CHROMIUM_FLAGS, f"--user-data-dir={a.profile}", "--window-size=1280,900",
                                 "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + a.timeout
    try:
        page = DevTools(a.profile, deadline)
        page.call("Page.enable")
        page.call("Page.navigate", url=url)
        status = None
        while time.time() < deadline:
            status = page.evaluate("document.body && document.body.dataset.status")
            if status in ("done", "error"):
                break
            time.sleep(0.2)
        summary = page.evaluate("document.getElementById('summary').textContent")
        print(f"page {url}: status {status}: {summary}")
        if status != "done":
            sys.exit(f"FAIL: the page did not finish (status {status!r}) within {a.timeout} s")
        shown = page.evaluate("document.getElementById('predictions').textContent")
        cards = page.evaluate("Array.from(document.querySelectorAll('.card')).map(c => c.dataset.predicted).join('')")
        shot = page.call("Page.captureScreenshot", format="png")
        with open(a.screenshot, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        print(f"screenshot: {a.screenshot}")
    finally:
        chromium.terminate()
        try:
            chromium.wait(timeout=10)
        except subprocess.TimeoutExpired:
            chromium.kill()
        server.shutdown()

    expected = open(a.expect).read().strip()[: a.images]
    if shown != cards or len(shown) != a.images:
        sys.exit(f"FAIL: the page shows {len(cards)} cards ({cards}) and lists {shown!r}; expected {a.images}")
    if shown != expected:
        bad = [i for i in range(a.images) if shown[i] != expected[i]]
        sys.exit(f"FAIL: images {bad}: the page predicts {[shown[i] for i in bad]}, the native build {[expected[i] for i in bad]}")
    print(f"ok: the page's classes of {a.images} images are the native build's")


if __name__ == "__main__":
    main()
