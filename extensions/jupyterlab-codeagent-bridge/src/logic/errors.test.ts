import { describe, expect, it } from 'vitest';
import { extractErrors, stripAnsi } from './errors';

// An IPython traceback as the kernel sends it: coloured with ANSI escape codes.
const coloured = [
  '\u001b[0;31m---------------------------------------------------------------------------\u001b[0m',
  '\u001b[0;31mZeroDivisionError\u001b[0m                         Traceback (most recent call last)',
  'Cell \u001b[0;32mIn[1], line 1\u001b[0m\n\u001b[0;32m----> 1\u001b[0m \u001b[38;5;241m1\u001b[39m\u001b[38;5;241m/\u001b[39m\u001b[38;5;241m0\u001b[39m\n',
  '\u001b[0;31mZeroDivisionError\u001b[0m: division by zero',
];

describe('stripAnsi', () => {
  it('removes colour codes (16 and 256 colours), keeping the text', () => {
    expect(stripAnsi('\u001b[0;31mZeroDivisionError\u001b[0m: x')).toBe('ZeroDivisionError: x');
    expect(stripAnsi('\u001b[38;5;241m1\u001b[39m')).toBe('1');
  });
  it('removes OSC sequences (hyperlinks) and leaves plain text untouched', () => {
    expect(stripAnsi('\u001b]8;;file:///a.py\u0007a.py\u001b]8;;\u0007')).toBe('a.py');
    expect(stripAnsi('plain [0;31m text')).toBe('plain [0;31m text');
  });
});

describe('extractErrors', () => {
  it('returns every error output with ename, evalue and a plain traceback; other outputs are ignored', () => {
    const errors = extractErrors([
      { output_type: 'stream', name: 'stdout', text: 'hello\n' },
      { output_type: 'error', ename: 'ZeroDivisionError', evalue: 'division by zero', traceback: coloured },
      { output_type: 'execute_result', data: { 'text/plain': '1' } },
    ]);
    expect(errors).toHaveLength(1);
    expect(errors[0]!.ename).toBe('ZeroDivisionError');
    expect(errors[0]!.evalue).toBe('division by zero');
    expect(errors[0]!.traceback[1]).toBe('ZeroDivisionError                         Traceback (most recent call last)');
    expect(errors[0]!.traceback.join('\n')).not.toContain('\u001b');
    expect(errors[0]!.traceback[2]).toContain('----> 1 1/0');
  });
  it('tolerates malformed error outputs', () => {
    expect(extractErrors([{ output_type: 'error' }])).toEqual([{ ename: '', evalue: '', traceback: [] }]);
    expect(extractErrors([])).toEqual([]);
  });
});
