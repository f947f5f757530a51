import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';

// Layers flow one way: cli → services → packages (docs/decisions/0096-one-way-layers-and-shared-rules.md).
const SERVICES = ['backend', 'bridge', 'cluster-admin', 'gateway', 'runtime', 'worker'];
const LOW_PACKAGES = ['config', 'auth', 'safe-fetch', 'storage', 'clients'];
const MID_PACKAGES = ['db', 'runs', 'sandbox', 'service-kit', 'files'];
const forbid = (names, why) => names.map((name) => ({ group: [`@codeagent/${name}`, `@codeagent/${name}/*`], message: why }));
const serviceRule = (allowed = []) =>
  forbid(
    ['cli', ...SERVICES.filter((s) => !allowed.includes(s))],
    'layers: a package imports no service and a service no other service (docs/decisions/0096); share code through a package',
  );
const lowRule = forbid(
  ['service-kit', 'db', ...MID_PACKAGES.filter((p) => p !== 'service-kit' && p !== 'db')],
  'layers: config, auth, safe-fetch, storage and clients are low packages and import no service-kit, db or other middle package (docs/decisions/0096)',
);
const layers = (patterns) => ({ 'no-restricted-imports': ['error', { patterns }] });

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      '.codeagent/**',
      '.test-results/**',
      'bench/results/**',
      'extensions/**/lib/**',
      'extensions/**/labextension/**',
      'extensions/lab-host/build/**',
      'extensions/**/lib-test/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  // Type-aware rules on the TypeScript we write (docs/decisions/0130-type-aware-lint.md); the
  // project service finds each file's tsconfig (the root one lists them all).
  ...tseslint.configs.recommendedTypeChecked.map((config) => ({ ...config, files: ['**/*.{ts,tsx,mts,cts}'] })),
  {
    files: ['**/*.{ts,tsx,mts,cts}'],
    // vitest.config.ts belongs to no tsconfig: it is checked with the default compiler options.
    languageOptions: { parserOptions: { projectService: { allowDefaultProject: ['vitest.config.ts'] }, tsconfigRootDir: import.meta.dirname } },
  },
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
    // The web app (browser code).
    files: ['web/src/**/*.{ts,tsx}'],
    languageOptions: { globals: { ...globals.browser } },
  },
  {
    files: ['extensions/**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { ...globals.node } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  // Layers (see the constants at the top); each file matches exactly one of these blocks, the
  // rule's options of a later block replace those of an earlier one.
  ...LOW_PACKAGES.map((p) => ({ files: [`packages/${p}/**/*.ts`], rules: layers([...serviceRule(), ...lowRule]) })),
  ...MID_PACKAGES.map((p) => ({ files: [`packages/${p}/**/*.ts`], rules: layers(serviceRule()) })),
  ...SERVICES.map((s) => ({
    files: [`services/${s}/**/*.ts`],
    rules: layers([
      ...serviceRule([s]),
      // The gateway loads no database code: only the database-free subpath of service-kit.
      ...(s === 'gateway'
        ? [
            ...forbid(['db', 'runs', 'sandbox', 'files', 'storage'], 'layers: the gateway loads no database or storage code (docs/decisions/0096)'),
            {
              regex: '^@codeagent/service-kit(?!/http$)(/.*)?$',
              message: 'layers: the gateway imports only @codeagent/service-kit/http, which loads no database driver (docs/decisions/0096)',
            },
          ]
        : []),
    ]),
  })),
  {
    // Integration tests compose several services in one process; production code never does.
    files: ['services/*/src/**/*.test.ts', 'services/*/src/testing.ts', 'services/*/src/testing-*.ts'],
    rules: layers(forbid(['cli'], 'layers: nothing imports the cli')),
  },
);
