import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ErrorBody, ListPage } from '@codeagent/service-kit';
import { bearer, createAndLogin, startTestBackend, type MemberDto, type TestBackend, type WorkspaceDto } from '../testing.js';

/**
 * docs/contract/seed.md §3 rule 2 under concurrency: 50 parallel requests try to remove or demote the
 * last two admins of a workspace. Exactly one admin must be left, every round.
 */
describe(`last-admin rule under concurrency (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  let users: { id: string; token: string }[];
  beforeAll(async () => {
    b = await startTestBackend();
    users = [await createAndLogin(b, 'x1@example.com'), await createAndLogin(b, 'x2@example.com')];
  });
  afterAll(async () => {
    await b.close();
  });

  const api = (method: string, url: string, payload?: object) =>
    b.app.inject({ method: method as 'GET', url: `/api/v1/platform${url}`, headers: bearer(b.adminToken), ...(payload ? { payload } : {}) });

  for (let round = 1; round <= 5; round++) {
    it(`round ${round}: 50 parallel removals and demotions leave exactly one admin`, async () => {
      const [u1, u2] = users as unknown as [{ id: string }, { id: string }];
      const ws = (await api('POST', '/workspaces', { name: `race ${round}`, admin_user_id: u1.id })).json<WorkspaceDto>().id;
      expect((await api('POST', `/workspaces/${ws}/members`, { user_id: u2.id, role: 'admin' })).statusCode).toBe(201);

      const requests = Array.from({ length: 50 }, (_, i) => {
        const target = i % 2 === 0 ? u1.id : u2.id;
        return i % 4 < 2
          ? api('DELETE', `/workspaces/${ws}/members/${target}`)
          : api('PATCH', `/workspaces/${ws}/members/${target}`, { role: i % 3 === 0 ? 'viewer' : 'editor' });
      });
      const results = await Promise.all(requests);
      const statuses = results.map((r) => r.statusCode);
      // every answer is one of: done, last_admin refused, already gone
      expect(statuses.every((s) => [200, 204, 404, 409].includes(s))).toBe(true);
      const refused = results.filter((r) => r.statusCode === 409).map((r) => r.json<ErrorBody>().error);
      expect(new Set(refused)).toEqual(new Set(['last_admin']));

      const members = (await api('GET', `/workspaces/${ws}/members`)).json<ListPage<MemberDto>>().items;
      expect(members.filter((m) => m.role === 'admin')).toHaveLength(1);
    });
  }
});
