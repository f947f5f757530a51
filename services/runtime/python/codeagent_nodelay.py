"""Jupyter server extension of the codeagent runtime: TCP no-delay on every kernel websocket.

Tornado turns Nagle's algorithm back on after each HTTP response, and jupyter_server (1.x and
2.x) never turns it off on the kernel websocket: the later frames of a reply then wait for the
client's delayed ACK of the first (about 40 ms per execute over TCP). Setting no-delay when the
websocket opens sends every frame at once. On a Unix socket (the platform's sandboxed servers)
Tornado ignores the call: there is no Nagle there.

Loaded with --ServerApp.jpserver_extensions="{'codeagent_nodelay': True}" and this file's
directory on PYTHONPATH (the runtime does both for every Jupyter server it starts).
"""

import importlib

# The kernel websocket handler classes of jupyter_server 1.x and 2.x (whichever exist here).
_HANDLERS = (
    ("jupyter_server.services.kernels.handlers", "ZMQChannelsHandler"),  # 1.x
    ("jupyter_server.services.kernels.websocket", "KernelWebsocketHandler"),  # 2.x
)


def _with_nodelay(open_):
    def open(self, *args, **kwargs):
        try:
            self.set_nodelay(True)
        except Exception:  # a closed stream: the original open reports it
            pass
        return open_(self, *args, **kwargs)

    open._codeagent_nodelay = True
    return open


def patched_handlers():
    """Patches each kernel websocket handler class once; returns the names of the patched classes."""
    done = []
    for module_name, class_name in _HANDLERS:
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError):
            continue
        if not getattr(cls.open, "_codeagent_nodelay", False):
            cls.open = _with_nodelay(cls.open)
        done.append(class_name)
    return done


def _jupyter_server_extension_points():
    return [{"module": "codeagent_nodelay"}]


def _load_jupyter_server_extension(serverapp):
    done = patched_handlers()
    if done:
        serverapp.log.info("codeagent_nodelay: TCP no-delay on kernel websockets (%s)", ", ".join(done))
    else:
        serverapp.log.warning("codeagent_nodelay: no kernel websocket handler found in this jupyter_server version")


# jupyter_server 1.x also looks for the old name.
load_jupyter_server_extension = _load_jupyter_server_extension
