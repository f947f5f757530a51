/**
 * The largest notebook a run or schedule may name (decision 0230). The worker reads the notebook
 * whole and parses it, and the runtime holds it with its new outputs: without a bound, an
 * editor's multi-GB `.ipynb` (any file may be uploaded under that name, up to MAX_UPLOAD_BYTES)
 * would take the worker's memory, and the runs of every workspace with it. Real notebooks with
 * their images weigh a few MiB; one over this is nearly always one whose outputs grew.
 */
export const MAX_NOTEBOOK_BYTES = 64 * 1024 * 1024;

/** Why a notebook of `size` bytes cannot be run, or undefined when it can. */
export function notebookSizeProblem(size: number): string | undefined {
  if (size <= MAX_NOTEBOOK_BYTES) return undefined;
  const mib = (n: number) => `${Math.ceil(n / 1024 / 1024)} MiB`;
  return `the notebook is ${mib(size)}, more than the ${mib(MAX_NOTEBOOK_BYTES)} a run takes: clear its outputs (in JupyterLab: Edit → Clear Outputs of All Cells) or move data out of it into files`;
}
