import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', '.codeagent/**', '.test-results/**', 'bench/results/**', 'extensions/**/lib/**', 'extensions/**/labextension/**', 'extensions/lab-host/build/**', 'extensions/**/lib-test/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'off',
    },
  },
  {
    // Browser code of the JupyterLab extension and of its host.
    files: ['extensions/*/src/**/*.{ts,js}'],
    languageOptions: { globals: { ...globals.browser } },
  },
  {
    files: ['extensions/**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { ...globals.node } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
