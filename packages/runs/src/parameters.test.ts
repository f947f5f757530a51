import { describe, expect, it } from 'vitest';
import { parameterNameProblem } from './parameters.js';

describe('run parameter names', () => {
  it('takes ASCII identifiers, builtins included (the notebook’s own choice)', () => {
    for (const name of ['n', '_x', 'alpha_2', 'print', '__builtins__', 'None_'] as const) expect(parameterNameProblem(name), name).toBeUndefined();
  });
  it('refuses what Python cannot assign to: other characters, a leading digit, keywords', () => {
    for (const name of ['a b', 'x;import os', '1x', '', 'é', 'x-y', 'x=1']) expect(parameterNameProblem(name), name).toMatch(/not a Python identifier/);
    for (const name of ['class', 'None', 'True', 'lambda', 'await']) expect(parameterNameProblem(name), name).toMatch(/keyword/);
  });
});
