"""``gcsim real --address`` against a cluster with Ray's token authentication on, joined without the
token (issue 10): one line naming ``--address`` and ``RAY_AUTH_TOKEN``, exit 2, no traceback, and no
run directory left ``running``.

The head is a ``ray start --head`` of this module (env ``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN``;
``HOME`` and ``RAY_TMPDIR`` in its own temp dir, a free GCS port, 127.0.0.1 with Ray's "local clusters
only" switch, no CPUs); at the end the processes whose command line names that temp dir are killed
by PID (never ``ray stop``). The driver runs in a subprocess without any ``RAY_AUTH_*`` variable and
with ``HOME`` elsewhere (no ``~/.ray/auth_token``). Ray 2.60 retries the refused connection for about
30 s before ``ray.init`` gives up, so the test takes about 40 s.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

pytest.importorskip("ray")
pytest.importorskip("torch")

from factories import GCSIM, kill_processes_naming, prepared_data  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TOKEN = "gcsim0test0token0" + "0123456789abcdef" * 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def token_head():
    base = tempfile.mkdtemp(prefix="gcsim-ra-")  # short: Ray's unix sockets live under it
    os.makedirs(os.path.join(base, "ray"))
    os.makedirs(os.path.join(base, "home"))
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(RAY_TMPDIR=base, HOME=os.path.join(base, "home"), RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
               RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=TOKEN)
    ray_bin = os.path.join(os.path.dirname(sys.executable), "ray")
    try:
        subprocess.run([ray_bin, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
                        "--num-cpus", "0", "--temp-dir", os.path.join(base, "ray"), "--include-dashboard", "false",
                        "--dashboard-port", str(_free_port()), "--disable-usage-stats"],
                       env=env, check=True, capture_output=True, text=True, timeout=120)
        yield base, f"127.0.0.1:{port}"
    finally:
        kill_processes_naming(base)
        shutil.rmtree(base, ignore_errors=True)


def test_joining_without_the_token_is_one_line_naming_it_exit_2(token_head):
    base, address = token_head
    out = os.path.join(base, "run")
    home = os.path.join(base, "driver-home")
    os.makedirs(home)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("RAY_AUTH_") and k not in ("RAY_ADDRESS", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")}
    env.update(HOME=home, RAY_TMPDIR=base)
    # tiny data of its own (a clean checkout has no data/cifar10: the data check comes before joining)
    prepared_data(base, train_per_class=4, test_per_class=2)
    proc = subprocess.run(GCSIM + ["real", "--scheme", "gc-fr", "--workers", "2", "--iterations", "2",
                                   "--data-dir", os.path.join(base, "data"), "--batch-size", "8",
                                   "--address", address, "--connect-timeout", "5", "--out", out, "--no-progress"],
                          env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    # Ray's own C++ warnings (one per retry, "[2026-... W ...] gcs_client.cc: ... InvalidAuthToken") go to
    # the same stderr; of gcsim there is exactly one line
    ours = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("[")]
    assert len(ours) == 1, proc.stderr
    assert ours[0].startswith("gcsim: error: --address:")
    assert "RAY_AUTH_MODE=token" in ours[0] and "RAY_AUTH_TOKEN" in ours[0] and address in ours[0]
    # the run directory is not left behind (it is made complete only by a run that starts), let alone 'running'
    assert not os.path.exists(out)
