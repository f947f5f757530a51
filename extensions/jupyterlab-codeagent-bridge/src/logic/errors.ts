/** One error output of a code cell, as the bridge expects it (docs/contract/spec.md §9.2 `errors`). */
export interface CellError {
  ename: string;
  evalue: string;
  /** Lines of the traceback, without terminal colour codes. */
  traceback: string[];
}

/** An output of a code cell, as nbformat stores it; only the fields read here are typed. */
export interface OutputLike {
  output_type: string;
  ename?: unknown;
  evalue?: unknown;
  traceback?: unknown;
  [key: string]: unknown;
}

// CSI sequences (colours, cursor moves) and OSC sequences (titles, links) as IPython emits them.
// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)|\u001b[@-Z\\-_]/g;

/** Removes terminal escape codes: IPython colours its tracebacks, the agent must read plain text. */
export function stripAnsi(text: string): string {
  return text.replace(ANSI, '');
}

/** The structured errors of a cell: every `error` output, with ANSI codes stripped. */
export function extractErrors(outputs: readonly OutputLike[]): CellError[] {
  return outputs
    .filter((o) => o.output_type === 'error')
    .map((o) => ({
      ename: typeof o.ename === 'string' ? o.ename : '',
      evalue: stripAnsi(typeof o.evalue === 'string' ? o.evalue : ''),
      traceback: Array.isArray(o.traceback) ? o.traceback.map((line) => stripAnsi(String(line))) : [],
    }));
}
