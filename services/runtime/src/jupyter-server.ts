export const INSTALL_HINT =
  'no Jupyter kernel can run on this machine: install one with `apt-get install -y python3-jupyter-server python3-ipykernel` ' + '(Debian/Ubuntu)';

/** No kernel can be started (503 kernel_unavailable); the message says why and how to fix it. */
export class KernelUnavailableError extends Error {
  constructor(detail: string, installHint = true) {
    super(installHint ? `${INSTALL_HINT} (${detail})` : detail);
    this.name = 'KernelUnavailableError';
  }
}
