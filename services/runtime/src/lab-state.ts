/**
 * Each platform user's JupyterLab settings and layouts, kept in the platform's database
 * (decision 0252): whichever runtime serves a user's lab answers them, and they leave with the
 * user's row. lab-answers.ts checks what is stored (JSON5, sizes, names); this keeps it.
 */
import { readdir, readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { sql, type Kysely } from 'kysely';
import { advisoryXactLock, type DB } from '@codeagent/db';
import { isUuid } from '@codeagent/service-kit';

/** One stored text (a plugin's settings, a layout) and its times. */
export interface StoredLabText {
  text: string;
  created: Date;
  updated: Date;
}

export interface LabStateStore {
  /** The user's settings of every plugin they saved, by plugin id. */
  settings(userId: string): Promise<Map<string, StoredLabText>>;
  setting(userId: string, pluginId: string): Promise<StoredLabText | undefined>;
  saveSetting(userId: string, pluginId: string, raw: string): Promise<void>;
  /** The user's layouts by name, in name order. */
  layouts(userId: string): Promise<Array<StoredLabText & { name: string }>>;
  layout(userId: string, name: string): Promise<StoredLabText | undefined>;
  /** Saves a layout unless it is a new one and the user keeps `max` already ('full'). */
  saveLayout(userId: string, name: string, layout: string, max: number): Promise<'saved' | 'full'>;
  /** False when there was none. */
  deleteLayout(userId: string, name: string): Promise<boolean>;
}

/**
 * The store on the platform's database. `db` is asked at the first use (the runtime opens the
 * database only when something needs it).
 */
export function databaseLabState(db: () => Promise<Kysely<DB>>): LabStateStore {
  const text = (r: { text: string; created_at: Date; updated_at: Date }): StoredLabText => ({ text: r.text, created: r.created_at, updated: r.updated_at });
  return {
    async settings(userId) {
      const rows = await (
        await db()
      )
        .selectFrom('lab_settings')
        .select(['plugin_id', 'raw as text', 'created_at', 'updated_at'])
        .where('user_id', '=', userId)
        .execute();
      return new Map(rows.map((r) => [r.plugin_id, text(r)]));
    },
    async setting(userId, pluginId) {
      const row = await (
        await db()
      )
        .selectFrom('lab_settings')
        .select(['raw as text', 'created_at', 'updated_at'])
        .where('user_id', '=', userId)
        .where('plugin_id', '=', pluginId)
        .executeTakeFirst();
      return row && text(row);
    },
    async saveSetting(userId, pluginId, raw) {
      await (
        await db()
      )
        .insertInto('lab_settings')
        .values({ user_id: userId, plugin_id: pluginId, raw })
        .onConflict((oc) => oc.columns(['user_id', 'plugin_id']).doUpdateSet({ raw, updated_at: sql<Date>`now()` }))
        .execute();
    },
    async layouts(userId) {
      const rows = await (
        await db()
      )
        .selectFrom('lab_layouts')
        .select(['name', 'layout as text', 'created_at', 'updated_at'])
        .where('user_id', '=', userId)
        .orderBy('name')
        .execute();
      return rows.map((r) => ({ name: r.name, ...text(r) }));
    },
    async layout(userId, name) {
      const row = await (
        await db()
      )
        .selectFrom('lab_layouts')
        .select(['layout as text', 'created_at', 'updated_at'])
        .where('user_id', '=', userId)
        .where('name', '=', name)
        .executeTakeFirst();
      return row && text(row);
    },
    async saveLayout(userId, name, layout, max) {
      // The count is checked and the row written under the user's lock: parallel saves (on any
      // runtime) cannot pass the count together.
      return (await db()).transaction().execute(async (trx) => {
        await advisoryXactLock(trx, `lab-layouts:${userId}`);
        const { n } = await trx
          .selectFrom('lab_layouts')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .where('user_id', '=', userId)
          .where('name', '<>', name)
          .executeTakeFirstOrThrow();
        if (Number(n) >= max) return 'full' as const;
        await trx
          .insertInto('lab_layouts')
          .values({ user_id: userId, name, layout })
          .onConflict((oc) => oc.columns(['user_id', 'name']).doUpdateSet({ layout, updated_at: sql<Date>`now()` }))
          .execute();
        return 'saved' as const;
      });
    },
    async deleteLayout(userId, name) {
      const result = await (await db()).deleteFrom('lab_layouts').where('user_id', '=', userId).where('name', '=', name).executeTakeFirst();
      return result.numDeletedRows > 0n;
    },
  };
}

/** A file name's URI-decoded text, or undefined when it is not URI-encoded (no plugin id). */
const decodedName = (name: string): string | undefined => {
  try {
    return decodeURIComponent(name);
  } catch {
    return undefined;
  }
};

/**
 * Moves the settings and layouts an earlier runtime kept as files (`DATA_DIR/lab-settings/<user
 * id>/<plugin id, URI-encoded>.json5` and `…/workspaces/<name>.json`, decision 0251) into the
 * database once, then removes the folder (they held passwords of the bridge's settings). What the
 * database already holds wins; a user who no longer exists is left out. Says how many rows were
 * added, or undefined when there was no such folder.
 */
export async function importLabStateFiles(db: Kysely<DB>, dir: string): Promise<{ settings: number; layouts: number } | undefined> {
  let users: string[];
  try {
    users = (await readdir(dir)).filter((name) => isUuid(name));
  } catch {
    return undefined;
  }
  const settings: Array<{ user_id: string; plugin_id: string; raw: string; created_at: Date; updated_at: Date }> = [];
  const layouts: Array<{ user_id: string; name: string; layout: string; created_at: Date; updated_at: Date }> = [];
  const read = async (file: string) => {
    const [content, st] = await Promise.all([readFile(file, 'utf8'), stat(file)]);
    return { content, created_at: st.birthtime, updated_at: st.mtime };
  };
  for (const user of users) {
    const folder = join(dir, user);
    for (const name of await readdir(folder).catch(() => [] as string[])) {
      const pluginId = name.endsWith('.json5') ? decodedName(name.slice(0, -'.json5'.length)) : undefined;
      if (pluginId === undefined) continue;
      const { content, ...times } = await read(join(folder, name));
      settings.push({ user_id: user, plugin_id: pluginId, raw: content, ...times });
    }
    for (const name of await readdir(join(folder, 'workspaces')).catch(() => [] as string[])) {
      if (!name.endsWith('.json')) continue;
      const { content, ...times } = await read(join(folder, 'workspaces', name));
      layouts.push({ user_id: user, name: name.slice(0, -'.json'.length), layout: content, ...times });
    }
  }
  const known = new Set(
    users.length === 0 ? [] : (await db.selectFrom('users').select('id').where('id', 'in', users).execute()).map((r) => r.id.toLowerCase()),
  );
  const kept = <T extends { user_id: string }>(rows: T[]) => rows.filter((r) => known.has(r.user_id.toLowerCase()));
  const moved = await db.transaction().execute(async (trx) => {
    const counts = { settings: 0, layouts: 0 };
    for (const row of kept(settings))
      counts.settings += Number(
        (
          await trx
            .insertInto('lab_settings')
            .values(row)
            .onConflict((oc) => oc.doNothing())
            .executeTakeFirst()
        ).numInsertedOrUpdatedRows ?? 0n,
      );
    for (const row of kept(layouts))
      counts.layouts += Number(
        (
          await trx
            .insertInto('lab_layouts')
            .values(row)
            .onConflict((oc) => oc.doNothing())
            .executeTakeFirst()
        ).numInsertedOrUpdatedRows ?? 0n,
      );
    return counts;
  });
  await rm(dir, { recursive: true, force: true });
  return moved;
}
