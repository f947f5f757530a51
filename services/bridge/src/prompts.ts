export type EditAction = 'optimize' | 'fix' | 'edit';

export interface CellError {
  ename: string;
  evalue: string;
  traceback?: string[];
}

const ANSI = new RegExp(`${String.fromCharCode(27)}\\[[0-9;?]*[A-Za-z]`, 'g');
const MAX_TRACEBACK_CHARS = 4000;
/** An error's name and message are kept to their start: a message can hold a whole data frame. */
const MAX_ERROR_TEXT_CHARS = 2000;

export function stripAnsi(text: string): string {
  return text.replace(ANSI, '');
}

/** A traceback without colour codes, trimmed to its last part (where the error is). */
export function cleanTraceback(lines: string[] | undefined): string {
  const text = stripAnsi((lines ?? []).join('\n')).trim();
  return text.length > MAX_TRACEBACK_CHARS ? `…\n${text.slice(-MAX_TRACEBACK_CHARS)}` : text;
}

/** An error's name or message without colour codes, trimmed to its start (where it says what went wrong). */
export function errorText(text: string): string {
  const clean = stripAnsi(text);
  return clean.length > MAX_ERROR_TEXT_CHARS ? `${clean.slice(0, MAX_ERROR_TEXT_CHARS)}… (${clean.length - MAX_ERROR_TEXT_CHARS} more characters)` : clean;
}

const TASKS: Record<EditAction, string> = {
  optimize: 'Make this cell faster, clearer and more idiomatic without changing what it computes.',
  fix: 'Fix this cell so that it runs without the error shown below. Change only what the fix needs.',
  edit: 'Change this cell as the user asks below.',
};

export function buildPrompt(input: {
  action: EditAction;
  notebookPath: string;
  source: string;
  cellType?: string | undefined;
  errors: CellError[];
  instruction?: string | undefined;
}): string {
  const parts = [
    `You are editing one ${input.cellType ?? 'code'} cell of the Jupyter notebook ${input.notebookPath}.`,
    TASKS[input.action],
    '',
    'Current cell source:',
    '```python',
    input.source,
    '```',
  ];
  if (input.errors.length > 0) {
    parts.push('', 'Errors the cell raised:');
    for (const e of input.errors) parts.push(`${errorText(e.ename)}: ${errorText(e.evalue)}`, cleanTraceback(e.traceback));
  }
  if (input.instruction) parts.push('', `Instruction from the user: ${input.instruction}`);
  parts.push(
    '',
    'Answer with the complete new cell source in exactly one fenced code block (```python … ```), followed by one or two sentences that explain the change. Do not use tools; do not edit files.',
  );
  return parts.join('\n');
}

/**
 * The new cell source from the agent's reply: the fenced block (with or without a language tag);
 * with several blocks, the longest one (agents sometimes add a tiny usage example). Undefined
 * when there is no usable block.
 */
export function extractCode(reply: string): { source: string; explanation: string } | undefined {
  const blocks = [...reply.matchAll(/```[^\n`]*\n([\s\S]*?)```/g)];
  if (blocks.length === 0) return undefined;
  const best = blocks.reduce((a, b) => ((b[1]?.length ?? 0) > (a[1]?.length ?? 0) ? b : a));
  const source = (best[1] ?? '').replace(/\n$/, '');
  if (source.trim() === '') return undefined;
  const explanation = reply
    .replace(best[0], '')
    .replace(/```[\s\S]*?```/g, '')
    .trim();
  return { source, explanation };
}
