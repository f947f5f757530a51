"""Serves the JupyterLab host built in build/ with Debian's jupyterlab_server (no `jupyterlab`
Python package needed). Prebuilt extensions are found under --LabServerApp.extra_labextensions_path.

Usage (see README.md beside this file):
  /usr/bin/python3 main.py --allow-root --ServerApp.ip=127.0.0.1 --ServerApp.port=8888 \
      --ServerApp.token=T --ServerApp.base_url=/jupyter/ --ServerApp.root_dir=DIR \
      --LabServerApp.extra_labextensions_path=../jupyterlab-codeagent-bridge/labextension
"""

import os

from jupyterlab_server import LabServerApp

try:
    # TCP no-delay on kernel websockets (services/runtime/python, on PYTHONPATH when
    # `codeagent jupyterlab` starts this host; docs/decisions/0080-kernel-websocket-nodelay.md).
    import codeagent_nodelay
except ImportError:
    codeagent_nodelay = None

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "build")
# Per-user state (settings, workspaces) lives outside the build, which is rebuilt from scratch.
STATE = os.environ.get("CODEAGENT_LAB_STATE_DIR", os.path.join(HERE, ".state"))

# Configuration files on this machine (~/.jupyter, /etc/jupyter) must not change the host.
os.environ["JUPYTER_NO_CONFIG"] = "1"
# Terminals (jupyter_server's terminado, Debian's python3-terminado) start $SHELL, else `sh`:
# bash where there is one. In the platform they are processes of the server's own sandbox
# (docs/decisions/0105-complete-lab-host.md).
if not os.environ.get("SHELL") and os.path.exists("/bin/bash"):
    os.environ["SHELL"] = "/bin/bash"


def _jupyter_server_extension_points():
    return [{"module": __name__, "app": CodeagentLabApp}]


class CodeagentLabApp(LabServerApp):
    name = "codeagent_lab"
    extension_url = "/lab"
    default_url = "/lab"
    load_other_extensions = False
    app_name = "JupyterLab"
    app_version = "4.5.10"
    app_settings_dir = os.path.join(BUILD, "application_settings")
    schemas_dir = os.path.join(BUILD, "schemas")
    static_dir = os.path.join(BUILD, "static")
    templates_dir = os.path.join(BUILD, "static")
    themes_dir = os.path.join(BUILD, "themes")
    user_settings_dir = os.path.join(STATE, "user_settings")
    workspaces_dir = os.path.join(STATE, "workspaces")

    def initialize_settings(self):
        # Only the extensions given explicitly: none from the machine's jupyter paths.
        self.labextensions_path = []
        super().initialize_settings()
        if codeagent_nodelay is not None:
            codeagent_nodelay.patched_handlers()


if __name__ == "__main__":
    CodeagentLabApp.launch_instance()
