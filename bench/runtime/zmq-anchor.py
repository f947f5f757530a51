"""The anchor of bench/runtime: `execute` straight to a kernel over ZMQ with jupyter_client, no
Jupyter server in between. Prints one JSON line: {"p50": ms, "p99": ms, "n": N}.

Usage: python3 zmq-anchor.py N CODE [transport]   (transport: tcp or ipc, default ipc)
       python3 zmq-anchor.py serve CODE [transport]
         prints "ready", then executes CODE once per line read on stdin and prints its time in
         ms (the kernel stays up between lines), so the bench can interleave the anchor with the
         paths it compares.
"""

import json
import os
import sys
import tempfile
import time

from jupyter_client.manager import KernelManager


def main():
    serve = sys.argv[1] == "serve"
    n = 0 if serve else int(sys.argv[1])
    code = sys.argv[2]
    transport = sys.argv[3] if len(sys.argv) > 3 else "ipc"
    # IPython's history database on a tmpfs, as in the platform's sandboxes (/tmp there is one).
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="zmq-anchor-", dir=shm) as tmp:
        os.environ["JUPYTER_RUNTIME_DIR"] = tmp
        os.environ["IPYTHONDIR"] = os.path.join(tmp, "ipython")
        os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
        km = KernelManager(kernel_name="python3", transport=transport, ip=os.path.join(tmp, "k") if transport == "ipc" else "127.0.0.1")
        km.start_kernel()
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        try:
            if serve:
                print("ready", flush=True)
                for _ in sys.stdin:
                    t = time.perf_counter()
                    reply = kc.execute_interactive(code, store_history=True, output_hook=lambda msg: None, timeout=30)
                    if reply["content"]["status"] != "ok":
                        raise SystemExit("execute failed: %r" % (reply["content"],))
                    print((time.perf_counter() - t) * 1000, flush=True)
                return
            times = []
            for i in range(20 + n):
                t = time.perf_counter()
                reply = kc.execute_interactive(code, store_history=True, output_hook=lambda msg: None, timeout=30)
                if reply["content"]["status"] != "ok":
                    raise SystemExit("execute failed: %r" % (reply["content"],))
                if i >= 20:
                    times.append((time.perf_counter() - t) * 1000)
            times.sort()
            pct = lambda p: times[min(len(times) - 1, int(p / 100 * len(times)))]
            print(json.dumps({"p50": pct(50), "p99": pct(99), "n": n, "transport": transport}))
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)


main()
