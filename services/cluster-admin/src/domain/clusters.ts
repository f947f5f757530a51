import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import { isUniqueViolation, withRetry, type ClusterRow, type DB } from '@codeagent/db';
import { BadRequestError, ConflictError, NotFoundError, decodeCursor, isUuid, keysetPage } from '@codeagent/service-kit';
import { baseUrlProblem, redactBaseUrl, sameOrigin } from './base-url.js';
import { NAME_MAX, clusterBodyFields, type AuditEntryDto, type AuditPage, type ClusterBody, type ClusterDto } from './schemas.js';

export type { ClusterDto } from './schemas.js';

export type AuditAction = 'cluster.create' | 'cluster.update' | 'cluster.delete';

/** The `error` strings of docs/contract/spec.md §8, which differ from §3's codes; the kit's error classes carry them. */
export const NOT_FOUND = 'not found';
export const VALIDATION_FAILED = 'validation failed';

export const notFound = () => new NotFoundError('no such cluster', NOT_FOUND);

export function toClusterDto(r: ClusterRow): ClusterDto {
  return {
    id: r.id,
    name: r.name,
    base_url: redactBaseUrl(r.base_url),
    auth_type: r.auth_type,
    username: r.username,
    has_password: r.password_enc !== null,
    rate_limit: r.rate_limit,
    description: r.description,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  };
}

/** AES-256-GCM at rest; the key is SECRETS_KEY (32 bytes). */
export class SecretBox {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('SECRETS_KEY must be 32 bytes');
  }
  seal(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const data = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), data]).toString('base64');
  }
  open(sealed: string): string {
    const raw = Buffer.from(sealed, 'base64');
    const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, 12));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
  }
}

/** A checked cluster body, normalized: what `create` and `update` store (the password still plain). */
export type ClusterInput = Pick<ClusterDto, 'name' | 'base_url' | 'auth_type' | 'username' | 'rate_limit' | 'description'> & {
  password: string | undefined;
};

/**
 * docs/contract/spec.md §8.2 validation: the `ClusterBody` schema, then the rules a schema does
 * not hold (the URL's own, a username for `simple` and `basic`); every problem is reported at
 * once in `fields`. On update an empty or absent `AuthPassword` keeps the stored password.
 */
export function validateCluster(body: unknown): ClusterInput {
  const fields = clusterBodyFields(body);
  const b = (fields.body === undefined ? body : {}) as Partial<ClusterBody>;
  if (fields.base_url === undefined && b.base_url !== undefined) {
    const problem = baseUrlProblem(b.base_url);
    if (problem !== undefined) fields.base_url = problem;
  }
  if ((b.auth_type === 'simple' || b.auth_type === 'basic') && (typeof b.username !== 'string' || b.username.length === 0)) {
    fields.username = `required when auth_type is ${b.auth_type}`;
  }
  if (Object.keys(fields).length > 0) throw new BadRequestError('the cluster record is invalid', fields, VALIDATION_FAILED);
  const valid = b as ClusterBody;
  return {
    name: valid.name.trim(),
    base_url: valid.base_url,
    auth_type: valid.auth_type,
    username: typeof valid.username === 'string' && valid.username.length > 0 ? valid.username : null,
    password: typeof valid.AuthPassword === 'string' && valid.AuthPassword.length > 0 ? valid.AuthPassword : undefined,
    rate_limit: valid.rate_limit,
    description: valid.description ?? null,
  };
}

const AUDITED = ['name', 'base_url', 'auth_type', 'username', 'rate_limit', 'description'] as const;

/** What the audit shows of a cluster: its fields, and the password only as "***". */
function auditView(r: ClusterRow): Record<string, unknown> {
  return {
    id: r.id,
    name: r.name,
    base_url: redactBaseUrl(r.base_url),
    auth_type: r.auth_type,
    username: r.username,
    rate_limit: r.rate_limit,
    description: r.description,
    AuthPassword: r.password_enc === null ? null : '***',
  };
}

/** Hook for tests: runs inside the transaction between the change and its audit entry. */
export type BetweenChangeAndAudit = (trx: Transaction<DB>) => Promise<void>;

export class ClusterService {
  constructor(
    private readonly db: Kysely<DB>,
    private readonly box: SecretBox,
    private readonly betweenChangeAndAudit: BetweenChangeAndAudit = () => Promise.resolve(),
  ) {}

  private async audit(
    trx: Transaction<DB>,
    actor: string,
    action: AuditAction,
    targetId: string,
    before: ClusterRow | null,
    after: ClusterRow | null,
    passwordChanged: boolean,
  ) {
    await this.betweenChangeAndAudit(trx);
    const changed: string[] = [];
    if (before && after) {
      for (const f of AUDITED) if (before[f] !== after[f]) changed.push(f);
      if (passwordChanged) changed.push('AuthPassword');
    } else {
      const only = (before ?? after)!;
      for (const f of AUDITED) if (only[f] !== null && only[f] !== undefined) changed.push(f);
      if (only.password_enc !== null) changed.push('AuthPassword');
    }
    await trx
      .insertInto('audit_entries')
      .values({
        actor,
        action,
        target_type: 'cluster',
        target_id: targetId,
        details: JSON.stringify({ before: before ? auditView(before) : null, after: after ? auditView(after) : null, changed }),
      })
      .execute();
  }

  private conflict(err: unknown): never {
    if (isUniqueViolation(err)) throw new ConflictError('a cluster with this name exists');
    throw err;
  }

  async list(): Promise<ClusterDto[]> {
    return (await this.db.selectFrom('clusters').selectAll().orderBy('name').execute()).map(toClusterDto);
  }

