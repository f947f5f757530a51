import { sql, type Kysely } from 'kysely';
import type { DB } from '@codeagent/db';

/** How long past its end a used ticket is remembered. */
const CLOCK_MARGIN_MS = 5 * 60_000;

/**
 * Records that a lab ticket (decision 0263) is being exchanged for a pass: true the first time,
 * false if it was exchanged before (by any backend instance). Tickets whose time is over are
 * forgotten on the way (each exchange removes them: one row per login to a lab, for a minute).
 */
export async function firstUseOfLabTicket(db: Kysely<DB>, id: string, expiresAt: Date): Promise<boolean> {
  await db
    .deleteFrom('lab_tickets_used')
    .where('expires_at', '<', sql<Date>`now()`)
    .execute();
  const inserted = await db
    .insertInto('lab_tickets_used')
    // Kept a while past the ticket's end: the database's clock, which removes them, may run ahead of ours, which checks the ticket.
    .values({ id, expires_at: new Date(expiresAt.getTime() + CLOCK_MARGIN_MS) })
    .onConflict((oc) => oc.column('id').doNothing())
    .returning('id')
    .execute();
  return inserted.length === 1;
}
