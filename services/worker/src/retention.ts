import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { DB } from '@codeagent/db';
import { deleteFinishedRuns, expiredRuns } from '@codeagent/runs';
import type { ObjectStore } from '@codeagent/storage';
import { foldUsage, type WorkspaceFiles } from '@codeagent/files';

export interface RetentionSettings {
  /** RUN_RETENTION_DAYS: finished runs older than this go with their executed notebook and log; 0 = keep. */
  runDays: number;
  /** VERSION_RETENTION_COUNT: old versions kept per path; 0 = no count limit. */
  versionCount: number;
  /** VERSION_RETENTION_DAYS: old versions replaced longer ago go; 0 = no age limit. */
  versionDays: number;
}

export interface RetentionOptions {
  db: Kysely<DB>;
  files: WorkspaceFiles;
  store: ObjectStore;
  log: Logger;
  settings: RetentionSettings;
  /** Rows handled per batch, and batches per pass: one pass never does unbounded work. */
  batchSize?: number;
  maxBatches?: number;
}

export interface RetentionResult {
  runs: number;
  versions: number;
}

const DAY_MS = 24 * 3600 * 1000;

/**
 * One retention pass (run by the worker every few minutes): deletes finished runs older than
 * RUN_RETENTION_DAYS — their executed notebook (and its versions) and their run log first, the
 * row last, so a pass cut short is simply repeated — and prunes old versions beyond
 * VERSION_RETENTION_COUNT or VERSION_RETENTION_DAYS, then folds the workspaces' running totals of
 * stored bytes. Every step is idempotent, so two workers doing it at once waste work but damage
 * nothing.
 */
export async function applyRetention(opts: RetentionOptions, now = new Date()): Promise<RetentionResult> {
  const { db, files, store, log, settings } = opts;
  const batchSize = opts.batchSize ?? 200;
  const maxBatches = opts.maxBatches ?? 10;
  const result: RetentionResult = { runs: 0, versions: 0 };

  if (settings.runDays > 0) {
    const before = new Date(now.getTime() - settings.runDays * DAY_MS);
    for (let i = 0; i < maxBatches; i++) {
      const runs = await expiredRuns(db, before, batchSize);
      if (runs.length === 0) break;
      const outputsByWorkspace = new Map<string, string[]>();
      for (const r of runs) {
        if (r.output_path) outputsByWorkspace.set(r.workspace_id, [...(outputsByWorkspace.get(r.workspace_id) ?? []), r.output_path]);
      }
      for (const [ws, paths] of outputsByWorkspace) await files.purgePaths(ws, paths);
      for (const r of runs) {
        if (r.log_key) await store.delete('run_log', r.log_key).catch((err: unknown) => log.warn({ err, run_id: r.id }, 'could not remove a run log'));
      }
      result.runs += await deleteFinishedRuns(
        db,
        runs.map((r) => r.id),
      );
      if (runs.length < batchSize) break;
    }
  }

  if (settings.versionCount > 0 || settings.versionDays > 0) {
    const replacedBefore = settings.versionDays > 0 ? new Date(now.getTime() - settings.versionDays * DAY_MS) : undefined;
    for (let i = 0; i < maxBatches; i++) {
      const n = await files.pruneVersions({ keepCount: settings.versionCount, replacedBefore, limit: batchSize });
      result.versions += n;
      if (n < batchSize) break;
    }
  }
  // The running totals of stored bytes (decision 0200): every write appends a row; workspaces
  // without a quota check are folded here, a bounded number per pass.
  for (let i = 0; i < maxBatches; i++) if ((await foldUsage(db, batchSize)) < batchSize) break;
  if (result.runs > 0 || result.versions > 0) log.info({ runs: result.runs, versions: result.versions }, 'retention removed old runs and versions');
  return result;
}