  async row(idOrName: string): Promise<ClusterRow> {
    // No stored name is longer, or holds a U+0000 (which PostgreSQL would refuse to compare).
    if (idOrName.length > NAME_MAX || idOrName.includes('\u0000')) throw notFound();
    const row = isUuid(idOrName)
      ? await this.db.selectFrom('clusters').selectAll().where('id', '=', idOrName).executeTakeFirst()
      : await this.db.selectFrom('clusters').selectAll().where('name', '=', idOrName).executeTakeFirst();
    if (!row) throw notFound();
    return row;
  }

  async get(id: string): Promise<ClusterDto> {
    if (!isUuid(id)) throw notFound();
    return toClusterDto(await this.row(id));
  }

  /** The stored password, decrypted (for the auth adapter only; never returned). */
  password(row: ClusterRow): string | undefined {
    return row.password_enc === null ? undefined : this.box.open(row.password_enc);
  }

  async create(actor: string, input: ClusterInput): Promise<ClusterDto> {
    try {
      return await this.db.transaction().execute(async (trx) => {
        const row = await trx
          .insertInto('clusters')
          .values({
            name: input.name,
            base_url: input.base_url,
            auth_type: input.auth_type,
            username: input.username,
            password_enc: input.password === undefined ? null : this.box.seal(input.password),
            rate_limit: input.rate_limit,
            description: input.description,
          })
          .returningAll()
          .executeTakeFirstOrThrow();
        await this.audit(trx, actor, 'cluster.create', row.id, null, row, input.password !== undefined);
        return toClusterDto(row);
      });
    } catch (err) {
      return this.conflict(err);
    }
  }

  async update(actor: string, id: string, input: ClusterInput): Promise<ClusterDto> {
    if (!isUuid(id)) throw notFound();
    try {
      return await withRetry(() =>
        this.db.transaction().execute(async (trx) => {
          // The row lock orders concurrent updates, so each audit entry's `before` is the
          // previous entry's `after`.
          const before = await trx.selectFrom('clusters').selectAll().where('id', '=', id).forUpdate().executeTakeFirst();
          if (!before) throw notFound();
          // docs/contract/spec.md §8.2: a stored password never follows the record to another host.
          if (before.password_enc !== null && input.password === undefined && !sameOrigin(before.base_url, input.base_url)) {
            throw new BadRequestError(
              "base_url's origin changes: send the password for the new host in AuthPassword",
              { AuthPassword: "required when base_url's origin changes: the stored password is not sent to another host" },
              VALIDATION_FAILED,
            );
          }
          let passwordEnc = before.password_enc;
          let passwordChanged = false;
          if (input.password !== undefined) {
            passwordChanged = before.password_enc === null || this.box.open(before.password_enc) !== input.password;
            if (passwordChanged) passwordEnc = this.box.seal(input.password);
          }
          const after = await trx
            .updateTable('clusters')
            .set({
              name: input.name,
              base_url: input.base_url,
              auth_type: input.auth_type,
              username: input.username,
              password_enc: passwordEnc,
              rate_limit: input.rate_limit,
              description: input.description,
              updated_at: new Date(),
            })
            .where('id', '=', id)
            .returningAll()
            .executeTakeFirstOrThrow();
          await this.audit(trx, actor, 'cluster.update', id, before, after, passwordChanged);
          return toClusterDto(after);
        }),
      );
    } catch (err) {
      return this.conflict(err);
    }
  }

  async remove(actor: string, id: string): Promise<void> {
    if (!isUuid(id)) throw notFound();
    await this.db.transaction().execute(async (trx) => {
      const before = await trx.selectFrom('clusters').selectAll().where('id', '=', id).forUpdate().executeTakeFirst();
      if (!before) throw notFound();
      await trx.deleteFrom('clusters').where('id', '=', id).execute();
      await this.audit(trx, actor, 'cluster.delete', id, before, null, false);
    });
  }

  async auditLog(opts: { targetId?: string | undefined; action?: string | undefined; limit: number; cursor?: string | undefined }): Promise<AuditPage> {
    let after: [Date, string] | undefined;
    try {
      after = decodeCursor(opts.cursor, ['time', 'uuid']);
    } catch {
      throw new BadRequestError('invalid cursor', { cursor: 'invalid cursor' }, VALIDATION_FAILED);
    }
    let q = this.db
      .selectFrom('audit_entries')
      .selectAll()
      .orderBy('occurred_at', 'desc')
      .orderBy('id', 'desc')
      .limit(opts.limit + 1);
    if (opts.targetId !== undefined) {
      if (!isUuid(opts.targetId)) return { entries: [], next_cursor: null };
      q = q.where('target_id', '=', opts.targetId);
    }
    if (opts.action !== undefined) q = q.where('action', '=', opts.action);
    if (after) {
      const [at, id] = after;
      q = q.where((eb) => eb(eb.refTuple('occurred_at', 'id'), '<', eb.tuple(at, id)));
    }
    const rows = await q.execute();
    // The one keyset page; docs/contract/spec.md §8.3 names its items `entries`.
    const { items, next_cursor } = keysetPage(
      rows,
      opts.limit,
      (r) => [r.occurred_at.toISOString(), r.id],
      (r): AuditEntryDto => ({
        id: r.id,
        occurred_at: r.occurred_at.toISOString(),
        actor: r.actor,
        action: r.action,
        target_type: r.target_type,
        target_id: r.target_id,
        details: r.details,
      }),
    );
    return { entries: items, next_cursor };
  }
}
