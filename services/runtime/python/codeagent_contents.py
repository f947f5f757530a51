"""Contents manager of the codeagent runtime's Jupyter servers: a chunked upload is one write.

JupyterLab's file browser uploads a file over 1 MiB in parts (`chunk` 1, 2, ..., then -1 for the
last), and Jupyter's LargeFileManager opens, appends to and closes the file once per part. On
the workspace mount rclone uploads a file whenever its last writer closes it, so every part
stored the whole file so far again: n parts made n versions and about n^2/2 MiB of uploads
(docs/decisions/0219-chunked-uploads-one-write.md).

This manager keeps the file open from the first part to the last, so the mount uploads it once,
when the last part has been written. Until then the platform keeps serving the file's previous
content. A part's answer carries `"codeagent_upload": "partial"` so the runtime's proxy does not
wait for an upload that only the last part starts. An upload abandoned half way (a closed
browser tab) is closed after `upload_idle_seconds` without a part, and what arrived is stored, as
Jupyter's own manager would have; at most `max_open_uploads` stay open at once (the oldest is
closed first; its next part reopens the file and appends, so only a version more is made).

Loaded with --ServerApp.contents_manager_class=codeagent_contents.OneWriteFileManager and this
file's directory on PYTHONPATH (the runtime does both for every Jupyter server it starts).
"""

import base64
import errno
import os
import re
import time

from tornado import web
from traitlets import Integer

from jupyter_server.services.contents.largefilemanager import LargeFileManager

PARTIAL = {"codeagent_upload": "partial"}

# Unicode's bidirectional controls, which the platform refuses in a name being given (the same
# set as validateNewObjectPath in packages/storage/src/paths.ts, decision 0224): a file named
# with them displays as another name. Refused here too, before the file exists on the mount, so
# that the workspace's JupyterLab never lists a file the platform will not store.
BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# And the characters that show as nothing (invisibleCharacterIn, the same set: decision 0224's
# addendum), which make two names that look the same differ; the tags of an emoji flag (after
# U+1F3F4) are allowed.
INVISIBLE = re.compile(
    "[\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180e\u200b\u2060-\u206f\u3164\ufeff\uffa0\ufff0-\ufffb"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e001f\U000e0080-\U000e00ff\U000e01f0-\U000e0fff]"
)
TAG = re.compile("[\U000e0020-\U000e007f]")
EMOJI_FLAG = re.compile("\U0001f3f4[\U000e0020-\U000e007f]+")


def _check_new_name(path):
    # (Tags are looked for where no emoji flag holds them.)
    unflagged = EMOJI_FLAG.sub("", path)
    for pattern, what in ((BIDI_CONTROLS, "bidirectional control characters"), (INVISIBLE, "invisible characters"), (TAG, "invisible characters")):
        found = pattern.search(unflagged)
        if found:
            raise web.HTTPError(
                400,
                f"{path} was not saved: a name must not contain {what} "
                f"(U+{ord(found.group(0)):04X}): they make a name display as another",
            )


class _Upload:
    def __init__(self, file):
        self.file = file
        self.touched = time.monotonic()


def _decoded(model, path):
    fmt = model.get("format")
    if fmt not in ("text", "base64"):
        raise web.HTTPError(400, "Must specify format of file contents as 'text' or 'base64'")
    try:
        if fmt == "text":
            return model["content"].encode("utf8")
        return base64.b64decode(model["content"].encode("ascii"))
    except Exception as e:
        raise web.HTTPError(400, f"Encoding error saving {path}: {e}") from e


