/** Notebook helpers of the worker: parameters, output path, first error. */

import { parameterNameProblem } from '@codeagent/runs';

export interface NotebookCell {
  cell_type: string;
  source: string | string[];
  metadata?: { tags?: string[]; [key: string]: unknown };
  outputs?: { output_type: string; ename?: string; evalue?: string }[];
  [key: string]: unknown;
}

export interface Notebook {
  nbformat: number;
  nbformat_minor: number;
  metadata: Record<string, unknown>;
  cells: NotebookCell[];
}

export class InvalidNotebookError extends Error {}

export function parseNotebook(bytes: Buffer): Notebook {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new InvalidNotebookError('the notebook is not valid JSON');
  }
  const nb = value as Partial<Notebook>;
  if (typeof nb !== 'object' || nb === null || nb.nbformat !== 4 || !Array.isArray(nb.cells)) {
    throw new InvalidNotebookError('the file is not an nbformat v4 notebook');
  }
  return { nbformat: 4, nbformat_minor: nb.nbformat_minor ?? 5, metadata: nb.metadata ?? {}, cells: nb.cells };
}

/**
 * Papermill's convention: the run's parameters become a cell tagged `injected-parameters`
 * right after the cell tagged `parameters` (or first, when there is none).
 */
export function injectParameters(nb: Notebook, parameters: Record<string, unknown>): Notebook {
  const names = Object.keys(parameters);
  if (names.length === 0) return nb;
  const lines = names.map((name) => {
    const problem = parameterNameProblem(name);
    if (problem !== undefined) throw new InvalidNotebookError(`parameter name ${JSON.stringify(name)} ${problem}`);
    // JSON literals are valid Python once true/false/null are mapped; json.loads keeps it exact.
    return `${name} = __import__("json").loads(${JSON.stringify(JSON.stringify(parameters[name]))})\n`;
  });
  const cell: NotebookCell = {
    cell_type: 'code',
    source: ['# Parameters\n', ...lines],
    metadata: { tags: ['injected-parameters'] },
    outputs: [],
    execution_count: null,
  };
  const at = nb.cells.findIndex((c) => c.metadata?.tags?.includes('parameters'));
  const cells = [...nb.cells];
  cells.splice(at + 1, 0, cell);
  return { ...nb, cells };
}

/** `reports/daily.ipynb` → `reports/daily.runs/<run id>.ipynb` (docs/contract/spec.md §4.4). */
export function executedNotebookPath(notebookPath: string, runId: string): string {
  const slash = notebookPath.lastIndexOf('/');
  const dir = slash >= 0 ? notebookPath.slice(0, slash + 1) : '';
  const stem = notebookPath.slice(slash + 1).replace(/\.ipynb$/i, '');
  return `${dir}${stem}.runs/${runId}.ipynb`;
}

/** `ename: evalue` of the first error output, for the run's `error` field. */
export function firstError(nb: Notebook): string | undefined {
  for (const cell of nb.cells) {
    for (const o of cell.outputs ?? []) {
      if (o.output_type === 'error') return `${o.ename ?? 'Error'}: ${o.evalue ?? ''}`.trim();
    }
  }
  return undefined;
}
