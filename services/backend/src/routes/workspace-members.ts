import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Kysely } from 'kysely';
import type { DB } from '@codeagent/db';
import { ListQuery, listResponse } from '@codeagent/service-kit';
import { listMembers } from '../domain/workspaces.js';
import { Member, errors } from './schemas.js';

export interface WorkspaceMembersRoutesOptions {
  db: Kysely<DB>;
}

const Ws = Type.Object({ ws: Type.String({ maxLength: 64 }) });

/**
 * Who is in a workspace, for its members (decision 0225): every member reads the list (names,
 * e-mails, roles), so that the web app can say who changed a file or started a run, and whom to
 * ask for another role. Changing it stays with system administrators (docs/contract/spec.md §4.2).
 */
// eslint-disable-next-line @typescript-eslint/require-await -- a Fastify plugin stays async: avvio turns a throw while it registers (a route without an access rule, 0122) into a register() error (0130)
export const workspaceMembersRoutes: FastifyPluginAsyncTypebox<WorkspaceMembersRoutesOptions> = async (app, { db }) => {
  app.get(
    '/:ws/members',
    {
      config: { access: 'workspace-viewer' },
      schema: {
        tags: ['workspaces'],
        summary: "The workspace's members (any member may read them; only system administrators change them)",
        params: Ws,
        querystring: ListQuery,
        response: { 200: listResponse(Member), ...errors(400, 401, 404) },
      },
    },
    async (req) => listMembers(db, req.params.ws, req.query.limit ?? 100, req.query.cursor),
  );
};
