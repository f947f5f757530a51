import type { Config } from '@codeagent/config';
import { migrate, openPlatformDatabase } from '@codeagent/db';

export async function runMigrations(config: Config): Promise<number> {
  const database = await openPlatformDatabase(config, 'migrate');
  try {
    const applied = await migrate(database);
    console.log(applied.length === 0 ? 'database is up to date' : `applied ${applied.join(', ')}`);
    return 0;
  } finally {
    await database.close();
  }
}
