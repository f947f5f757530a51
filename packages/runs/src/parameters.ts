/**
 * A run's parameters become Python assignments in a cell of their own (papermill's convention,
 * `injectParameters` in the worker): each name must be a name Python can assign to.
 */

/** Python 3's keywords (`keyword.kwlist`): an identifier, but `class = 1` is a SyntaxError. */
const PYTHON_KEYWORDS = new Set(
  'False None True and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield'.split(
    ' ',
  ),
);

/** Why `name` cannot be a run parameter's name, or undefined when it can (ASCII identifiers that are not keywords). */
export function parameterNameProblem(name: string): string | undefined {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) return 'is not a Python identifier (letters, digits and _, not starting with a digit)';
  if (PYTHON_KEYWORDS.has(name)) return 'is a Python keyword';
  return undefined;
}