class OneWriteFileManager(LargeFileManager):
    """LargeFileManager whose chunked uploads keep the file open from the first part to the last."""

    upload_idle_seconds = Integer(300, config=True, help="An upload that gets no part for this long is closed (what arrived is stored).")
    max_open_uploads = Integer(16, config=True, help="Uploads open at once; beyond it the oldest is closed.")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._uploads = {}
        self._sweep_timer = None

    # --- notebook trust: none (docs/decisions/0242-no-trusted-notebooks-in-shared-labs.md) -------
    #
    # Jupyter signs a notebook on save when its outputs came from the saver's own kernel, and a
    # signed notebook's HTML and JavaScript outputs run when it is opened again. A workspace's
    # server is shared by all its members and serves them in the platform's origin: a signature
    # made for one member's save would run that member's script in every other member's browser,
    # with their session. So nothing is signed, every opened notebook is untrusted (its HTML
    # outputs sanitised, its JavaScript not run), and "Trust notebook" is refused. Outputs of a
    # member's own live session still render as usual.

    def check_and_sign(self, nb, path=""):
        """Never signs (see above)."""

    def mark_trusted_cells(self, nb, path=""):
        """Every notebook opened from a file is untrusted (see above)."""
        self.notary.mark_cells(nb, False)

    def trust_notebook(self, path):
        """Refused (see above)."""
        raise web.HTTPError(
            403,
            f"{path} cannot be trusted: this JupyterLab is shared by the workspace's members, so a "
            "notebook's saved HTML and JavaScript outputs never run when it is opened; run its cells "
            "again to see them",
        )

    # --- the upload of one file, by its path on disk -------------------------------------------

    def _close_upload(self, os_path):
        """Closes the open upload of os_path, if any; errors of the close are returned."""
        upload = self._uploads.pop(os_path, None)
        if upload is None:
            return None
        try:
            upload.file.close()
        except OSError as e:
            return e
        return None

    def _close_under(self, os_path):
        """Closes the open uploads of os_path and of every file under it (a folder)."""
        inside = os_path.rstrip(os.sep) + os.sep
        for open_path in [p for p in self._uploads if p == os_path or p.startswith(inside)]:
            self._close_upload(open_path)

    def _sweep(self):
        """Closes uploads idle for upload_idle_seconds, and the oldest beyond max_open_uploads."""
        now = time.monotonic()
        for os_path, upload in list(self._uploads.items()):
            if now - upload.touched >= self.upload_idle_seconds:
                self.log.warning("codeagent_contents: an upload of %s got no part for %d s; storing what arrived", os_path, self.upload_idle_seconds)
                self._close_upload(os_path)
        while len(self._uploads) > self.max_open_uploads:
            oldest = min(self._uploads, key=lambda p: self._uploads[p].touched)
            self.log.warning("codeagent_contents: more than %d uploads at once; storing what arrived of %s", self.max_open_uploads, oldest)
            self._close_upload(oldest)

    def _sweep_while_open(self):
        """A timer on the server's event loop that sweeps while any upload is open."""
        if self._sweep_timer is not None:
            return
        try:
            from tornado.ioloop import IOLoop

            loop = IOLoop.current()
        except Exception:  # no event loop (the class used on its own): the next part sweeps
            return

        def tick():
            self._sweep_timer = None
            self._sweep()
            if self._uploads:
                self._sweep_while_open()

        self._sweep_timer = loop.call_later(max(1, self.upload_idle_seconds / 4), tick)

    def _write_part(self, os_path, path, chunk, data):
        try:
            upload = self._uploads.get(os_path)
            if chunk == 1 or upload is None:
                # The first part truncates; a later part with no open upload (the server
                # restarted, or the upload sat idle) appends, as Jupyter's own manager does.
                self._close_upload(os_path)
                with self.perm_to_403(os_path):
                    upload = _Upload(open(os_path, "wb" if chunk == 1 else "ab"))
                self._uploads[os_path] = upload
                self._sweep()
                self._sweep_while_open()
            upload.touched = time.monotonic()
            upload.file.write(data)
            # Into the mount's cache (not yet an upload): the file's size shows what arrived.
            upload.file.flush()
            if chunk == -1:
                failed = self._close_upload(os_path)
                if failed is not None:
                    raise failed
        except OSError as e:
            self._close_upload(os_path)
            if e.errno == errno.ENOENT:
                raise web.HTTPError(404, f"{path} was not saved: its folder does not exist") from e
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise web.HTTPError(507, f"{path} was not saved: the disk is full") from e
            self.log.error("Error while saving file: %s %s", path, e, exc_info=True)
            raise web.HTTPError(500, f"Unexpected error while saving file: {path} {e}") from e

    # --- the contents API -------------------------------------------------------------------------

    def save(self, model, path=""):
        _check_new_name(path)
        chunk = model.get("chunk")
        if chunk is None:
            # A whole save of a file that is being uploaded ends that upload first.
            self._close_under(self._get_os_path(path.strip("/")))
            return super().save(model, path)
        path = path.strip("/")
        if model.get("type") != "file":
            raise web.HTTPError(400, f'File type "{model.get("type")}" is not supported for large file transfer')
        if "content" not in model:
            raise web.HTTPError(400, "No file content provided")
        if not isinstance(chunk, int) or chunk == 0 or chunk < -1:
            raise web.HTTPError(400, "chunk is 1 for the first part, 2, 3, ... for the next and -1 for the last")
        if chunk == 1:
            self.run_pre_save_hook(model=model, path=path)
        os_path = self._get_os_path(path)
        self._write_part(os_path, path, chunk, _decoded(model, path))
        answer = self.get(path, content=False)
        if chunk == -1:
            self.run_post_save_hooks(model=answer, os_path=os_path)
            return answer
        return {**answer, **PARTIAL}

    def delete_file(self, path):
        self._close_under(self._get_os_path(path.strip("/")))
        return super().delete_file(path)

    def rename_file(self, old_path, new_path):
        _check_new_name(new_path)
        self._close_under(self._get_os_path(old_path.strip("/")))
        return super().rename_file(old_path, new_path)
